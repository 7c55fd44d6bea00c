// Sliding window / FIFO: the whole budget is the protected window, so the
// last B entries stay and no score is involved.
#include "core/policy/policies.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class WindowPolicy : public ScorerPolicy {
public:
    using ScorerPolicy::ScorerPolicy;

protected:
    at::Tensor score(const LayerState&) override { return {}; }
    int64_t window(const LayerState& state) const override { return state.budget; }
};

}  // namespace

std::unique_ptr<Policy> makeWindow(const PolicyInfo& info, PolicyConfig config) {
    return std::unique_ptr<Policy>(new WindowPolicy(info, std::move(config)));
}

}  // namespace kvlens
