// KeyDiff (Park et al. 2025, arXiv 2504.15364; kvpress KeyDiffPress): a key
// that points where the head's other keys point adds little, so each KV head
// keeps the keys least similar to its anchor, the mean of its held keys'
// unit vectors: score = -cos(k_i, anchor). No attention needed.
#include <ATen/ATen.h>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class KeyDiffPolicy : public ScorerPolicy {
public:
    using ScorerPolicy::ScorerPolicy;

protected:
    at::Tensor score(const LayerState& state) override {
        const at::Tensor keys = state.keys.to(at::kFloat);  // [Hkv, L, D]
        const at::Tensor unit = keys / at::norm(keys, 2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
        // The anchor is over the entries a head holds (a slot freed by an
        // earlier eviction is not a key of that head).
        at::Tensor held = state.valid.defined() ? state.valid.to(at::kFloat).unsqueeze(-1)
                                                : at::ones({keys.size(0), keys.size(1), 1}, keys.options());
        const at::Tensor anchor = (unit * held).sum(1, /*keepdim=*/true) / held.sum(1, /*keepdim=*/true).clamp_min(1);
        return at::cosine_similarity(keys, anchor, -1).neg();  // [Hkv, L]
    }
};

const BuiltinMaker kMaker{"keydiff", construct<KeyDiffPolicy>};

}  // namespace

}  // namespace kvlens
