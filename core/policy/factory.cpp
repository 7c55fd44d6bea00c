#include "core/policy/factory.h"

#include <map>
#include <mutex>

#include "core/error.h"

namespace kvlens {
namespace {

struct Makers {
    std::mutex mutex;
    std::map<std::string, PolicyMaker> byId;  // the built-in policies' (BuiltinMaker), then registerPolicy()'s
};

Makers& makers() {
    static Makers m;
    return m;
}

}  // namespace

BuiltinMaker::BuiltinMaker(const char* id, PolicyMaker make) {
    Makers& m = makers();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.byId[id] = make;
}

std::unique_ptr<Policy> makePolicy(const PolicyConfig& config) {
    const PolicyInfo& info = findPolicy(config.id);  // throws for an unknown id
    PolicyMaker make = nullptr;
    {
        Makers& m = makers();
        std::lock_guard<std::mutex> lock(m.mutex);
        const auto it = m.byId.find(info.id);
        if (it != m.byId.end()) make = it->second;
    }
    if (!make)
        throw Error("policy '" + info.id + "' is registered but has no maker: its file (core/policy) is not in this build");
    return make(info, config);
}

std::vector<std::string> policyMakerIds() {
    Makers& m = makers();
    std::lock_guard<std::mutex> lock(m.mutex);
    std::vector<std::string> ids;
    for (const auto& [id, make] : m.byId) ids.push_back(id);
    return ids;
}

void registerPolicy(PolicyInfo info, PolicyMaker make) {
    const std::string id = info.id;
    if (!make) throw ArgumentError("policy '" + id + "' has no maker");
    Makers& m = makers();
    std::lock_guard<std::mutex> lock(m.mutex);
    registerPolicyInfo(std::move(info));  // checks the id
    m.byId[id] = make;
}

}  // namespace kvlens
