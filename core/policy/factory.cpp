#include "core/policy/factory.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "core/policy/policies.h"

namespace kvlens {
namespace {

// The makers of the built-in policies (registry.cpp has their infos), then
// those registerPolicy() added.
std::map<std::string, PolicyMaker>& makers() {
    static std::map<std::string, PolicyMaker> m = {
        {"full", makeFull},           {"window", makeWindow}, {"streaming", makeStreaming},
        {"random", makeRandom},       {"lru", makeLru},       {"lfu", makeLfu},
        {"h2o", makeH2o},             {"tova", makeTova},     {"snapkv", makeSnapKv},
        {"pyramidkv", makeSnapKv},    {"adakv", makeSnapKv},  {"andpro", makeAndPro},
        {"knorm", makeKnorm},         {"keydiff", makeKeyDiff}, {"cur", makeCur},
        {"lagkv", makeLagKv},         {"rkv", makeRkv},
        {"qfilter", makeQFilter},     {"oracle", makeOracle},
        {"kvzip", makeKvzip},         {"expected_attention", makeExpectedAttention},
        {"cake", makeCake},           {"duo", makeDuoAttention},
    };
    return m;
}

// parsePolicySpec's "script:FILE.pt" (the registry is torch-free; loading a
// module is not).
[[maybe_unused]] const bool kScriptLoaderSet = (setScriptPolicyLoader(&loadScriptPolicy), true);

std::mutex& makersMutex() {
    static std::mutex m;
    return m;
}

}  // namespace

std::unique_ptr<Policy> makePolicy(const PolicyConfig& config) {
    const PolicyInfo& info = findPolicy(config.id);  // throws for an unknown id
    PolicyMaker make = nullptr;
    {
        std::lock_guard<std::mutex> lock(makersMutex());
        make = makers().at(info.id);
    }
    return make(info, config);
}

void registerPolicy(PolicyInfo info, PolicyMaker make) {
    std::lock_guard<std::mutex> lock(makersMutex());
    const std::string id = info.id;
    if (!make) throw ArgumentError("policy '" + id + "' has no maker");
    registerPolicyInfo(std::move(info));  // checks the id
    makers()[id] = make;
}

}  // namespace kvlens
