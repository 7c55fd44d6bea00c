#include "core/policy/scorer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/policy/select.h"

namespace kvlens {
namespace {

// Plan with every entry evicted, scores NaN, and the protected sets marked
// kept; returns the protected sets per head.
std::vector<Protected> startPlan(const LayerState& state, int64_t sinks, int64_t window, int64_t budget,
                                 Plan& plan) {
    const int64_t H = state.numKvHeads;
    plan.keep.assign(static_cast<size_t>(H), {});
    plan.reasons.assign(static_cast<size_t>(H), {});
    std::vector<Protected> prot;
    for (int64_t h = 0; h < H; ++h) {
        const int64_t len = state.length(h);
        const Protected p = protectedSet(len, sinks, window, budget);
        auto& reasons = plan.reasons[static_cast<size_t>(h)];
        reasons.assign(static_cast<size_t>(len), TokenStatus::Evicted);
        std::fill_n(reasons.begin(), p.sinks, TokenStatus::Sink);
        std::fill(reasons.end() - p.window, reasons.end(), TokenStatus::Window);
        prot.push_back(p);
    }
    return prot;
}

// Fills plan.keep from the reasons (sorted by construction): the runs of
// kept entries between the evicted ones.
void finishPlan(Plan& plan) {
    for (size_t h = 0; h < plan.reasons.size(); ++h) {
        auto& keep = plan.keep[h];
        keep.resize(plan.reasons[h].size());
        int64_t next = 0, out = 0;  // next entry to keep from, entries kept so far
        auto keepUpTo = [&](int64_t end) {
            std::iota(keep.begin() + out, keep.begin() + out + (end - next), next);
            out += end - next;
        };
        forEachEvicted(plan.reasons[h], [&](int64_t i) {
            keepUpTo(i);
            next = i + 1;
        });
        keepUpTo(static_cast<int64_t>(plan.reasons[h].size()));
        keep.resize(static_cast<size_t>(out));
    }
}

// Scores on the CPU as fp32 [H, L], NaN wherever a rule decides or nothing
// is stored: the (often strided) score view copied in place, range by range.
at::Tensor displayScores(const at::Tensor& raw, const LayerState& state, const std::vector<Protected>& prot) {
    const int64_t H = state.numKvHeads, L = state.maxLength();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    at::Tensor s = at::empty({H, L}, at::TensorOptions().dtype(at::kFloat));
    float* p = s.data_ptr<float>();
    const at::Tensor src = raw.defined() ? raw.to(at::kCPU, at::kFloat) : at::Tensor();
    const float* q = src.defined() ? src.data_ptr<float>() : nullptr;
    const int64_t s0 = q ? src.stride(0) : 0, s1 = q ? src.stride(1) : 0;
    for (int64_t h = 0; h < H; ++h) {
        float* row = p + h * L;
        const int64_t len = state.length(h), from = prot[h].sinks, to = len - prot[h].window;
        if (!q) {
            std::fill(row, row + L, nan);
            continue;
        }
        std::fill(row, row + from, nan);
        std::fill(row + to, row + L, nan);
        const float* in = q + h * s0;
        if (s1 == 1)
            std::copy(in + from, in + to, row + from);
        else
            for (int64_t i = from; i < to; ++i) row[i] = in[i * s1];
    }
    return s;
}

// The candidates of one head: entries no rule kept, with their scores.
std::vector<Candidate> candidates(const LayerState& state, const Plan& plan, int64_t h) {
    const int64_t L = plan.scores.size(1);
    const float* s = plan.scores.data_ptr<float>();
    std::vector<Candidate> out;
    out.reserve(static_cast<size_t>(state.length(h)));
    for (int64_t i = 0; i < state.length(h); ++i)
        if (plan.reasons[h][i] == TokenStatus::Evicted) out.push_back({s[h * L + i], state.positions[h][i], h, i});
    return out;
}

constexpr float kLowest = -std::numeric_limits<float>::infinity();

// The worst of the entries [from, to) as ranksBefore orders them: lowest
// score (NaN as -inf), then the older position, which is the lower index
// (a head's entries are in position order). A vectorised minimum, then the
// first entry at it: the every_step hot path, one call per head per step
// over the whole cache.
int64_t worstCandidate(const float* row, int64_t from, int64_t to) {
    float low = std::numeric_limits<float>::infinity();
#pragma omp simd reduction(min : low)
    for (int64_t i = from; i < to; ++i) {
        const float v = row[i] == row[i] ? row[i] : kLowest;
        low = v < low ? v : low;
    }
    int64_t worst = from;
    while ((row[worst] == row[worst] ? row[worst] : kLowest) != low) ++worst;
    return worst;
}

// Keeps the `slots` best candidates of head h by score. Every_step policies
// drop one entry per head per step: then a few linear scans over the
// candidates' range (between the sinks and the window) find the worst,
// without building and selecting candidate lists.
void keepBest(const LayerState& state, Plan& plan, int64_t h, int64_t slots, const Protected& prot) {
    auto& reasons = plan.reasons[h];
    const int64_t len = state.length(h), from = prot.sinks, to = len - prot.window;
    const int64_t drop = (to - from) - std::max<int64_t>(0, slots);
    if (drop > 16) {
        for (const Candidate& c : bestUnordered(candidates(state, plan, h), slots)) reasons[c.index] = TokenStatus::Score;
        return;
    }
    std::fill(reasons.begin() + from, reasons.begin() + to, TokenStatus::Score);
    const float* row = plan.scores.data_ptr<float>() + h * plan.scores.size(1);
    const auto& pos = state.positions[h];
    if (drop == 1) {
        reasons[worstCandidate(row, from, to)] = TokenStatus::Evicted;
        return;
    }
    for (int64_t d = 0; d < drop; ++d) {
        int64_t worst = -1;
        float worstScore = 0;
        for (int64_t i = from; i < to; ++i) {
            if (reasons[i] != TokenStatus::Score) continue;  // dropped by an earlier scan
            const float v = std::isnan(row[i]) ? kLowest : row[i];
            if (worst < 0 || v < worstScore || (v == worstScore && pos[i] < pos[worst])) {
                worst = i;
                worstScore = v;
            }
        }
        reasons[worst] = TokenStatus::Evicted;
    }
}

// ChunkKV (kvpress ChunkKVPress): every candidate's score becomes the mean
// score of its chunk, the positions [c·C, (c+1)·C), over every KV head's
// scored entries in it; so the heads keep the same whole chunks (the last
// one kept may be cut to fit the budget, ties going to its later entries).
// Protected entries and NaN scores take no part.
void chunkScores(const LayerState& state, Plan& plan, int64_t C) {
    const int64_t H = state.numKvHeads, L = plan.scores.size(1);
    float* s = plan.scores.data_ptr<float>();
    std::vector<double> sum(static_cast<size_t>(state.seqLen / C + 1), 0.0);
    std::vector<int64_t> count(sum.size(), 0);
    auto chunkOf = [&](int64_t h, int64_t i) { return static_cast<size_t>(state.positions[h][i] / C); };
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < state.length(h); ++i) {
            const float v = s[h * L + i];
            if (plan.reasons[h][i] != TokenStatus::Evicted || std::isnan(v)) continue;
            const size_t c = chunkOf(h, i);
            if (c >= sum.size()) sum.resize(c + 1, 0.0), count.resize(c + 1, 0);
            sum[c] += v;
            ++count[c];
        }
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < state.length(h); ++i) {
            float& v = s[h * L + i];
            if (plan.reasons[h][i] == TokenStatus::Evicted && !std::isnan(v)) {
                const size_t c = chunkOf(h, i);
                v = static_cast<float>(sum[c] / static_cast<double>(count[c]));
            }
        }
}

