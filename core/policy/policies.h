#pragma once
// One maker per policy file (core/policy/<id>.cpp); the factory picks by id.
// Internal to core/policy.
#include <memory>

#include "core/policy/policy.h"

namespace kvlens {

std::unique_ptr<Policy> makeFull(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeWindow(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeStreaming(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeRandom(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeLru(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeLfu(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeH2o(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeTova(const PolicyInfo& info, PolicyConfig config);
// snapkv, pyramidkv and adakv: one scorer, the registry gives their defaults.
std::unique_ptr<Policy> makeSnapKv(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeAndPro(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeKnorm(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeKeyDiff(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeCur(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeLagKv(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeRkv(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeQFilter(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeExpectedAttention(const PolicyInfo& info, PolicyConfig config);
// Scored by the Session (LayerState::sessionScores): the hindsight oracle, KVzip.
std::unique_ptr<Policy> makeOracle(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeKvzip(const PolicyInfo& info, PolicyConfig config);
// Loads a TorchScript scorer and registers its policy (script_policy.cpp);
// the registry's "script:FILE.pt" specs call it.
std::string loadScriptPolicy(const std::string& file);

}  // namespace kvlens
