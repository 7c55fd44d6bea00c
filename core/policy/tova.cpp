// TOVA (Oren et al. 2024, schwartz-lab-NLP/TOVA): the current query's
// attention row averaged over all query heads of the layer ranks the
// entries; every KV head gets the same scores, hence the same kept set (the
// KV heads of a TOVA layer always hold the same tokens, so entry i is one
// token across heads). No sinks, no window: the new token competes too.
#include <ATen/ATen.h>

#include <algorithm>

#include "core/host_paths.h"
#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class TovaPolicy : public ScorerPolicy {
public:
    using ScorerPolicy::ScorerPolicy;

    void observe(const LayerState& state, const Observation& obs) override {
        if (!obs.probs.defined() || obs.probs.size(1) == 0) return;
        if (onHostF32(obs.probs)) {
            // One loop on the CPU into the kept storage (no per-step tensors).
            const at::Tensor probs = obs.probs.contiguous();
            const int64_t Hq = probs.size(0), n = probs.size(1), L = probs.size(2);
            const float* p = probs.data_ptr<float>();
            at::Tensor& rows = m_row.grown(state.layer, state.numKvHeads, L, at::kCPU);
            float* r = rows.data_ptr<float>();
            const int64_t cap = rows.size(1);
            // Head rows summed one after another (contiguous, vectorisable).
            float* mean = r;  // KV head 0's row, copied to the others below
            std::copy(p + (n - 1) * L, p + n * L, mean);
            for (int64_t h = 1; h < Hq; ++h) {
                const float* row = p + (h * n + n - 1) * L;
                for (int64_t e = 0; e < L; ++e) mean[e] += row[e];
            }
            for (int64_t e = 0; e < L; ++e) mean[e] /= static_cast<float>(Hq);
            for (int64_t kv = 1; kv < state.numKvHeads; ++kv) std::copy(mean, mean + L, r + kv * cap);
            return;
        }
        const at::Tensor row = obs.probs.select(1, obs.probs.size(1) - 1).to(at::kFloat).mean(0);  // [L]
        m_row.set(state.layer, row.unsqueeze(0).expand({state.numKvHeads, row.size(0)}).contiguous());
    }
    void applied(int64_t layer, const std::vector<std::vector<int64_t>>& keep) override {
        m_row.realign(layer, keep);
    }

protected:
    at::Tensor score(const LayerState& state) override { return m_row.forState(state); }

private:
    EntryStats m_row;  // the last row, as [Hkv, L] so that it realigns like any per-entry state
};

const BuiltinMaker kMaker{"tova", construct<TovaPolicy>};

}  // namespace

}  // namespace kvlens
