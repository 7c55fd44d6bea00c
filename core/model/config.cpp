#include "core/model/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/read_file.h"

namespace kvlens {
namespace {

using json = nlohmann::json;

// Typed field access that names the file and the field when the value is
// missing or of the wrong type (nlohmann's own messages name neither).
class Fields {
public:
    Fields(const json& j, std::string file) : m_j(j), m_file(std::move(file)) {}

    bool has(const char* key) const { return m_j.contains(key) && !m_j[key].is_null(); }

    template <class T>
    T get(const char* key) const {
        if (!has(key)) throw FormatError(m_file, std::string("missing field '") + key + "'");
        return as<T>(m_j[key], key);
    }
    template <class T>
    T get(const char* key, T fallback) const {
        return has(key) ? as<T>(m_j[key], key) : fallback;
    }
    // The first of several HF spellings of one field (GPT-2 vs Llama names).
    template <class T>
    T first(std::initializer_list<const char*> keys) const {
        for (const char* k : keys)
            if (has(k)) return as<T>(m_j[k], k);
        throw FormatError(m_file, std::string("missing field '") + *keys.begin() + "'");
    }
    const json& raw(const char* key) const { return m_j[key]; }
    const std::string& file() const { return m_file; }

    template <class T>
    T as(const json& v, const char* key) const {
        try {
            if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                if (!v.is_number_integer() && !v.is_number_unsigned())
                    throw FormatError(m_file, std::string("field '") + key + "' must be an integer");
            }
            return v.get<T>();
        } catch (const json::exception&) {
            throw FormatError(m_file, std::string("field '") + key + "' has the wrong type (" +
                                          v.type_name() + ")");
        }
    }

private:
    const json& m_j;
    std::string m_file;
};

Family parseFamily(const std::string& type, const std::string& file) {
    if (type == "llama") return Family::Llama;
    if (type == "mistral") return Family::Mistral;
    if (type == "qwen2") return Family::Qwen2;
    if (type == "qwen3") return Family::Qwen3;
    if (type == "gpt2") return Family::Gpt2;
    throw ModelError(file + ": unsupported model_type '" + type +
                     "' (supported: llama, mistral, qwen2, qwen3, gpt2)");
}

RopeScaling parseRopeScaling(const Fields& f) {
    RopeScaling rs;
    if (!f.has("rope_scaling")) return rs;
    const json& j = f.raw("rope_scaling");
    if (!j.is_object()) throw FormatError(f.file(), "field 'rope_scaling' must be an object");
    Fields s(j, f.file());
    std::string type = s.has("rope_type") ? s.get<std::string>("rope_type") : s.get<std::string>("type", "default");
    if (type == "default") return rs;
    rs.factor = s.get<double>("factor");
    if (!(rs.factor > 0) || !std::isfinite(rs.factor)) throw FormatError(f.file(), "rope_scaling.factor must be a positive finite number");
    if (type == "linear") {
        rs.type = RopeScaling::Type::Linear;
    } else if (type == "llama3") {
        rs.type = RopeScaling::Type::Llama3;
        rs.lowFreqFactor = s.get<double>("low_freq_factor");
        rs.highFreqFactor = s.get<double>("high_freq_factor");
        rs.originalMaxPositionEmbeddings = s.get<int64_t>("original_max_position_embeddings");
        if (!(rs.highFreqFactor > rs.lowFreqFactor))
            throw FormatError(f.file(), "rope_scaling: high_freq_factor must exceed low_freq_factor");
    } else {
        throw ModelError(f.file() + ": unsupported rope_scaling type '" + type +
                         "' (supported: default, linear, llama3)");
    }
    return rs;
}

std::vector<int64_t> parseIdList(const Fields& f, const char* key) {
    if (!f.has(key)) return {};
    const json& v = f.raw(key);
    if (v.is_array()) {
        std::vector<int64_t> out;
        for (const auto& e : v) out.push_back(f.as<int64_t>(e, key));
        return out;
    }
    return {f.as<int64_t>(v, key)};
}

void parseLlamaLike(const Fields& f, ModelConfig& c) {
    c.vocabSize = f.get<int64_t>("vocab_size");
    c.hiddenSize = f.get<int64_t>("hidden_size");
    c.intermediateSize = f.get<int64_t>("intermediate_size");
    c.numLayers = f.get<int64_t>("num_hidden_layers");
    c.numHeads = f.get<int64_t>("num_attention_heads");
    c.numKvHeads = f.get<int64_t>("num_key_value_heads", c.numHeads);
    c.maxPositions = f.get<int64_t>("max_position_embeddings", 2048);
    c.normEps = f.get<double>("rms_norm_eps", 1e-6);
    c.ropeTheta = f.get<double>("rope_theta", 10000.0);
    c.ropeScaling = parseRopeScaling(f);
    c.tieEmbeddings = f.get<bool>("tie_word_embeddings", false);
    c.activation = f.get<std::string>("hidden_act", "silu");
    if (c.activation != "silu")
        throw ModelError(f.file() + ": unsupported hidden_act '" + c.activation + "' (supported: silu)");
    if (c.numHeads <= 0) throw FormatError(f.file(), "num_attention_heads must be positive");
    c.headDim = f.get<int64_t>("head_dim", c.hiddenSize / c.numHeads);
    c.attentionBias = c.family == Family::Qwen2 || f.get<bool>("attention_bias", false);
    c.qkNorm = c.family == Family::Qwen3;
    if (f.get<bool>("mlp_bias", false))
        throw ModelError(f.file() + ": mlp_bias=true is not supported");
    if (c.family == Family::Mistral && f.has("sliding_window"))
        c.slidingWindow = f.get<int64_t>("sliding_window");
    if ((c.family == Family::Qwen2 || c.family == Family::Qwen3) && f.get<bool>("use_sliding_window", false))
        throw ModelError(f.file() + ": use_sliding_window=true is not supported");
}

void parseGpt2(const Fields& f, ModelConfig& c) {
    c.vocabSize = f.get<int64_t>("vocab_size");
    c.hiddenSize = f.first<int64_t>({"n_embd", "hidden_size"});
    c.numLayers = f.first<int64_t>({"n_layer", "num_hidden_layers"});
    c.numHeads = f.first<int64_t>({"n_head", "num_attention_heads"});
    c.numKvHeads = c.numHeads;
    c.intermediateSize = f.get<int64_t>("n_inner", 4 * c.hiddenSize);
    c.maxPositions = f.first<int64_t>({"n_positions", "max_position_embeddings"});
    c.normEps = f.get<double>("layer_norm_epsilon", 1e-5);
    c.tieEmbeddings = f.get<bool>("tie_word_embeddings", true);
    c.activation = f.get<std::string>("activation_function", "gelu_new");
    if (c.activation != "gelu_new" && c.activation != "gelu_pytorch_tanh" && c.activation != "gelu")
        throw ModelError(f.file() + ": unsupported activation_function '" + c.activation + "'");
    if (c.numHeads <= 0) throw FormatError(f.file(), "n_head must be positive");
    c.headDim = c.hiddenSize / c.numHeads;
    c.attentionBias = true;
    if (f.get<bool>("scale_attn_by_inverse_layer_idx", false) || f.get<bool>("reorder_and_upcast_attn", false))
        throw ModelError(f.file() + ": scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported");
}

void validate(const ModelConfig& c, const std::string& file) {
    auto positive = [&](int64_t v, const char* name) {
        if (v <= 0) throw FormatError(file, std::string(name) + " must be positive (got " + std::to_string(v) + ")");
    };
    positive(c.vocabSize, "vocab_size");
    positive(c.hiddenSize, "hidden_size");
    positive(c.intermediateSize, "intermediate_size");
    positive(c.numLayers, "num_hidden_layers");
    positive(c.numKvHeads, "num_key_value_heads");
    positive(c.headDim, "head_dim");
    positive(c.maxPositions, "max_position_embeddings");
    // Values that make every activation NaN: refused here, not discovered as "KL nan".
    auto positiveReal = [&](double v, const char* name) {
        if (!(std::isfinite(v) && v > 0))
            throw FormatError(file, std::string(name) + " must be a positive finite number (got " + std::to_string(v) + ")");
    };
    positiveReal(c.normEps, c.family == Family::Gpt2 ? "layer_norm_epsilon" : "rms_norm_eps");
    if (c.usesRope()) positiveReal(c.ropeTheta, "rope_theta");
    if (c.slidingWindow) positive(*c.slidingWindow, "sliding_window");
    if (c.numHeads % c.numKvHeads != 0)
        throw ModelError(file + ": num_attention_heads (" + std::to_string(c.numHeads) +
                         ") is not a multiple of num_key_value_heads (" + std::to_string(c.numKvHeads) + ")");
    if (c.usesRope() && c.headDim % 2 != 0)
        throw ModelError(file + ": head_dim must be even for rotary embeddings");
    if (c.family == Family::Gpt2 && c.hiddenSize % c.numHeads != 0)
        throw ModelError(file + ": n_embd is not a multiple of n_head");
}

}  // namespace

const char* familyName(Family f) {
    switch (f) {
        case Family::Llama: return "llama";
        case Family::Mistral: return "mistral";
        case Family::Qwen2: return "qwen2";
        case Family::Qwen3: return "qwen3";
        case Family::Gpt2: return "gpt2";
    }
    return "?";
}

ModelConfig parseConfig(const std::string& jsonText, const std::string& file) {
    json j = json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw FormatError(file, "not valid JSON");
    if (!j.is_object()) throw FormatError(file, "top level must be a JSON object");
    Fields f(j, file);
    ModelConfig c;
    c.modelType = f.get<std::string>("model_type");
    c.family = parseFamily(c.modelType, file);
    if (c.family == Family::Gpt2)
        parseGpt2(f, c);
    else
        parseLlamaLike(f, c);
    if (f.has("bos_token_id")) c.bosTokenId = f.get<int64_t>("bos_token_id");
    c.eosTokenIds = parseIdList(f, "eos_token_id");
    c.torchDtype = f.get<std::string>("torch_dtype", "");
    validate(c, file);
    return c;
}

ModelConfig loadConfig(const std::filesystem::path& path) {
    return parseConfig(readRegularFile(path), path.string());
}

}  // namespace kvlens
