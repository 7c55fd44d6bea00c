#pragma once
// The trainer of the bundled model kvlens-tiny: a llama-family (GQA) model
// trained from scratch on CPU with LibTorch autograd, on the synthetic corpus
// of core/eval. The forward pass is Model::forward itself (over in-memory
// weights, one fresh KvCache per sequence), so what is trained is exactly
// what inference runs. Internal to core and the CLI (uses ATen).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model/config.h"
#include "core/model/model.h"

namespace kvlens {

enum class SaveDtype { Auto, F32, BF16 };  // Auto: f32 when the weights fit kMaxModelBytes, else bf16

// The bundled model must stay small enough to ship (SPEC "Models").
inline constexpr uint64_t kMaxModelBytes = 8ull << 20;

struct TrainOptions {
    std::filesystem::path outDir;  // the HF model directory written at every checkpoint
    uint64_t seed = 1;
    int64_t steps = 4500;
    int64_t batch = 8;
    // "LEN:UNTIL,LEN:UNTIL,...,LEN": sequences of LEN tokens (<bos> included)
    // until step UNTIL (exclusive); the last stage runs to the end. Short
    // sequences first: they are cheap and teach grammar and local retrieval.
    std::string curriculum = "256:2500,512:4000,1024";
    double lr = 2e-3;
    double minLr = 2e-4;        // end of the cosine decay
    int64_t warmupSteps = 100;  // linear from 0
    double weightDecay = 0.05;  // matrices only (not norms)
    double gradClip = 1.0;      // max global L2 norm
    double needleFraction = 0.25;  // share of sequences drawn with needleStyleOptions()
    // Overrides of the default documents' CorpusOptions (applyCorpusMix), e.g.
    // "query=8,filler=1,recent=0.5"; empty: the defaults.
    std::string mix;
    // The same overrides for the haystack-style documents (needleStyleOptions()).
    std::string needleMix;
    // Start from the weights of this model directory (as written by a
    // training run: same shape) instead of a random init; the optimizer,
    // schedule and batches start afresh. Lets a recipe run in phases with
    // different data. Empty: random init.
    std::string initFrom;
    // Loss weight of answer tokens (fact digits, entity answers, copied
    // words) relative to the other tokens: > 1 puts the gradient where
    // retrieval is learnt instead of on unpredictable filler.
    double answerWeight = 1.0;
    // Mechanistic initialisation: "1,2,3" starts layer 0's first query heads
    // as heads that attend to the token 1, 2, 3 back (initPositionalHeads);
    // empty: plain random init.
    std::string positionalHeads;
    // Stop after this step (checkpointing there) although the schedule spans
    // `steps`: a recipe can take a run's weights from the middle of its
    // cosine. 0: run to `steps`. Like `steps`, it may change on resume.
    int64_t until = 0;
    int64_t checkpointEvery = 100;
    int threads = 0;  // 0: LibTorch's default
    SaveDtype saveDtype = SaveDtype::Auto;
    bool resume = false;  // continue from outDir/checkpoint (options must match, except steps/threads/checkpointEvery)

