#pragma once
// The weights of a loaded model, per family (shape comments: E = hidden,
// D = head_dim, F = intermediate, V = vocab, P = max positions).
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "core/model/config.h"
#include "core/model/model.h"
#include "core/model/rope.h"

namespace kvlens {

struct LayerWeights {
    at::Tensor attnNorm, attnNormBias;  // [E] (bias: GPT-2 LayerNorm only)
    at::Tensor wq, wk, wv, wo;          // [Hq*D, E], [Hkv*D, E], [Hkv*D, E], [E, Hq*D]
    at::Tensor bq, bk, bv, bo;          // [Hq*D], [Hkv*D], [Hkv*D], [E] or undefined
    at::Tensor qNorm, kNorm;            // [D] (qwen3) or undefined
    at::Tensor mlpNorm, mlpNormBias;    // [E]
    at::Tensor wGate;                   // [F, E] (gated SiLU MLP) or undefined (GPT-2)
    at::Tensor wUp, bUp;                // [F, E], [F] (bias: GPT-2)
    at::Tensor wDown, bDown;            // [E, F], [E]
};

struct Weights {
    at::Tensor embed;                   // [V, E]
    at::Tensor posEmbed;                // [P, E] (GPT-2) or undefined
    std::vector<LayerWeights> layers;
    at::Tensor finalNorm, finalNormBias;  // [E]
    at::Tensor lmHead;                  // [V, E] (the embedding itself when tied)
};

// Refuses (ArgumentError, one sentence) a dtype this LibTorch has no kernels
// for on `device` (model_load.cpp).
void probeKernels(at::ScalarType dtype, at::Device device);

struct Model::Impl {
    std::filesystem::path dir;
    ModelConfig cfg;
    at::Device device{at::kCPU};
    at::ScalarType dtype = at::kFloat;
    Weights w;
    std::unique_ptr<Rope> rope;  // null for GPT-2
    bool tied = false;
    int64_t params = 0;
    // The layer-sharing what-if (Model::withSharedLayerKv): the layer whose
    // K/V each layer reads, empty when every layer reads its own.
    std::vector<int64_t> kvSource;
};

// Family-specific weight assembly (model_load.cpp).
Weights loadWeights(const std::filesystem::path& dir, const ModelConfig& cfg, at::ScalarType dtype,
                    at::Device device, bool* tied);

}  // namespace kvlens
