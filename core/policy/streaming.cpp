// StreamingLLM (Xiao et al. 2023): S attention sinks + the last B - S
// tokens. `rerotate` (position shift) is the cache's business: the Session
// builds the KvCache with CacheOptions::rerotate; the plan is the same.
#include <algorithm>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class StreamingPolicy : public ScorerPolicy {
public:
    StreamingPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)), m_sinks(this->config().getInt("sinks")) {}
    bool positionalBand(int64_t budget, PositionBand* band) const override {
        const int64_t B = std::max<int64_t>(0, budget), sinks = std::min(m_sinks, B);
        *band = {sinks, B - sinks};
        return true;
    }

protected:
    at::Tensor score(const LayerState&) override { return {}; }
    int64_t sinks(const LayerState&) const override { return m_sinks; }
    int64_t window(const LayerState& state) const override { return std::max<int64_t>(0, state.budget - m_sinks); }

private:
    int64_t m_sinks;
};

const BuiltinMaker kMaker{"streaming", construct<StreamingPolicy>};

}  // namespace

}  // namespace kvlens
