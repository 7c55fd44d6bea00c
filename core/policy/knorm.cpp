// Key norm (Devoto et al., EMNLP 2024): keys with a low L2 norm draw the most
// attention, so the lowest norms stay; no attention needed. The first layers
// attend broadly and are skipped (keep everything) by default.
#include <ATen/ATen.h>

#include <algorithm>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class KnormPolicy : public ScorerPolicy {
public:
    KnormPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)), m_skip(this->config().getIntList("skip_layers")) {}

    Plan plan(const LayerState& state) override {
        if (std::find(m_skip.begin(), m_skip.end(), state.layer) != m_skip.end()) return keepEverything(state);
        return ScorerPolicy::plan(state);
    }

protected:
    at::Tensor score(const LayerState& state) override {
        return state.keys.to(at::kFloat).pow(2).sum(-1).sqrt().neg();
    }

private:
    std::vector<int64_t> m_skip;
};

const BuiltinMaker kMaker{"knorm", construct<KnormPolicy>};

}  // namespace

}  // namespace kvlens
