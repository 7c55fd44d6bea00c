// The hindsight oracle (issue 20): not a policy anyone can deploy, but the
// upper bound every real policy is measured against. It compresses once, at
// the end of the prompt, to the same budget, keeping per KV head the entries
// that will receive the most attention over the run's next predictions —
// the full cache's attention (every query head of the group summed) of the
// last prompt query and of the next `horizon` decode queries, which the
// Session reads ahead (LayerState::future). No sinks, no window.
#include <ATen/ATen.h>

#include <limits>

#include "core/error.h"
#include "core/policy/policies.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class OraclePolicy : public ScorerPolicy {
public:
    using ScorerPolicy::ScorerPolicy;

protected:
    at::Tensor score(const LayerState& state) override {
        if (!state.future.defined())
            throw Error("the hindsight oracle has no future attention to choose from (it runs inside a Session)");
        const at::Tensor future = state.future.to(at::kCPU, at::kFloat).contiguous();  // [Hkv, P] by position
        const int64_t H = state.numKvHeads, L = state.maxLength(), P = future.size(1);
        at::Tensor out = at::full({H, L}, std::numeric_limits<float>::quiet_NaN());
        const float* f = future.data_ptr<float>();
        float* o = out.data_ptr<float>();
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < state.length(h); ++i) {
                const int64_t p = state.positions[h][static_cast<size_t>(i)];
                // A token the future does not cover (generated after the prompt) is never dropped for it.
                o[h * L + i] = p < P ? f[h * P + p] : std::numeric_limits<float>::infinity();
            }
        return out;
    }
};

}  // namespace

std::unique_ptr<Policy> makeOracle(const PolicyInfo& info, PolicyConfig config) {
    return std::unique_ptr<Policy>(new OraclePolicy(info, std::move(config)));
}

}  // namespace kvlens
