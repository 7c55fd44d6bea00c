#pragma once
// The most entries a policy may hold per KV head after `steps` decode steps
// (POLICIES.md "schedule"): every_step trims back to the budget after each
// token, every_n(N) lets up to N-1 tokens wait for the next trim, and
// prefill_once appends generated tokens without ever evicting them.
#include <cstdint>
#include <string>

#include "core/run/trace.h"

namespace kvlens::test {

inline int64_t heldBound(const PolicyTrace& p, const LayerTrace& l, int64_t steps) {
    if (p.schedule == "every_step") return l.budget;
    if (p.schedule.rfind("every_n(", 0) == 0) return l.budget + std::stoll(p.schedule.substr(8)) - 1;
    return l.budget + steps;
}

}  // namespace kvlens::test
