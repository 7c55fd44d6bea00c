#include "fixtures.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvlens::test {

LayerState makeState(const at::Tensor& keys, const at::Tensor& values, int64_t numHeads, int64_t budget,
                     std::vector<std::vector<int64_t>> positions, int64_t layer) {
    LayerState s;
    s.layer = layer;
    s.numLayers = layer + 1;
    s.numHeads = numHeads;
    s.numKvHeads = keys.size(0);
    s.keys = keys;
    s.values = values;
    const int64_t L = keys.size(1);
    if (positions.empty())
        for (int64_t h = 0; h < s.numKvHeads; ++h) {
            positions.emplace_back();
            for (int64_t i = 0; i < L; ++i) positions.back().push_back(i);
        }
    for (const auto& p : positions)
        for (size_t i = 1; i < p.size(); ++i)
            if (p[i] <= p[i - 1]) throw std::invalid_argument("makeState: positions must increase, as in the cache");
    s.positions = std::move(positions);
    bool ragged = false;
    std::vector<uint8_t> valid;
    for (const auto& p : s.positions) {
        ragged = ragged || static_cast<int64_t>(p.size()) != L;
        for (int64_t i = 0; i < L; ++i) valid.push_back(i < static_cast<int64_t>(p.size()));
        if (!p.empty()) s.seqLen = std::max(s.seqLen, p.back() + 1);
    }
    if (ragged) s.valid = at::tensor(valid, at::kByte).view({s.numKvHeads, L}).to(at::kBool);
    s.budget = budget;
    s.promptLength = s.seqLen;
    s.scale = 1.0 / std::sqrt(static_cast<double>(keys.size(2)));
    return s;
}

at::Tensor keysFromWeights(const std::vector<std::vector<double>>& weights) {
    const auto H = static_cast<int64_t>(weights.size()), L = static_cast<int64_t>(weights[0].size());
    at::Tensor k = at::zeros({H, L, 1});
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i) k[h][i][0] = std::log(weights[h][i]);
    return k;
}

Observation onesQueries(int64_t numHeads, const std::vector<int64_t>& qpos, at::Tensor probs) {
    Observation o;
    o.queries = at::ones({numHeads, static_cast<int64_t>(qpos.size()), 1});
    o.queryPositions = qpos;
    o.probs = std::move(probs);
    return o;
}

at::Tensor probsFrom(const std::vector<std::vector<std::vector<float>>>& rows) {
    const auto H = static_cast<int64_t>(rows.size()), n = static_cast<int64_t>(rows[0].size()),
               L = static_cast<int64_t>(rows[0][0].size());
    at::Tensor p = at::zeros({H, n, L});
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < L; ++j) p[h][i][j] = rows[h][i][j];
    return p;
}

std::unique_ptr<Policy> policy(const std::string& spec) { return makePolicy(parsePolicySpec(spec)); }

std::vector<int64_t> ids(std::initializer_list<int64_t> v) { return std::vector<int64_t>(v); }

Driver::Driver(std::unique_ptr<Policy> policy, int64_t numHeads, int64_t numKvHeads, int64_t headDim, int64_t budget,
               uint64_t seed)
    : m_policy(std::move(policy)),
      m_heads(numHeads),
      m_kvHeads(numKvHeads),
      m_dim(headDim),
      m_budget(budget),
      m_cache(1, numKvHeads, headDim, at::kFloat, at::kCPU, nullptr) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const int64_t T = 256;
    m_k = at::randn({T, numKvHeads, headDim}, gen) * 1.5;
    m_v = at::randn({T, numKvHeads, headDim}, gen);
    m_q = at::randn({T, numHeads, headDim}, gen) * 1.5;
}

LayerState Driver::state() const {
    KvCache::Entries e = m_cache.entries(0);
    std::vector<std::vector<int64_t>> pos;
    for (int64_t h = 0; h < m_kvHeads; ++h) pos.push_back(m_cache.positions(0, h));
    LayerState s = makeState(e.k, e.v, m_heads, m_budget, pos);
    s.seqLen = m_cache.seqLen();
    return s;
}

Plan Driver::step(int64_t n) {
    const int64_t first = m_cache.seqLen(), G = m_heads / m_kvHeads;
    m_cache.append(0, m_k.narrow(0, first, n).transpose(0, 1).contiguous(),
                   m_v.narrow(0, first, n).transpose(0, 1).contiguous());
    m_cache.advance(n);
    const LayerState s = state();
    // Naive attention of the new queries over the entries, in entry order.
    const int64_t L = s.keys.size(1);
    at::Tensor probs = at::zeros({m_heads, n, L});
    std::vector<int64_t> qpos;
    for (int64_t i = 0; i < n; ++i) qpos.push_back(first + i);
    for (int64_t h = 0; h < m_heads; ++h)
        for (int64_t i = 0; i < n; ++i) {
            const auto& pos = s.positions[h / G];
            at::Tensor logits = at::full({L}, -std::numeric_limits<float>::infinity());
            for (size_t j = 0; j < pos.size(); ++j)
                if (pos[j] <= qpos[i])
                    logits[j] = (m_q[first + i][h] * s.keys[h / G][j]).sum().item<float>() * s.scale;
            probs[h][i] = at::softmax(logits, 0);
        }
    Observation obs{probs, m_q.narrow(0, first, n).transpose(0, 1).contiguous(), qpos};
    m_policy->observe(s, obs);
    int64_t total = 0;
    for (const auto& p : s.positions) total += static_cast<int64_t>(p.size());
    // As PolicyRun::trim: a budget that is an outcome trims every time, and
    // a policy deciding across layers decides first (here over one layer).
    if (total <= m_kvHeads * m_budget && !budgetIsOutcome(m_policy->config())) return {};
    LayerState planned = s;
    if (m_policy->crossLayer()) {
        std::vector<int64_t> budgets = {m_budget};
        m_policy->planAcrossLayers({s}, budgets);
        planned.budget = budgets[0];
    }
    Plan plan = m_policy->plan(planned);
    m_planned = planned;
    m_cache.apply(0, plan.keep);
    m_policy->applied(0, plan.keep);
    return plan;
}

void expectSameKeeps(const std::string& a, const std::string& b, int64_t heads, int64_t kvHeads, int64_t budget,
                     uint64_t seed) {
    Driver da(policy(a), heads, kvHeads, 8, budget, seed), db(policy(b), heads, kvHeads, 8, budget, seed);
    int trims = 0;
    for (int step = 0; step < 60; ++step) {
        const int64_t n = step == 0 ? 20 : 1;  // a prompt batch, then tokens
        const Plan pa = da.step(n), pb = db.step(n);
        ASSERT_EQ(pa.keep, pb.keep) << a << " vs " << b << " at step " << step;
        trims += pa.keep.empty() ? 0 : 1;
    }
    EXPECT_GT(trims, 30);
}

}  // namespace kvlens::test
