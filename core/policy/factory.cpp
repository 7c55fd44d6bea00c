#include "core/policy/factory.h"

#include <map>

#include "core/policy/policies.h"

namespace kvlens {

std::unique_ptr<Policy> makePolicy(const PolicyConfig& config) {
    using Maker = std::unique_ptr<Policy> (*)(const PolicyInfo&, PolicyConfig);
    static const std::map<std::string, Maker> makers = {
        {"full", makeFull},           {"window", makeWindow}, {"streaming", makeStreaming},
        {"random", makeRandom},       {"lru", makeLru},       {"lfu", makeLfu},
        {"h2o", makeH2o},             {"tova", makeTova},     {"snapkv", makeSnapKv},
        {"pyramidkv", makeSnapKv},    {"adakv", makeSnapKv},  {"andpro", makeAndPro},
        {"knorm", makeKnorm},
    };
    const PolicyInfo& info = findPolicy(config.id);  // throws for an unknown id
    return makers.at(info.id)(info, config);
}

}  // namespace kvlens
