#pragma once
// One maker per policy file (core/policy/<id>.cpp); the factory picks by id.
// Internal to core/policy.
#include <memory>
#include <vector>

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
std::unique_ptr<Policy> makeCake(const PolicyInfo& info, PolicyConfig config);
// CAKE's layer budgets (cake.cpp): the budgets beyond the window W of
// `given` shared out in proportion to each layer's preference, capped at
// N - W, rounded as cake/utils.py adjust_budgets does; window added back.
std::vector<int64_t> cakeLayerBudgets(const std::vector<int64_t>& given, const std::vector<double>& pref, int64_t W,
                                      int64_t N);
std::unique_ptr<Policy> makeDuoAttention(const PolicyInfo& info, PolicyConfig config);
// Scored by the Session (LayerState::sessionScores): the hindsight oracle, KVzip.
std::unique_ptr<Policy> makeOracle(const PolicyInfo& info, PolicyConfig config);
std::unique_ptr<Policy> makeKvzip(const PolicyInfo& info, PolicyConfig config);
// Loads a TorchScript scorer and registers its policy (script_policy.cpp);
// the registry's "script:FILE.pt" specs call it.
std::string loadScriptPolicy(const std::string& file);

}  // namespace kvlens
