#pragma once
// ModelConfig: everything the forward pass needs from an HF config.json, as
// plain data (torch-free, so the GUI can show it).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kvlens {

enum class Family { Llama, Mistral, Qwen2, Qwen3, Gpt2 };

const char* familyName(Family f);

// HF `rope_scaling`. Only the types whose HF definition we implement.
struct RopeScaling {
    enum class Type { None, Linear, Llama3 };
    Type type = Type::None;
    double factor = 1.0;
    double lowFreqFactor = 1.0;                 // llama3
    double highFreqFactor = 4.0;                // llama3
    int64_t originalMaxPositionEmbeddings = 8192;  // llama3
};

// K and V of `layers` layers of `kvHeads` heads of `headDim`, `elementBytes`
// each: the one formula for KV memory (ModelConfig, the KV-sharing designs
// of core/eval/kv_memory.h).
inline uint64_t kvBytesPerToken(int64_t layers, int64_t kvHeads, int64_t headDim, uint64_t elementBytes) {
    return 2ull * static_cast<uint64_t>(layers) * static_cast<uint64_t>(kvHeads) * static_cast<uint64_t>(headDim) *
           elementBytes;
}

struct ModelConfig {
    Family family = Family::Llama;
    std::string modelType;     // config.json "model_type", verbatim
    int64_t vocabSize = 0;
    int64_t hiddenSize = 0;
    int64_t intermediateSize = 0;
    int64_t numLayers = 0;
    int64_t numHeads = 0;      // query heads Hq
    int64_t numKvHeads = 0;    // KV heads Hkv (== Hq without GQA, 1 for MQA)
    int64_t headDim = 0;       // explicit in qwen3, else hidden / heads
    int64_t maxPositions = 0;  // context the model was trained for
    double normEps = 1e-6;     // rms_norm_eps, or GPT-2's layer_norm_epsilon
    double ropeTheta = 10000.0;
    RopeScaling ropeScaling;
    bool tieEmbeddings = false;   // tie_word_embeddings (resolved again at load time)
    bool attentionBias = false;   // q/k/v biases (qwen2 always; others per config)
    bool qkNorm = false;          // qwen3: RMSNorm over head_dim on q and k
    std::optional<int64_t> slidingWindow;  // mistral/qwen2 when in use
    std::string activation = "silu";
    std::optional<int64_t> bosTokenId;
    std::vector<int64_t> eosTokenIds;
    std::string torchDtype;       // as stored ("bfloat16", ...), informative

    int64_t groupSize() const { return numHeads / numKvHeads; }
    // What the full cache holds for one token: K and V of every layer and
    // KV head, `elementBytes` each (the one formula for KV memory).
    uint64_t kvBytesPerToken(uint64_t elementBytes) const {
        return kvlens::kvBytesPerToken(numLayers, numKvHeads, headDim, elementBytes);
    }
    bool usesRope() const { return family != Family::Gpt2; }
};

// Parses config.json; throws FormatError naming the file and the field at
// fault, ModelError for an unsupported model_type or inconsistent shapes.
ModelConfig loadConfig(const std::filesystem::path& configJson);
ModelConfig parseConfig(const std::string& jsonText, const std::string& fileForErrors);

}  // namespace kvlens
