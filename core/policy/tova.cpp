// TOVA (Oren et al. 2024, schwartz-lab-NLP/TOVA): the current query's
// attention row averaged over all query heads of the layer ranks the
// entries; every KV head gets the same scores, hence the same kept set (the
// KV heads of a TOVA layer always hold the same tokens, so entry i is one
// token across heads). No sinks, no window: the new token competes too.
#include <ATen/ATen.h>

#include "core/policy/attention.h"
#include "core/policy/policies.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class TovaPolicy : public ScorerPolicy {
public:
    using ScorerPolicy::ScorerPolicy;

    void observe(const LayerState& state, const Observation& obs) override {
        if (!obs.probs.defined() || obs.probs.size(1) == 0) return;
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

}  // namespace

std::unique_ptr<Policy> makeTova(const PolicyInfo& info, PolicyConfig config) {
    return std::unique_ptr<Policy>(new TovaPolicy(info, std::move(config)));
}

}  // namespace kvlens
