#pragma once
// Tiny random HF model directories for the model tests: config.json and
// model.safetensors with HF's exact config keys and tensor names, one per
// family variant. The host copy of every weight (the values as stored, i.e.
// rounded when written as F16/BF16) is returned too, so that the naive
// reference forward (naive_forward.h) reads the very same numbers.
//
// The generator also fills a NaiveConfig from the values it writes, so the
// reference never depends on core's config.json parser.
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/model.h"
#include "tests/support/naive_forward.h"
#include "tests/support/scratch_dir.h"

namespace kvlens::test {

enum class WeightDType { F32, F16, BF16 };

// config.json "rope_scaling" (llama family only).
struct RopeScalingSpec {
    std::string type = "default";     // default | linear | llama3
    double factor = 1.0;
    double lowFreqFactor = 1.0;       // llama3
    double highFreqFactor = 4.0;      // llama3
    int64_t originalMaxPositions = 8192;  // llama3
    bool legacyTypeKey = false;       // write {"type": ...} (older checkpoints) instead of {"rope_type": ...}
};

struct ModelOptions {
    int64_t vocabSize = 64;
    int64_t hiddenSize = 32;
    int64_t intermediateSize = 48;    // gpt2: 0 writes "n_inner": null (= 4 * hidden)
    int64_t numLayers = 2;
    int64_t numHeads = 4;
    int64_t numKvHeads = 2;           // llama family; gpt2 always has numHeads
    int64_t headDim = 0;              // 0: hidden / heads; otherwise written as "head_dim"
    int64_t maxPositions = 128;
    double normEps = 1e-6;            // rms_norm_eps or layer_norm_epsilon
    double ropeTheta = 10000.0;
    RopeScalingSpec ropeScaling;
    bool tieEmbeddings = false;       // tied: no lm_head.weight in the file
    bool attentionBias = false;       // llama "attention_bias": q/k/v/o biases
    // mistral: "sliding_window" in force. qwen2: written with
    // "use_sliding_window": false (as Qwen2.5 checkpoints do), so it must be ignored.
    std::optional<int64_t> slidingWindow;
    bool gpt2Prefix = true;           // "transformer." (GPT2LMHeadModel) or none (GPT2Model)
    bool gpt2MaskBuffers = false;     // also store the legacy h.N.attn.bias / masked_bias buffers
    WeightDType weightDType = WeightDType::F32;
    float scale = 1.0f;               // multiplies every random std (keeps logits in range)
};

struct TestModel {
    std::filesystem::path dir;
    Family family = Family::Llama;
    ModelOptions options;
    NaiveConfig naive;      // the same architecture, as the reference reads it
    HostWeights weights;    // name -> shape + values exactly as stored
};

// Writes dir/config.json and dir/model.safetensors (dir is created) and
// returns the weights. Deterministic in `seed`.
TestModel makeRandomModel(Family family, const ModelOptions& options, uint64_t seed,
                          const std::filesystem::path& dir);

// A random model written once per test process into a scratch folder named
// `name` and loaded with default settings: the model the tests of one file
// share. Cached by name (one name, one model).
std::shared_ptr<const Model> sharedRandomModel(const std::string& name, Family family, const ModelOptions& options,
                                               uint64_t seed);

// The family variants every model test runs over.
struct Variant {
    std::string name;  // a valid GoogleTest parameter name
    Family family = Family::Llama;
    ModelOptions options;
};
std::vector<Variant> standardVariants();
const Variant& variantByName(const std::string& name);

// Round-trips through the 16-bit formats (round to nearest even), exposed
// for tests of the conversion itself.
uint16_t floatToHalfBits(float f);
float halfBitsToFloat(uint16_t h);
uint16_t floatToBf16Bits(float f);
float bf16BitsToFloat(uint16_t b);

// Seeded random token ids in [0, vocab).
std::vector<int64_t> randomTokens(int64_t count, int64_t vocab, uint64_t seed);

// ---- comparison helpers (these use ATen; the reference itself does not)

using Rows = std::vector<std::vector<double>>;
// A 2-D tensor (any float dtype, any device) as rows of doubles.
Rows tensorRows(const at::Tensor& t);
double maxAbs(const Rows& a);
double maxAbsDiff(const Rows& a, const Rows& b);  // throws on a shape mismatch
// Rows [begin, begin + count) of a.
Rows rowsOf(const Rows& a, size_t begin, size_t count);

// Relative tolerance at f32 against the naive reference:
// max |ours - reference| <= kRelTol * max(1, max |reference|).
constexpr double kRelTol = 1e-4;
double tolFor(const Rows& reference);

// The worst relative error per model variant, printed as a table when the
// test executable ends. One per test file, at namespace scope:
//   ErrorTable& errors = ErrorTable::add("relative error vs naive reference");
class ErrorTable : public ::testing::Environment {
public:
    static ErrorTable& add(std::string title);  // registered with GoogleTest, which owns it
    void note(const std::string& variant, double relative);
    void TearDown() override;

private:
    explicit ErrorTable(std::string title) : m_title(std::move(title)) {}
    std::string m_title;
    std::map<std::string, double> m_worst;
};

// Captured attention of one layer ([Hq, n, S] over the cache's storage
// columns, as ForwardResult::attention) against the reference
// (refLayer[head][query][keyPosition]); row r is query position
// firstQuery + r. Columns are mapped to positions through
// cache.columns/positions; columns that hold no entry must be 0.
double attentionMaxDiff(const at::Tensor& probs, const KvCache& cache, int64_t layer,
                        const std::vector<std::vector<std::vector<double>>>& refLayer, int64_t firstQuery);
// The same with the layer's per-KV-head columns and positions given.
double attentionMaxDiff(const at::Tensor& probs, const std::vector<std::vector<int64_t>>& columns,
                        const std::vector<std::vector<int64_t>>& positions,
                        const std::vector<std::vector<std::vector<double>>>& refLayer, int64_t firstQuery);
// max |Σ_row - 1| over every row of [Hq, n, S] probabilities.
double rowSumMaxDeviation(const at::Tensor& probs);

// Model::load on the CPU in `dtype` (f32 by default).
std::unique_ptr<Model> loadOnCpu(const TestModel& m, const std::string& dtype = "f32");
// A standard variant written once per test executable (seeded by its name)
// and loaded on the CPU in f32: the weights as stored, for the naive
// reference, and the model.
struct BuiltVariant {
    TestModel tm;
    std::shared_ptr<const Model> model;
};
const BuiltVariant& builtVariant(const std::string& name);
// The same model directory loaded once per settings (device, dtype).
std::shared_ptr<const Model> variantModel(const std::string& name, const RunSettings& settings);


}  // namespace kvlens::test

// The test executables get KVLENS_TEST_TMP as a macro; the support library
// does not, so the root is resolved here, in the including TU, when possible.
#ifdef KVLENS_TEST_TMP
namespace kvlens::test::detail {
struct TmpRootInit {
    TmpRootInit() { ::setenv("KVLENS_TEST_TMP_DEFAULT", KVLENS_TEST_TMP, 0); }
};
inline TmpRootInit tmpRootInit;
}  // namespace kvlens::test::detail
#endif
