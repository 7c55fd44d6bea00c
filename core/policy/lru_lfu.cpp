// LRU and LFU. Per KV head, a key is *used* at a step when the group-reduced
// attention of that step's query on it is at least tau/n, n = the keys that
// query attended (causal, padding excluded); a new key counts as used at its
// own step. LRU ranks by the step (= query position) of the last use, LFU by
// the number of uses; ties keep the more recent position (the shared top-k).
#include <ATen/ATen.h>

#include <limits>

#include "core/policy/attention.h"
#include "core/policy/policies.h"
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

private:
    bool m_frequency;  // LFU: count uses; LRU: remember the last one
    double m_tau;
    EntryStats m_stats;
};

}  // namespace

std::unique_ptr<Policy> makeLru(const PolicyInfo& info, PolicyConfig config) {
    return std::unique_ptr<Policy>(new UsePolicy(info, std::move(config), false));
}

std::unique_ptr<Policy> makeLfu(const PolicyInfo& info, PolicyConfig config) {
    return std::unique_ptr<Policy>(new UsePolicy(info, std::move(config), true));
}

}  // namespace kvlens
