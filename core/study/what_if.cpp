#include "core/study/what_if.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/study/needle_grid.h"
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

std::string KvWhatIf::describe(const ModelConfig& c) const {
    if (kind == Kind::MergeHeads)
        return "KV heads merged " + std::to_string(c.numKvHeads) + " → " + std::to_string(value) +
               " by mean-pooling their K/V projections (GQA/MQA-style)";
    return "every " + std::to_string(value) + " layers read the first one's K/V (CLA-style, " +
           std::to_string((c.numLayers + value - 1) / value) + " of " + std::to_string(c.numLayers) +
           " layers compute K/V)";
}

std::unique_ptr<Model> applyWhatIf(const Model& model, const KvWhatIf& w) {
    return w.kind == KvWhatIf::Kind::MergeHeads ? model.withMergedKvHeads(w.value) : model.withSharedLayerKv(w.value);
}

namespace {

std::string percent(double share) {
    if (!std::isfinite(share)) return "not run";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f %%", 100.0 * share);
    return buf;
}

}  // namespace

std::string WhatIfReport::text(const ModelConfig& c) const {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s, in a model not trained for it: mean KL %.3f nats (max %.3f), top-1 agreement %.1f %% over the "
                  "prompt's %lld positions",
                  whatIf.describe(c).c_str(), fidelity.meanKl, fidelity.maxKl, 100.0 * fidelity.top1,
                  static_cast<long long>(fidelity.positions));
    std::string out = buf;
    if (needleProbes > 0)
        out += "; needle exact match (full cache, " + std::to_string(needleProbes) + " probes) " + percent(needleModel) +
               " as trained, " + percent(needleWhatIf) + " changed";
    return out + ".";
}

WhatIfReport runWhatIf(const std::shared_ptr<const Model>& model, const std::shared_ptr<const Tokenizer>& tokenizer,
                       const KvWhatIf& whatIf, const std::vector<int64_t>& promptTokens, const WhatIfNeedle& needle,
                       const std::atomic<bool>* cancel) {
    WhatIfReport r;
    r.whatIf = whatIf;
    const std::shared_ptr<const Model> changed = applyWhatIf(*model, whatIf);
    r.fidelity = compareModels(*model, *changed, promptTokens);
    eval::NeedleGridOptions o;
    o.contexts.clear();
    for (int64_t T : needle.contexts)
        if (T <= model->config().maxPositions) o.contexts.push_back(T);
    if (o.contexts.empty() || needle.depths.empty() || !tokenizer) return r;
    o.depths = needle.depths;
    o.samples = needle.samples;
    const auto score = [&](const std::shared_ptr<const Model>& m) {
        return eval::runNeedleGrid(m, tokenizer, o, {}, cancel).meanExact("full", "-");
    };
    r.needleModel = score(model);
    r.needleWhatIf = score(changed);
    r.needleProbes = static_cast<int64_t>(o.contexts.size() * o.depths.size()) * o.samples;
    return r;
}

}  // namespace kvlens
