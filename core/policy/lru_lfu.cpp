// LRU and LFU. Per KV head, a key is *used* at a step when the group-reduced
// attention of that step's query on it is at least tau/n, n = the keys that
// query attended (causal, padding excluded); a new key counts as used at its
// own step. LRU ranks by the step (= query position) of the last use, LFU by
// the number of uses; ties keep the more recent position (the shared top-k).
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/host_paths.h"
#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"
#include "core/policy/select.h"

namespace kvlens {
namespace {

class UsePolicy : public ScorerPolicy {
public:
    UsePolicy(const PolicyInfo& info, PolicyConfig config, bool frequency)
        : ScorerPolicy(info, std::move(config)), m_frequency(frequency), m_tau(this->config().getReal("tau")) {}

    void observe(const LayerState& state, const Observation& obs) override {
        if (!obs.probs.defined()) return;
        if (onHost(obs.probs.device())) return observeOnHost(state, obs);
        const int64_t H = state.numKvHeads, n = obs.probs.size(1), L = obs.probs.size(2);
        const at::Tensor attn = reduceGroups(obs.probs.to(at::kFloat), H, config().gqa);  // [Hkv, n, L]
        const at::Device dev = attn.device();
        const at::Tensor pos = entryPositions(state).to(dev).narrow(1, 0, L).unsqueeze(1);  // [Hkv, 1, L]
        const at::Tensor qpos =
            at::tensor(obs.queryPositions, at::TensorOptions().dtype(at::kLong)).to(dev).view({1, n, 1});
        // Each row is one step: its query, the keys it saw, its threshold.
        const at::Tensor seen = pos <= qpos;
        const at::Tensor attended = seen.sum(-1, /*keepdim=*/true).to(at::kFloat);
        const at::Tensor used = (seen & (attn >= attended.reciprocal() * m_tau)) | (pos == qpos);
        at::Tensor stats = m_stats.grown(state.layer, H, L, dev).narrow(1, 0, L);
        if (m_frequency) {
            stats.add_(used.sum(1).to(at::kFloat));
        } else {
            const at::Tensor when = qpos.to(at::kFloat).expand(used.sizes());
            const at::Tensor last = when.masked_fill(~used, -std::numeric_limits<float>::infinity()).amax(1);
            stats.copy_(at::maximum(stats, last));
        }
    }
    void applied(int64_t layer, const std::vector<std::vector<int64_t>>& keep) override {
        m_stats.realign(layer, keep);
    }

protected:
    at::Tensor score(const LayerState& state) override { return m_stats.forState(state); }

    // The same rule as the tensor path, as one loop on the CPU (a step's
    // dozen small ATen ops cost more than the arithmetic).
    void observeOnHost(const LayerState& state, const Observation& obs) {
        const int64_t H = state.numKvHeads, Hq = obs.probs.size(0), n = obs.probs.size(1), L = obs.probs.size(2);
        const at::Tensor probs = obs.probs.to(at::kFloat).contiguous();
        const float* p = probs.data_ptr<float>();
        at::Tensor& stats = m_stats.grown(state.layer, H, L, at::kCPU);
        float* st = stats.data_ptr<float>();
        const int64_t cap = stats.size(1);
        m_reduced.resize(static_cast<size_t>(L));
        float* reduced = m_reduced.data();
        for (int64_t h = 0; h < H; ++h) {
            const auto& pos = state.positions[h];
            for (int64_t i = 0; i < n; ++i) {
                const int64_t q = obs.queryPositions[i];
                // Entries are in position order: at a decode step every one was seen.
                int64_t seen = static_cast<int64_t>(pos.size());
                if (!pos.empty() && pos.back() > q) {
                    seen = 0;
                    for (int64_t p0 : pos) seen += p0 <= q ? 1 : 0;
                }
                // As the tensor path rounds it: (1/n in fp32) × tau.
                const float threshold = (1.0f / static_cast<float>(std::max<int64_t>(seen, 1))) * static_cast<float>(m_tau);
                reduceGroupRow(p, H, Hq, n, L, h, i, static_cast<int64_t>(pos.size()), config().gqa, reduced);
                float* row = st + h * cap;
                const auto qf = static_cast<float>(q);
                auto use = [&](size_t e, bool used) {  // LFU counts the use, LRU remembers its step
                    row[e] = m_frequency ? row[e] + (used ? 1.0f : 0.0f) : (used ? std::max(row[e], qf) : row[e]);
                };
                if (seen == static_cast<int64_t>(pos.size()) && !pos.empty() && pos.back() == q) {
                    // A decode step: every entry seen, the query's own key last.
                    const size_t last = pos.size() - 1;
                    for (size_t e = 0; e < last; ++e) use(e, reduced[e] >= threshold);
                    use(last, true);
                    continue;
                }
                for (size_t e = 0; e < pos.size(); ++e) use(e, pos[e] == q || (pos[e] <= q && reduced[e] >= threshold));
            }
        }
    }

private:
    bool m_frequency;  // LFU: count uses; LRU: remember the last one
    double m_tau;
    EntryStats m_stats;
    std::vector<float> m_reduced;  // one group-reduced row (kept: a step would allocate it per layer)
};

template <bool Frequency>
std::unique_ptr<Policy> makeUse(const PolicyInfo& info, PolicyConfig config) {
    return std::make_unique<UsePolicy>(info, std::move(config), Frequency);
}

const BuiltinMaker kLru{"lru", makeUse<false>};
const BuiltinMaker kLfu{"lfu", makeUse<true>};

}  // namespace

}  // namespace kvlens
