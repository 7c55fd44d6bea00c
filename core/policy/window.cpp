// Sliding window / FIFO: the whole budget is the protected window, so the
// last B entries stay and no score is involved.
#include <algorithm>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class WindowPolicy : public ScorerPolicy {
public:
    using ScorerPolicy::ScorerPolicy;
    bool positionalBand(int64_t budget, PositionBand* band) const override {
        *band = {0, std::max<int64_t>(0, budget)};
        return true;
    }

protected:
    at::Tensor score(const LayerState&) override { return {}; }
    int64_t window(const LayerState& state) const override { return state.budget; }
};

const BuiltinMaker kMaker{"window", construct<WindowPolicy>};

}  // namespace

}  // namespace kvlens
