#pragma once
// An independent reference forward pass for the model tests: plain loops in
// double precision over std::vector, no torch, no code shared with
// core/model. It reads the weights by their HF names from a host map and the
// architecture from a NaiveConfig filled by the test generator (not by core's
// config parser).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::test {

struct HostTensor {
    std::vector<int64_t> shape;
    std::vector<float> data;  // row-major
    int64_t numel() const;
};
using HostWeights = std::map<std::string, HostTensor>;

struct NaiveConfig {
    enum class Arch { LlamaLike, Gpt2 };
    Arch arch = Arch::LlamaLike;
    int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0;
    int64_t heads = 0, kvHeads = 0, headDim = 0, maxPositions = 0;
    double eps = 1e-6;
    // RoPE (llama family), HF rotate-half layout.
    double ropeTheta = 10000.0;
    std::string ropeType = "default";  // default | linear | llama3
    double ropeFactor = 1.0, lowFreqFactor = 1.0, highFreqFactor = 4.0;
    int64_t originalMaxPositions = 8192;
    bool qkvBias = false;  // q/k/v projection biases
    bool oBias = false;    // o_proj bias
    bool qkNorm = false;   // qwen3: RMSNorm over head_dim on q and k
    std::optional<int64_t> slidingWindow;  // key visible iff keyPos > queryPos - window
    std::string gpt2Prefix;  // "transformer." or ""
    bool tied = false;       // lm_head is the embedding matrix
};

// Extra hooks over the plain causal model. Positions are the indices of the
// token sequence (0..T-1).
struct NaiveHooks {
    // On top of causality (and the sliding window): may query `q` see key `k`
    // in (layer, kvHead)? Default: yes.
    std::function<bool(int64_t layer, int64_t kvHead, int64_t q, int64_t k)> visible;
    // Rotary position of query q in a layer (default q) and of key k as seen
    // by query q (default k). For StreamingLLM's position shift.
    std::function<int64_t(int64_t layer, int64_t q)> queryRotary;
    std::function<int64_t(int64_t layer, int64_t kvHead, int64_t q, int64_t k)> keyRotary;
    // Layers whose attention probabilities are returned (empty: none).
    std::vector<int64_t> captureLayers;
};

struct NaiveResult {
    std::vector<std::vector<double>> logits;  // [T][V]
    // attention[layer][head][q][k] over key positions 0..T-1 (0 where not
    // visible); only for the captured layers, empty otherwise.
    std::vector<std::vector<std::vector<std::vector<double>>>> attention;
};

NaiveResult naiveForward(const NaiveConfig& cfg, const HostWeights& weights, const std::vector<int64_t>& tokens,
                         const NaiveHooks& hooks = {});

// The pieces, for tests of the cache and RoPE on their own.
std::vector<double> naiveInverseFrequencies(const NaiveConfig& cfg);  // [headDim / 2]
// Rotates one head vector (length headDim) to `position`, HF rotate-half layout.
std::vector<double> naiveRope(const std::vector<double>& x, double position, const std::vector<double>& invFreq);

}  // namespace kvlens::test