// ‖W_O v‖₁ of every entry per KV head [Hkv, L] (CPU fp32): each query head's
// slice of the output projection applied to the values it reads, the L1
// norm over the hidden size, averaged over the query heads of the group.
at::Tensor projectedValueNorms(const LayerState& state) {
    const int64_t Hq = state.numHeads, Hkv = state.numKvHeads, G = Hq / Hkv;
    const at::Tensor values = state.values.to(at::kFloat);  // [Hkv, L, D]
    const int64_t L = values.size(1), D = values.size(2);
    const at::Tensor wo = state.outputProjection.to(values.device(), at::kFloat);  // [E, Hq*D]
    at::Tensor out = at::zeros({Hkv, L}, values.options());
    for (int64_t q = 0; q < Hq; ++q)  // a head at a time: [L, E] stays small at long contexts
        out[q / G] += at::matmul(values[q / G], wo.narrow(1, q * D, D).t()).abs().sum(-1);
    return (out / static_cast<double>(G)).to(at::kCPU).contiguous();
}

constexpr double kCriticalEpsilon = 1e-4;  // kvpress CriticalKVPress's default

// CriticalKV (kvpress CriticalKVPress): per head, the first stage keeps the
// best ⌊first_stage · slots⌋ candidates by the policy's own scores (their
// scores become +inf, NaN once the plan is made); the rest compete by
// (score + ε) · ‖W_O v‖₁. `slots` is what the head's budget leaves after
// its protected entries.
void criticalScores(const LayerState& state, Plan& plan, const std::vector<Protected>& prot, int64_t budget,
                    double firstStage) {
    if (!state.values.defined() || !state.outputProjection.defined())
        throw Error("critical=true needs the cache's values and the layer's output projection");
    const at::Tensor wov = projectedValueNorms(state);
    const int64_t H = state.numKvHeads, L = plan.scores.size(1);
    float* s = plan.scores.data_ptr<float>();
    const float* w = wov.data_ptr<float>();
    for (int64_t h = 0; h < H; ++h) {
        const int64_t slots = std::max<int64_t>(0, budget - prot[h].count());
        std::vector<Candidate> cands = candidates(state, plan, h);
        if (static_cast<int64_t>(cands.size()) <= slots) continue;  // nothing to evict
        const auto first = static_cast<int64_t>(std::floor(firstStage * static_cast<double>(slots) + 1e-9));
        for (const Candidate& c : cands) {
            float& v = s[h * L + c.index];
            if (!std::isnan(v)) v = static_cast<float>((v + kCriticalEpsilon) * w[h * wov.size(1) + c.index]);
        }
        for (const Candidate& c : bestUnordered(std::move(cands), first))
            s[h * L + c.index] = std::numeric_limits<float>::infinity();
    }
}

}  // namespace

