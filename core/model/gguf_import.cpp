#include "core/model/gguf_import.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safe_file.h"
#include "core/model/config.h"
#include "core/model/gguf.h"
#include "core/model/gguf_tokenizer.h"
#include "core/model/import_common.h"
#include "core/model/safetensors.h"

namespace kvlens {
namespace fs = std::filesystem;

namespace {

// llama.cpp's per-layer tensor names (after "blk.N.") and HF's (after
// "model.layers.N."). `rope` marks Q and K, whose rows llama.cpp's Llama
// converter interleaves.
struct LayerName {
    const char* gguf;
    const char* hf;
    enum Rope { None, Query, Key } rope = None;
};
constexpr LayerName kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight", LayerName::Query},
    {"attn_k.weight", "self_attn.k_proj.weight", LayerName::Key},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q.bias", "self_attn.q_proj.bias", LayerName::Query},
    {"attn_k.bias", "self_attn.k_proj.bias", LayerName::Key},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

struct Mapped {
    std::string hf;
    LayerName::Rope rope = LayerName::None;
};

// The HF name of a GGUF tensor; throws ModelError for one we cannot place.
Mapped hfName(const std::string& name, int64_t layers, const std::string& file) {
    if (name == "token_embd.weight") return {"model.embed_tokens.weight"};
    if (name == "output_norm.weight") return {"model.norm.weight"};
    if (name == "output.weight") return {"lm_head.weight"};
    if (name == "rope_freqs.weight")
        throw ModelError(file + ": has rope_freqs.weight (Llama 3 RoPE scaling factors), which the import does not "
                                "turn into a rope_scaling yet; import the model's HF checkpoint instead");
    if (name.compare(0, 4, "blk.") == 0) {
        const size_t dot = name.find('.', 4);
        if (dot != std::string::npos && dot > 4) {
            const std::string index = name.substr(4, dot - 4), rest = name.substr(dot + 1);
            if (index.find_first_not_of("0123456789") == std::string::npos && index.size() < 7) {
                const int64_t layer = std::stoll(index);
                if (layer >= layers)
                    throw FormatError(file, "tensor '" + name + "' is for layer " + index + " but the model has " +
                                                std::to_string(layers) + " layers (block_count)");
                for (const LayerName& n : kLayerNames)
                    if (rest == n.gguf) return {"model.layers." + index + "." + n.hf, n.rope};
            }
        }
    }
    throw ModelError(file + ": tensor '" + name + "' has no Hugging Face counterpart the import knows (expected the "
                            "tensors of a llama, qwen2 or qwen3 model)");
}

// The metadata of one architecture, read with the file's typed getters.
struct Arch {
    const GgufFile& f;
    std::string prefix;  // "llama."
    bool has(const std::string& key) const { return f.value(prefix + key) != nullptr; }
    int64_t integer(const std::string& key) const { return f.integer(prefix + key); }
    double number(const std::string& key) const { return f.number(prefix + key); }
    int64_t integer(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
    double number(const std::string& key, double fallback) const { return has(key) ? number(key) : fallback; }
};

int64_t positive(const Arch& a, const std::string& key, int64_t value) {
    if (value <= 0 || value > (int64_t{1} << 24))
        throw FormatError(a.f.path(), a.prefix + key + " is " + std::to_string(value) + " (expected a positive size)");
    return value;
}

nlohmann::ordered_json configJson(const GgufFile& f, const std::string& arch, int64_t vocab, bool tied, bool bias,
                                  bool bf16, GgufImportReport* report) {
    const Arch a{f, arch + "."};
    const int64_t hidden = positive(a, "embedding_length", a.integer("embedding_length"));
    const int64_t layers = positive(a, "block_count", a.integer("block_count"));
    const int64_t heads = positive(a, "attention.head_count", a.integer("attention.head_count"));
    const int64_t kvHeads = positive(a, "attention.head_count_kv", a.integer("attention.head_count_kv", heads));
    const int64_t headDim = positive(a, "attention.key_length", a.integer("attention.key_length", hidden / heads));
    const int64_t ffn = positive(a, "feed_forward_length", a.integer("feed_forward_length"));
    const int64_t context = positive(a, "context_length", a.integer("context_length", 2048));
    if (a.has("rope.dimension_count") && a.integer("rope.dimension_count") != headDim)
        throw ModelError(f.path() + ": " + arch + ".rope.dimension_count is " +
                         std::to_string(a.integer("rope.dimension_count")) + " but heads have " +
                         std::to_string(headDim) + " dimensions (partial rotary embeddings are not supported)");
    nlohmann::ordered_json scaling = nullptr;
    if (a.has("rope.scaling.type")) {
        const std::string type = f.string(a.prefix + "rope.scaling.type");
        if (type == "linear") {
            scaling = {{"rope_type", "linear"}, {"factor", a.number("rope.scaling.factor")}};
        } else if (type != "none") {
            throw ModelError(f.path() + ": " + arch + ".rope.scaling.type is '" + type +
                             "' (the import knows 'none' and 'linear')");
        }
    }
    const std::string modelType = arch;
    const char* architecture = arch == "llama" ? "LlamaForCausalLM" : arch == "qwen2" ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM";
    nlohmann::ordered_json j = {
        {"architectures", {architecture}},
        {"model_type", modelType},
        {"vocab_size", vocab},
        {"hidden_size", hidden},
        {"intermediate_size", ffn},
        {"num_hidden_layers", layers},
        {"num_attention_heads", heads},
        {"num_key_value_heads", kvHeads},
        {"head_dim", headDim},
        {"max_position_embeddings", context},
        {"rms_norm_eps", a.number("attention.layer_norm_rms_epsilon", 1e-6)},
        {"rope_theta", a.number("rope.freq_base", 10000.0)},
        {"rope_scaling", scaling},
        {"hidden_act", "silu"},
        {"attention_bias", bias},
        {"mlp_bias", false},
        {"tie_word_embeddings", tied},
        {"torch_dtype", bf16 ? "bfloat16" : "float32"},
    };
    if (f.value("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = f.integer("tokenizer.ggml.bos_token_id");
    if (f.value("tokenizer.ggml.eos_token_id")) j["eos_token_id"] = f.integer("tokenizer.ggml.eos_token_id");
    j["kvlens_imported_from"] = "gguf";
    if (f.value("general.name")) j["kvlens_gguf_name"] = f.string("general.name");
    report->layers = layers;
    report->hidden = hidden;
    report->heads = heads;
    report->kvHeads = kvHeads;
    report->context = context;
    return j;
}

// f32 to bf16, rounding to nearest even (NaN stays a quiet NaN).
uint16_t toBf16(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7FFF + ((u >> 16) & 1);
    return static_cast<uint16_t>(u >> 16);
}

}  // namespace

GgufImportReport importGguf(const fs::path& gguf, const fs::path& outDir, const GgufImportOptions& options) {
    OutputGuard guard;
    guard.input(gguf);
    guard.output(outDir / "model.safetensors", "OUT_DIR");
    const std::unique_ptr<GgufFile> file = GgufFile::open(gguf);
    const GgufFile& f = *file;
    GgufImportReport report;
    report.version = f.contents().version;
    report.architecture = f.string("general.architecture");
    if (f.value("general.name")) report.name = f.string("general.name");
    const std::string& arch = report.architecture;
    if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
        throw ModelError(f.path() + ": general.architecture is '" + arch +
                         "' (the import knows llama, qwen2 and qwen3 models)");
    for (const GgufTensorInfo& t : f.tensors()) ++report.types[ggmlTypeName(t.type)];

    const GgufTensorInfo* embed = f.find("token_embd.weight");
    if (!embed || embed->dims.size() != 2)
        throw FormatError(f.path(), "has no 2-D token_embd.weight (expected the token embedding)");
    report.vocab = embed->dims[1];  // real checkpoints pad it: the rows, not the token count
    report.tied = f.find("output.weight") == nullptr;
    const bool bias = f.find("blk.0.attn_q.bias") != nullptr;
    const nlohmann::ordered_json config = configJson(f, arch, report.vocab, report.tied, bias, options.bf16, &report);
    const std::string configText = config.dump(2) + "\n";
    const ModelConfig cfg = parseConfig(configText, "the config.json imported from " + f.path());
    const GgufTokenizerFiles tok = ggufTokenizerFiles(f.metadata(), f.path());

    StagingFolder staging(outDir);  // refuses an OUT_DIR in use before anything is written
    // llama.cpp's Llama converter interleaves Q/K rows; its Qwen converters do not.
    const bool interleaved = arch == "llama";
    std::vector<std::vector<float>> f32;
    std::vector<std::vector<uint16_t>> half;
    std::vector<TensorBlob> blobs;
    const int64_t total = static_cast<int64_t>(f.tensors().size());
    int64_t done = 0;
    for (const GgufTensorInfo& t : f.tensors()) {
        const Mapped m = hfName(t.name, cfg.numLayers, f.path());
        std::vector<float> v(static_cast<size_t>(t.numel()));
        dequantize(t.type, f.data(t), t.numel(), v.data(), f.path() + ": tensor '" + t.name + "'");
        const std::vector<int64_t> shape = t.shape();
        if (interleaved && m.rope != LayerName::None) {
            const int64_t heads = m.rope == LayerName::Query ? cfg.numHeads : cfg.numKvHeads;
            const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
            if (rows != heads * cfg.headDim)
                throw FormatError(f.path(), "tensor '" + t.name + "' has " + std::to_string(rows) + " rows (expected " +
                                                std::to_string(heads) + " heads x " + std::to_string(cfg.headDim) + ")");
            v = toRotatedHalves(v, heads, rows, cols);
        }
        report.parameters += t.numel();
        if (options.bf16) {
            std::vector<uint16_t> b(v.size());
            for (size_t i = 0; i < v.size(); ++i) b[i] = toBf16(v[i]);
            half.push_back(std::move(b));
            blobs.push_back({m.hf, DType::BF16, shape, nullptr});
        } else {
            f32.push_back(std::move(v));
            blobs.push_back({m.hf, DType::F32, shape, nullptr});
        }
        ++done;
        if (options.progress && !options.progress(done, total, t.name))
            throw ArgumentError("the import of " + f.path() + " was cancelled (nothing was written)");
    }
    for (size_t i = 0; i < blobs.size(); ++i)
        blobs[i].data = options.bf16 ? static_cast<const void*>(half[i].data()) : static_cast<const void*>(f32[i].data());

    writeSafetensors(staging.dir() / "model.safetensors", blobs,
                     {{"format", "pt"}, {"kvlens_imported_from", gguf.filename().string()}});
    writeFileAtomically(staging.dir() / "config.json", configText);
    writeFileAtomically(staging.dir() / "tokenizer.json", tok.tokenizerJson);
    writeFileAtomically(staging.dir() / "tokenizer_config.json", tok.tokenizerConfigJson);
    staging.commit();
    return report;
}

}  // namespace kvlens
