#pragma once
// Builds the policy a resolved config names (see parsePolicySpec).
// Internal to core (Policy uses ATen).
#include <memory>

#include "core/policy/policy.h"

namespace kvlens {

// Throws ArgumentError for an unknown id.
std::unique_ptr<Policy> makePolicy(const PolicyConfig& config);

}  // namespace kvlens
