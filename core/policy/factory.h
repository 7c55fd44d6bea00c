#pragma once
// Builds the policy a resolved config names (see parsePolicySpec), and adds
// policies to the registry. Internal to core (Policy uses ATen).
#include <memory>

#include "core/policy/policy.h"

namespace kvlens {

using PolicyMaker = std::unique_ptr<Policy> (*)(const PolicyInfo& info, PolicyConfig config);

// Throws ArgumentError for an unknown id.
std::unique_ptr<Policy> makePolicy(const PolicyConfig& config);

// Adds a policy: its info to the registry (the CLI's --policy and --help,
// the GUI's controls, the conformance tests all read it) and its maker here.
// ArgumentError as registerPolicyInfo().
void registerPolicy(PolicyInfo info, PolicyMaker make);

}  // namespace kvlens
