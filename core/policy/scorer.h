#pragma once
// The shared plan of every policy that ranks entries (kvpress's
// ScorerPress): a policy computes scores [Hkv, L] (higher = keep) and names
// its protected sets; this base keeps the sinks and the window, then fills
// the rest of the budget by top-k per head (heads=uniform) or by Ada-KV's
// layer-wide allocation with a per-head floor (heads=adaptive, alpha).
// Two wrappers compose with every scorer: CriticalKV (critical=true,
// first_stage) and ChunkKV (chunk_length); select=threshold keeps every
// candidate scoring at least `threshold` instead of the best up to the budget.
// Internal to core (uses ATen).
#include <ATen/core/Tensor.h>

#include "core/policy/policy.h"

namespace kvlens {

class ScorerPolicy : public Policy {
public:
    // Public so that `using ScorerPolicy::ScorerPolicy` gives each (abstract
    // until it scores) policy a public constructor.
    ScorerPolicy(const PolicyInfo& info, PolicyConfig config);
    Plan plan(const LayerState& state) override;

protected:
    // [Hkv, L] (any float dtype and device), higher = keep; values on
    // protected entries and padding are ignored. Undefined when the rules
    // alone decide (then ties keep the most recent entries).
    virtual at::Tensor score(const LayerState& state) = 0;
    // The protected sets of a layer (they count against state.budget).
    virtual int64_t sinks(const LayerState& state) const { return (void)state, 0; }
    virtual int64_t window(const LayerState& state) const { return (void)state, 0; }

private:
    bool m_adaptive;
    double m_alpha;
    int64_t m_chunk;     // ChunkKV's chunk_length (1: off)
    bool m_critical;     // CriticalKV's value-norm second stage
    double m_firstStage;
    bool m_threshold;    // select=threshold: keep every candidate scoring >= m_tau
    float m_tau;
};

// Keeps every entry (full; layers a policy skips); scores NaN, reasons
// Score except the given protected sets.
Plan keepEverything(const LayerState& state, int64_t sinks = 0, int64_t window = 0);

}  // namespace kvlens