    // Model shape (llama, tied embeddings; vocab = the bundled vocabulary rounded up to 8).
    int64_t layers = 4;
    int64_t hidden = 256;
    int64_t heads = 8;
    int64_t kvHeads = 2;
    int64_t intermediate = 704;
    int64_t maxPositions = 2048;
    double ropeTheta = 10000.0;
};

struct CurriculumStage {
    int64_t seqLen;
    int64_t untilStep;  // exclusive; INT64_MAX for the last stage
};
// Throws ArgumentError naming the bad element.
std::vector<CurriculumStage> parseCurriculum(const std::string& text);
int64_t sequenceLength(const std::vector<CurriculumStage>& stages, int64_t step);
// Warmup then cosine decay from lr to minLr over the run.
double learningRate(const TrainOptions& o, int64_t step);

// The shape of o, validated by a round trip through config.json's parser.
ModelConfig trainConfig(const TrainOptions& o);
// config.json of a llama model (model_type "llama", tied, bos/eos/pad ids).
std::string configJson(const ModelConfig& c, const std::string& torchDtype);

// A model over trainable f32 CPU tensors: `model` reads `parameters` (shared
// storage), so optimiser updates are what the next forward sees.
struct TrainableModel {
    ModelConfig config;
    std::vector<std::pair<std::string, at::Tensor>> parameters;  // HF names, file order
    std::unique_ptr<Model> model;
};
// Seeded init (platform-independent draws): N(0, 0.02) matrices, output
// projections scaled by 1/sqrt(2 layers), norms at 1, tied embeddings.
TrainableModel initModel(const ModelConfig& cfg, uint64_t seed);
// Rewrites a freshly initialised model so that layer 0's query heads 0..k-1
// attend to the token offsets[h] back (≥ 97 % of their weight over 2048
// positions), through RoPE alone: embedding dimension 0 becomes a constant
// (a no-op for the tied LM head's softmax), KV head 0's keys and those
// query heads read only that dimension, with the phase of each RoPE pair set
// to peak at the offset. The rest of the model learns to use them; this
// skips the long plateau before induction heads form on a small corpus.
// Offsets must be >= 1 and fit KV head 0's query group.
void initPositionalHeads(TrainableModel& m, const std::vector<int64_t>& offsets);
// "1,2,3" -> {1, 2, 3}; empty -> {}. Throws ArgumentError naming the bad item.
std::vector<int64_t> parseOffsets(const std::string& text);
// The f32 tensors of a model directory (a checkpoint) as trainable parameters.
TrainableModel loadTrainable(const std::filesystem::path& dir);
// config.json + model.safetensors (+ tokenizer.json of the bundled vocabulary).
void writeModelDir(const TrainableModel& m, const std::filesystem::path& dir, bool bf16);

// The training sequence of (seed, step, index): <bos> + a corpus document,
// seqLen tokens in all, and the positions (into the targets, i.e. tokens
// 1..) of its Fact answers. Depends on nothing else, so a resumed run draws
// the batches an uninterrupted one would.
struct TrainSequence {
    std::vector<int64_t> tokens;      // [seqLen]: inputs tokens[0..n-2], targets tokens[1..n-1]
    std::vector<int64_t> factTargets;  // indices into the targets
    std::vector<int64_t> answerTargets;  // every answer (fact, entity, copy): indices into the targets
    double answerWeight = 1.0;           // their loss weight (TrainOptions::answerWeight)
};
TrainSequence trainingSequence(const TrainOptions& o, int64_t step, int64_t index, int64_t seqLen);

// Next-token cross-entropy of a sequence under the model, the mean over
// targets weighted by seq.answerWeight on answers (autograd flows to the
// model's weights). Fills `hits` with how many Fact targets and how many
// answers of every kind the argmax predicts, when given.
struct AnswerHits {
    int64_t facts = 0, answers = 0;
};
at::Tensor sequenceLoss(const Model& model, const TrainSequence& seq, AnswerHits* hits = nullptr);

struct StepReport {
    int64_t step = 0;  // steps completed (1-based)
    int64_t steps = 0;
    int64_t seqLen = 0;
    double lr = 0;
    double loss = 0;          // mean over the batch
    double factAccuracy = 0;  // argmax accuracy on code-digit answers (-1: none in the batch)
    double answerAccuracy = 0;  // on every answer: facts, entities, copied words (-1: none)
    double seconds = 0;       // this step
    double tokensPerSecond = 0;
    bool checkpointed = false;
    const Model* model = nullptr;  // the model being trained, weights as saved when checkpointed
};
// Return false to stop after this step (a checkpoint is written first).
using TrainProgress = std::function<bool(const StepReport&)>;

struct TrainResult {
    int64_t startStep = 0;  // 0, or the checkpoint's step when resumed
    int64_t endStep = 0;
    int64_t parameters = 0;
    std::vector<double> losses;  // one per step run
};

// Trains, checkpointing to o.outDir: the model files (config.json,
// model.safetensors, tokenizer.json), checkpoint/ (f32 weights and the
// AdamW state: optimizer.pt, state.json) and train_log.csv. Throws
// ArgumentError for bad options or a checkpoint that does not match them.
TrainResult train(const TrainOptions& o, const TrainProgress& progress = {});

// The options a checkpoint was trained with (outDir set to dir).
TrainOptions loadTrainOptions(const std::filesystem::path& dir);

}  // namespace kvlens
