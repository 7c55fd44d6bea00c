// Full cache: keeps everything; the reference every metric compares against.
#include "core/policy/policies.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class FullPolicy : public Policy {
public:
    FullPolicy(const PolicyInfo& info, PolicyConfig config) : Policy(info, std::move(config)) {}
    Plan plan(const LayerState& state) override { return keepEverything(state); }
};

}  // namespace

std::unique_ptr<Policy> makeFull(const PolicyInfo& info, PolicyConfig config) {
    return std::unique_ptr<Policy>(new FullPolicy(info, std::move(config)));
}

}  // namespace kvlens
