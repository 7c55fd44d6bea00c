#pragma once
// The KV-sharing what-ifs (issue 22): the model changed to share K/V as
// models trained for it do — its KV heads merged (GQA/MQA,
// Model::withMergedKvHeads) or runs of layers reading one layer's K/V (CLA,
// Model::withSharedLayerKv) — and how far it drifts from the model as
// trained: teacher-forced KL and top-1 on the prompt, and the needle probe's
// exact-match score with the full cache. Torch-free header.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvlens {
class Model;
class Tokenizer;
struct ModelConfig;

struct ModelFidelity {
    int64_t positions = 0;  // predictions compared (one per token read)
    double meanKl = 0;      // mean KL(p_reference || p_other), nats
    double maxKl = 0;
    double top1 = 0;        // share of positions whose most likely next token agrees
};

// Both models read `tokens` with the full cache; throws ArgumentError when
// their vocabularies differ or `tokens` is empty.
ModelFidelity compareModels(const Model& reference, const Model& other, const std::vector<int64_t>& tokens);

struct KvWhatIf {
    enum class Kind { MergeHeads, ShareLayers };
    Kind kind = Kind::MergeHeads;
    int64_t value = 1;  // MergeHeads: the KV heads left; ShareLayers: layers per group (CLA's k)
    // "KV heads merged 2 → 1 by mean-pooling their K/V projections" /
    // "every 3 layers read the first one's K/V (CLA-style)"
    std::string describe(const ModelConfig& config) const;
};

// The changed model (ArgumentError for a value the model cannot take).
std::unique_ptr<Model> applyWhatIf(const Model& model, const KvWhatIf& whatIf);

// The needle probes a what-if runs on both models (full cache, built-in
// probe); no contexts: none.
struct WhatIfNeedle {
    std::vector<int64_t> contexts{256};
    std::vector<double> depths{0, 0.5, 1};
    int64_t samples = 2;
};

struct WhatIfReport {
    KvWhatIf whatIf;
    ModelFidelity fidelity;  // on the prompt
    double needleModel = std::nan(""), needleWhatIf = std::nan("");  // exact-match share; NaN: not run
    int64_t needleProbes = 0;
    // One paragraph: what was changed, KL / top-1 and the needle scores
    // (a score that is NaN is said as "not run", never as a number).
    std::string text(const ModelConfig& config) const;
};

// Throws ArgumentError (an impossible what-if, no prompt tokens) and
// Session's Cancelled when `cancel` is raised between needle probes.
WhatIfReport runWhatIf(const std::shared_ptr<const Model>& model, const std::shared_ptr<const Tokenizer>& tokenizer,
                       const KvWhatIf& whatIf, const std::vector<int64_t>& promptTokens,
                       const WhatIfNeedle& needle = {}, const std::atomic<bool>* cancel = nullptr);

}  // namespace kvlens
