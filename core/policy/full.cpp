// Full cache: keeps everything; the reference every metric compares against.
#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class FullPolicy : public Policy {
public:
    FullPolicy(const PolicyInfo& info, PolicyConfig config) : Policy(info, std::move(config)) {}
    Plan plan(const LayerState& state) override { return keepEverything(state); }
};

const BuiltinMaker kMaker{"full", construct<FullPolicy>};

}  // namespace

}  // namespace kvlens
