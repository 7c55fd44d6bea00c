#pragma once
// The SnapKV family's common ground (SnapKV, PyramidKV, Ada-KV, AnDPro): the
// last `window` queries each layer saw, their attention recomputed over the
// current entries at plan time, and the protected window of the last
// `window` entries. Internal to core/policy.
#include <ATen/core/Tensor.h>

#include "core/policy/attention.h"
#include "core/policy/scorer.h"
#include "core/policy/select.h"

namespace kvlens {

class WindowScorer : public ScorerPolicy {
public:
    WindowScorer(const PolicyInfo& info, PolicyConfig config);
    void observe(const LayerState& state, const Observation& obs) override;

protected:
    int64_t window(const LayerState&) const override { return m_window; }
    // The stored queries' attention over the state's entries, [Hkv, G, m, L]
    // (see attentionOver); undefined before any query was observed.
    at::Tensor windowAttention(const LayerState& state) const;
    // [Hkv, L] bool: the keys before the window (what SnapKV scores and pools over).
    at::Tensor beforeWindow(const LayerState& state) const;
    int64_t kernel() const { return m_kernel; }
    PoolKind pool() const { return m_pool; }

private:
    int64_t m_window, m_kernel;
    PoolKind m_pool;
    QueryWindow m_queries;
};

}  // namespace kvlens
