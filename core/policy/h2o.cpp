// H2O (Zhang et al., NeurIPS 2023, FMInference/H2O): per KV head, the running
// sum of the (group-reduced) attention every query so far gave each kept
// key; a new key starts with its own query's weight on it (its column in the
// step's probs), evicted keys take their sums with them. Keeps the last
// `recent` tokens and the heavy hitters; no sinks (POLICIES.md: early tokens
// survive only because the sum favours them).
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "core/host_paths.h"
#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"
#include "core/policy/select.h"

namespace kvlens {
namespace {

class H2oPolicy : public ScorerPolicy {
public:
    H2oPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_recent(this->config().text("recent") == "B/2" ? kHalfBudget : this->config().getInt("recent")) {}

    void observe(const LayerState& state, const Observation& obs) override {
        if (!obs.probs.defined()) return;
        if (onHostF32(obs.probs)) return observeOnHost(state, obs);
        // Summing the step's rows is feeding them one at a time: each row
        // only covers the keys its query could see.
        const at::Tensor step = reduceGroups(obs.probs.to(at::kFloat), state.numKvHeads, config().gqa).sum(1);
        const int64_t L = step.size(1);
        m_sums.grown(state.layer, state.numKvHeads, L, step.device()).narrow(1, 0, L).add_(step);
    }
    void applied(int64_t layer, const std::vector<std::vector<int64_t>>& keep) override {
        m_sums.realign(layer, keep);
    }

protected:
    at::Tensor score(const LayerState& state) override { return m_sums.forState(state); }
    int64_t window(const LayerState& state) const override {
        return m_recent == kHalfBudget ? std::max<int64_t>(0, state.budget) / 2 : m_recent;
    }

private:
    // recent=B/2: the paper's equal split of the budget between heavy and recent.
    static constexpr int64_t kHalfBudget = -1;
    const int64_t m_recent;
    // The same sums as one loop on the CPU, where a step's handful of small
    // ATen ops costs more than the arithmetic.
    void observeOnHost(const LayerState& state, const Observation& obs) {
        const at::Tensor probs = obs.probs.contiguous();
        const int64_t Hq = probs.size(0), n = probs.size(1), L = probs.size(2), H = state.numKvHeads;
        const float* p = probs.data_ptr<float>();
        at::Tensor& sums = m_sums.grown(state.layer, H, L, at::kCPU);
        float* s = sums.data_ptr<float>();
        const int64_t cap = sums.size(1);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < n; ++i) addGroupRow(p, H, Hq, n, L, h, i, L, config().gqa, s + h * cap, m_scratch);
    }

    std::vector<float> m_scratch;  // addGroupRow's, kept: a step would allocate it per layer
    EntryStats m_sums;
};

const BuiltinMaker kMaker{"h2o", construct<H2oPolicy>};

}  // namespace

}  // namespace kvlens
