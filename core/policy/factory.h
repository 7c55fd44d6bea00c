#pragma once
// Builds the policy a resolved config names (see parsePolicySpec), and adds
// policies to the registry. Internal to core (Policy uses ATen).
//
// A built-in policy is one file and one line of the registry's table
// (registry.cpp: its PolicyInfo). Its file defines the policy and names its
// maker once, at namespace scope:
//     const BuiltinMaker kMaker{"knorm", construct<KnormPolicy>};
// (core/CMakeLists.txt links the policy library whole, so that every such
// line runs at start-up.) docs/policies.md "Adding a policy" walks through it.
#include <memory>
#include <string>
#include <vector>

#include "core/policy/policy.h"

namespace kvlens {

using PolicyMaker = std::unique_ptr<Policy> (*)(const PolicyInfo& info, PolicyConfig config);

// The maker of a policy whose constructor takes (info, config).
template <class P>
std::unique_ptr<Policy> construct(const PolicyInfo& info, PolicyConfig config) {
    return std::make_unique<P>(info, std::move(config));
}

// Names the maker of the built-in policy `id` (whose info the registry's
// table holds). Run once per id, at static initialisation.
struct BuiltinMaker {
    BuiltinMaker(const char* id, PolicyMaker make);
};

// Throws ArgumentError for an unknown id, Error for a registered id without a
// maker (a policy file left out of the build).
std::unique_ptr<Policy> makePolicy(const PolicyConfig& config);

// The ids that have a maker, sorted (tests hold them against the registry).
std::vector<std::string> policyMakerIds();

// Adds a policy: its info to the registry (the CLI's --policy and --help,
// the GUI's controls, the conformance tests all read it) and its maker here.
// ArgumentError as registerPolicyInfo().
void registerPolicy(PolicyInfo info, PolicyMaker make);

}  // namespace kvlens