ScorerPolicy::ScorerPolicy(const PolicyInfo& info, PolicyConfig config)
    : Policy(info, std::move(config)),
      m_adaptive(this->config().has("heads") && this->config().text("heads") == "adaptive"),
      m_alpha(this->config().has("alpha") ? this->config().getReal("alpha") : 0.0),
      m_chunk(this->config().has("chunk_length") ? this->config().getInt("chunk_length") : 1),
      m_critical(this->config().has("critical") && this->config().getBool("critical")),
      m_firstStage(this->config().has("first_stage") ? this->config().getReal("first_stage") : 0.5),
      m_threshold(thresholdSelect(this->config())),
      m_tau(this->config().has("threshold") ? static_cast<float>(this->config().getReal("threshold")) : 0.f) {
    if (!m_threshold) return;
    // What divides a budget has nothing to divide when a threshold decides.
    const PolicyConfig& c = this->config();
    for (const auto& [name, neutral] : std::vector<std::pair<std::string, std::string>>{
             {"heads", "uniform"}, {"alloc", "uniform"}, {"critical", "false"}})
        if (c.has(name) && c.text(name) != neutral)
            throw ArgumentError(c.id + ": " + name + "=" + c.text(name) + " does not apply with select=threshold (set " +
                                name + "=" + neutral + "; a threshold keeps what scores enough, no budget is divided)");
}

Plan ScorerPolicy::plan(const LayerState& state) {
    const int64_t B = std::max<int64_t>(0, state.budget), H = state.numKvHeads;
    const int64_t S = sinks(state), W = window(state);
    Plan plan;
    const std::vector<Protected> prot = startPlan(state, S, W, B, plan);
    plan.scores = displayScores(score(state), state, prot);
    // The wrappers that compose with any scorer: CriticalKV, then ChunkKV.
    if (m_critical) criticalScores(state, plan, prot, B, m_firstStage);
    if (m_chunk > 1) chunkScores(state, plan, m_chunk);

    int64_t total = 0, protectedTotal = 0;
    for (int64_t h = 0; h < H; ++h) {
        total += state.length(h);
        protectedTotal += prot[h].count();
    }
    if (m_threshold) {
        // DMS-style: every candidate scoring at least tau stays, however
        // many that is; a NaN score (a rule's, or none) does not reach it.
        const float* s = plan.scores.data_ptr<float>();
        const int64_t L = plan.scores.size(1);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = prot[h].sinks; i < state.length(h) - prot[h].window; ++i)
                if (s[h * L + i] >= m_tau) plan.reasons[h][i] = TokenStatus::Score;
    } else if (m_adaptive && total > H * B) {
        // Ada-KV's safeguard: ⌊α·(B − W)⌋ of what the rules leave to scores
        // (the epsilon keeps 0.29·100 at 29 despite binary fractions).
        const Protected nominal = protectedSet(std::numeric_limits<int64_t>::max(), S, W, B);
        const double share = m_alpha * static_cast<double>(B - nominal.count());
        const auto floorPerHead = static_cast<int64_t>(std::floor(share + 1e-9));
        std::vector<std::vector<Candidate>> cands;
        for (int64_t h = 0; h < H; ++h) cands.push_back(candidates(state, plan, h));
        for (const auto& head : allocateAdaptive(cands, floorPerHead, H * B - protectedTotal))
            for (const Candidate& c : head) plan.reasons[c.head][c.index] = TokenStatus::Score;
    } else {
        // Uniform heads, or an adaptive layer that fits: top-k per head,
        // which keeps a whole head when it fits its budget.
        for (int64_t h = 0; h < H; ++h)
            keepBest(state, plan, h, m_adaptive ? state.length(h) : B - prot[h].count(), prot[h]);
    }
    if (m_critical) {  // the first stage's picks: decided by the policy's own score, not the one shown
        float* s = plan.scores.data_ptr<float>();
        for (int64_t i = 0; i < plan.scores.numel(); ++i)
            if (std::isinf(s[i])) s[i] = std::numeric_limits<float>::quiet_NaN();
    }
    finishPlan(plan);
    return plan;
}

Plan keepEverything(const LayerState& state, int64_t sinks, int64_t window) {
    Plan plan;
    const std::vector<Protected> prot = startPlan(state, sinks, window, std::numeric_limits<int64_t>::max(), plan);
    for (auto& head : plan.reasons)
        for (auto& r : head)
            if (r == TokenStatus::Evicted) r = TokenStatus::Score;
    plan.scores = displayScores(at::Tensor(), state, prot);
    finishPlan(plan);
    return plan;
}

}  // namespace kvlens
