#include "core/run/what_if.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "core/error.h"
#include "core/model/model.h"

namespace kvlens {

ModelFidelity compareModels(const Model& reference, const Model& other, const std::vector<int64_t>& tokens) {
    if (tokens.empty()) throw ArgumentError("compareModels: no tokens");
    if (reference.config().vocabSize != other.config().vocabSize)
        throw ArgumentError("the two models have different vocabularies");
    c10::InferenceMode inference;
    auto logp = [&](const Model& m) {
        KvCache cache = m.newCache();
        return at::log_softmax(m.forward(tokens, cache).logits.to(at::kDouble).cpu(), -1);  // [n, V]
    };
    const at::Tensor p = logp(reference), q = logp(other);
    const at::Tensor kl = (p.exp() * (p - q)).sum(-1);  // [n]
    ModelFidelity f;
    f.positions = static_cast<int64_t>(tokens.size());
    f.meanKl = kl.mean().item<double>();
    f.maxKl = kl.max().item<double>();
    f.top1 = (p.argmax(-1) == q.argmax(-1)).to(at::kDouble).mean().item<double>();
    return f;
}

}  // namespace kvlens
