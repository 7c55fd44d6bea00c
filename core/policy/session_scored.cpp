// Policies whose scores the Session computes ahead, by running the model
// beyond what the run itself reads (LayerState::sessionScores: [Hkv, P] per
// prompt position); the policy only ranks by them at the end of the prompt.
// - The hindsight oracle (issue 20): not a policy anyone can deploy, but the
//   upper bound every real policy is measured against: the full cache's
//   attention of the last prompt query and of the next `horizon` decode
//   queries, summed over the group's query heads. No sinks, no window.
// - KVzip (Kim et al. 2025, snu-mllab/KVzip; kvpress KVzipPress): the model
//   is asked to repeat the prompt; an entry scores the most attention any
//   query of that reconstruction gives it (over the group's query heads).
//   The first `sinks` entries are kept.
#include <ATen/ATen.h>

#include <limits>

#include "core/error.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class SessionScoredPolicy : public ScorerPolicy {
public:
    SessionScoredPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_sinks(this->config().has("sinks") ? this->config().getInt("sinks") : 0) {}

protected:
    int64_t sinks(const LayerState&) const override { return m_sinks; }

    at::Tensor score(const LayerState& state) override {
        if (!state.sessionScores.defined())
            throw Error(info().name + " has no scores to rank by: the Session computes them (it runs only in one)");
        const at::Tensor table = state.sessionScores.to(at::kCPU, at::kFloat).contiguous();  // [Hkv, P] by position
        const int64_t H = state.numKvHeads, L = state.maxLength(), P = table.size(1);
        at::Tensor out = at::full({H, L}, std::numeric_limits<float>::quiet_NaN());
        const float* f = table.data_ptr<float>();
        float* o = out.data_ptr<float>();
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < state.length(h); ++i) {
                const int64_t p = state.positions[h][static_cast<size_t>(i)];
                // A token the table does not cover (generated after the prompt) is never dropped for it.
                o[h * L + i] = p < P ? f[h * P + p] : std::numeric_limits<float>::infinity();
            }
        return out;
    }

private:
    int64_t m_sinks;
};

const BuiltinMaker kOracle{"oracle", construct<SessionScoredPolicy>};
const BuiltinMaker kKvzip{"kvzip", construct<SessionScoredPolicy>};

}  // namespace

}  // namespace kvlens
