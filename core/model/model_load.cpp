// Builds Weights from an HF directory: tensor names and layouts per family.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/model/device_internal.h"
#include "core/model/model_impl.h"
#include "core/model/weights.h"

namespace kvlens {
namespace {

struct Loader {
    const WeightStore& store;
    at::ScalarType dtype;
    at::Device device;
    std::string config;  // the config.json path, for messages

    at::Tensor get(const std::string& name, std::vector<int64_t> shape) const {
        return store.get(name, shape, dtype, device);
    }
    at::Tensor optional(const std::string& name, std::vector<int64_t> shape) const {
        return store.has(name) ? get(name, shape) : at::Tensor();
    }
};

// As HF: tie_word_embeddings=true uses the embedding matrix even when the
// file also stores lm_head.weight. Untied without lm_head.weight HF would
// start from a random head: refused instead of guessed.
at::Tensor lmHead(const Loader& L, const ModelConfig& c, const at::Tensor& embed, bool* tied) {
    *tied = c.tieEmbeddings;
    if (!c.tieEmbeddings && !L.store.has("lm_head.weight"))
        throw ModelError(L.config + " says tie_word_embeddings is false (or leaves it out: false by default) but the "
                         "weights have no lm_head.weight: set \"tie_word_embeddings\": true if the output head is the "
                         "embedding matrix");
    return *tied ? embed : L.get("lm_head.weight", {c.vocabSize, c.hiddenSize});
}

// Weights of layers past num_hidden_layers would be dropped without a word.
void checkLayerCount(const WeightStore& store, const ModelConfig& c, const std::string& config) {
    int64_t layers = 0;
    for (const std::string& name : store.names())
        for (const char* prefix : {"model.layers.", "transformer.h.", "h."}) {
            const size_t n = std::char_traits<char>::length(prefix);
            if (name.compare(0, n, prefix) != 0) continue;
            const size_t dot = name.find('.', n);
            const std::string index = name.substr(n, dot == std::string::npos ? std::string::npos : dot - n);
            if (!index.empty() && index.size() < 9 && index.find_first_not_of("0123456789") == std::string::npos)
                layers = std::max<int64_t>(layers, std::stoll(index) + 1);
        }
    if (layers > c.numLayers)
        throw ModelError(config + " says num_hidden_layers is " + std::to_string(c.numLayers) + " but the weights hold " +
                         std::to_string(layers) + " layers: the config does not describe these weights");
}

void loadLlamaLayer(const Loader& L, const ModelConfig& c, int64_t i, LayerWeights& lw) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int64_t E = c.hiddenSize, D = c.headDim, Hq = c.numHeads, Hkv = c.numKvHeads, F = c.intermediateSize;
    lw.attnNorm = L.get(p + "input_layernorm.weight", {E});
    lw.wq = L.get(p + "self_attn.q_proj.weight", {Hq * D, E});
    lw.wk = L.get(p + "self_attn.k_proj.weight", {Hkv * D, E});
    lw.wv = L.get(p + "self_attn.v_proj.weight", {Hkv * D, E});
    lw.wo = L.get(p + "self_attn.o_proj.weight", {E, Hq * D});
    if (c.attentionBias) {
        lw.bq = L.get(p + "self_attn.q_proj.bias", {Hq * D});
        lw.bk = L.get(p + "self_attn.k_proj.bias", {Hkv * D});
        lw.bv = L.get(p + "self_attn.v_proj.bias", {Hkv * D});
        // Llama's attention_bias also biases o_proj; Qwen2 does not.
        if (c.family != Family::Qwen2) lw.bo = L.get(p + "self_attn.o_proj.bias", {E});
    }
    if (c.qkNorm) {
        lw.qNorm = L.get(p + "self_attn.q_norm.weight", {D});
        lw.kNorm = L.get(p + "self_attn.k_norm.weight", {D});
    }
    lw.mlpNorm = L.get(p + "post_attention_layernorm.weight", {E});
    lw.wGate = L.get(p + "mlp.gate_proj.weight", {F, E});
    lw.wUp = L.get(p + "mlp.up_proj.weight", {F, E});
    lw.wDown = L.get(p + "mlp.down_proj.weight", {E, F});
}

Weights loadLlama(const Loader& L, const ModelConfig& c, bool* tied) {
    Weights w;
    w.embed = L.get("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize});
    w.layers.resize(c.numLayers);
    for (int64_t i = 0; i < c.numLayers; ++i) loadLlamaLayer(L, c, i, w.layers[i]);
    w.finalNorm = L.get("model.norm.weight", {c.hiddenSize});
    w.lmHead = lmHead(L, c, w.embed, tied);
    return w;
}

// GPT-2's Conv1D stores weights as [in, out]; we keep every weight as
// [out, in] so that one linear() serves all families.
at::Tensor conv1d(const Loader& L, const std::string& name, int64_t in, int64_t out) {
    return L.get(name, {in, out}).t().contiguous();
}

void loadGpt2Layer(const Loader& L, const ModelConfig& c, const std::string& prefix, int64_t i, LayerWeights& lw) {
    const std::string p = prefix + "h." + std::to_string(i) + ".";
    const int64_t E = c.hiddenSize, F = c.intermediateSize;
    lw.attnNorm = L.get(p + "ln_1.weight", {E});
    lw.attnNormBias = L.get(p + "ln_1.bias", {E});
    at::Tensor qkv = conv1d(L, p + "attn.c_attn.weight", E, 3 * E);  // [3E, E]
    at::Tensor bqkv = L.get(p + "attn.c_attn.bias", {3 * E});
    lw.wq = qkv.narrow(0, 0, E).contiguous();
    lw.wk = qkv.narrow(0, E, E).contiguous();
    lw.wv = qkv.narrow(0, 2 * E, E).contiguous();
    lw.bq = bqkv.narrow(0, 0, E).contiguous();
    lw.bk = bqkv.narrow(0, E, E).contiguous();
    lw.bv = bqkv.narrow(0, 2 * E, E).contiguous();
    lw.wo = conv1d(L, p + "attn.c_proj.weight", E, E);
    lw.bo = L.get(p + "attn.c_proj.bias", {E});
    lw.mlpNorm = L.get(p + "ln_2.weight", {E});
    lw.mlpNormBias = L.get(p + "ln_2.bias", {E});
    lw.wUp = conv1d(L, p + "mlp.c_fc.weight", E, F);
    lw.bUp = L.get(p + "mlp.c_fc.bias", {F});
    lw.wDown = conv1d(L, p + "mlp.c_proj.weight", F, E);
    lw.bDown = L.get(p + "mlp.c_proj.bias", {E});
}

Weights loadGpt2(const Loader& L, const ModelConfig& c, bool* tied) {
    // Checkpoints saved from GPT2LMHeadModel prefix "transformer.", those
    // from GPT2Model do not.
    const std::string prefix = L.store.has("transformer.wte.weight") ? "transformer." : "";
    Weights w;
    w.embed = L.get(prefix + "wte.weight", {c.vocabSize, c.hiddenSize});
    w.posEmbed = L.get(prefix + "wpe.weight", {c.maxPositions, c.hiddenSize});
    w.layers.resize(c.numLayers);
    for (int64_t i = 0; i < c.numLayers; ++i) loadGpt2Layer(L, c, prefix, i, w.layers[i]);
    w.finalNorm = L.get(prefix + "ln_f.weight", {c.hiddenSize});
    w.finalNormBias = L.get(prefix + "ln_f.bias", {c.hiddenSize});
    w.lmHead = lmHead(L, c, w.embed, tied);
    return w;
}

}  // namespace

// Some LibTorch builds lack kernels for a dtype on a device (1.13 has no f16
// matmul, SiLU or GELU on the CPU). Probe the ops the forward pass runs in the
// model dtype, so that the choice is refused at load time with a clear
// message instead of a c10::Error escaping from the first forward().
void probeKernels(at::ScalarType dtype, at::Device device) {
    try {
        auto o = at::TensorOptions().dtype(dtype).device(device);
        at::Tensor x = at::ones({2, 4}, o), w = at::ones({3, 4}, o), b = at::ones({3}, o);
        at::Tensor y = at::linear(x, w, b);
        (void)at::matmul(x.unsqueeze(0), w.t().unsqueeze(0));
        (void)at::silu(y);
        (void)at::gelu(y, "tanh");
        (void)at::layer_norm(x, {4}, at::ones({4}, o), at::zeros({4}, o), 1e-5);
        (void)at::embedding(w, at::zeros({2}, at::TensorOptions().dtype(at::kLong).device(device)));
    } catch (const c10::Error& e) {
        throw ArgumentError(std::string("dtype ") + dtypeLabel(dtype) + " is not supported on " + device.str() +
                            " by this LibTorch build (" + e.what_without_backtrace() + "); use f32 or bf16");
    }
}

Weights loadWeights(const std::filesystem::path& dir, const ModelConfig& cfg, at::ScalarType dtype,
                    at::Device device, bool* tied) {
    probeKernels(dtype, device);
    WeightStore store = WeightStore::open(dir);
    const std::string config = (dir / "config.json").string();
    checkLayerCount(store, cfg, config);
    Loader loader{store, dtype, device, config};
    try {
        return cfg.family == Family::Gpt2 ? loadGpt2(loader, cfg, tied) : loadLlama(loader, cfg, tied);
    } catch (const c10::Error& e) {
        // Allocation failures (e.g. out of GPU memory) surface as c10::Error.
        throw ModelError(dir.string() + ": could not place the weights on " + device.str() + ": " +
                         e.what_without_backtrace());
    }
}

}  // namespace kvlens
