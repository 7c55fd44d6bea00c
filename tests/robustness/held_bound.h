#pragma once
// The most entries a policy may hold per KV head after `steps` decode steps
// (POLICIES.md "schedule"): every_step trims back to the budget after each
// token, every_n(N) lets up to N-1 tokens wait for the next trim, and
// prefill_once appends generated tokens without ever evicting them.
#include <cstdint>
#include <string>

#include "core/policy/policy_info.h"
#include "core/run/trace.h"

namespace kvlens::test {

inline int64_t heldBound(const PolicyTrace& p, const LayerTrace& l, int64_t steps) {
    // A policy that allocates per head (heads=adaptive: Ada-KV, AnDPro, KVzip)
    // may give one KV head up to the layer's whole budget (the layer total stays Hkv x B).
    const PolicyConfig c = parsePolicySpec(p.label);
    const int64_t budget = c.has("heads") && c.text("heads") == "adaptive"
                               ? l.budget * static_cast<int64_t>(l.heads.size())
                               : l.budget;
    if (p.schedule == "every_step") return budget;
    if (p.schedule.rfind("every_n(", 0) == 0) return budget + std::stoll(p.schedule.substr(8)) - 1;
    return budget + steps;
}

}  // namespace kvlens::test
