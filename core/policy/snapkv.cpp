// SnapKV (Li et al. 2024, FasterDecoding/SnapKV), and with other defaults
// PyramidKV (alloc=pyramid; the Session asks policyBudgets for the layer
// budgets) and Ada-KV (heads=adaptive, alpha=0.2). The last W queries attend
// to the current entries; each query head sums its window rows over the keys
// before the window, pools that sum along those keys, and the group reduces;
// the window itself is always kept.
#include "core/policy/snapkv.h"

#include <ATen/ATen.h>

#include "core/policy/factory.h"

namespace kvlens {

WindowScorer::WindowScorer(const PolicyInfo& info, PolicyConfig config)
    : ScorerPolicy(info, std::move(config)),
      m_window(this->config().getInt("window")),
      m_kernel(this->config().getInt("kernel")),
      m_pool(poolKind(this->config().text("pool"))),
      m_queries(m_window) {}

void WindowScorer::observe(const LayerState& state, const Observation& obs) { m_queries.add(state.layer, obs); }

at::Tensor WindowScorer::windowAttention(const LayerState& state) const {
    const at::Tensor q = m_queries.queries(state.layer);
    if (!q.defined()) return {};
    return attentionOver(state, q, m_queries.positions(state.layer));
}

at::Tensor WindowScorer::beforeWindow(const LayerState& state) const {
    return entryMask(state) & ~edgeMask(state, 0, m_window);
}

namespace {

class SnapKvPolicy : public WindowScorer {
public:
    using WindowScorer::WindowScorer;

protected:
    at::Tensor score(const LayerState& state) override {
        const at::Tensor attn = windowAttention(state);  // [Hkv, G, m, L]
        if (!attn.defined()) return {};
        const int64_t Hkv = attn.size(0), G = attn.size(1), L = attn.size(3);
        const at::Tensor pooled = pool1d(attn.sum(2), beforeWindow(state).unsqueeze(1), kernel(), pool());
        return reduceGroups(pooled.reshape({Hkv * G, L}), Hkv, config().gqa);
    }
};

const BuiltinMaker kSnapKv{"snapkv", construct<SnapKvPolicy>};
const BuiltinMaker kPyramidKv{"pyramidkv", construct<SnapKvPolicy>};
const BuiltinMaker kAdaKv{"adakv", construct<SnapKvPolicy>};

}  // namespace

}  // namespace kvlens
