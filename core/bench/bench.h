#pragma once
// What eviction costs, measured: the benchmark behind `kvlens-cli bench`, as
// a library that returns value reports (the CLI prints them; tests assert on
// them). Torch-free header.
//
// - timePair: a policy's decode step against a full-cache step at the same
//   context, interleaved in one run so that both see the same machine state.
// - raceReference: the engine's decode against core/eval/runc_llama.c (run.c's
//   `runomp` build) on the same weights, tokens and threads.
// - lockstep: the GUI's Session (full + streaming, h2o, tova, snapkv,
//   pyramidkv at 25 %) from scratch and after edits; its decode step against
//   the full cache's alone; minor page faults per step.
// Every figure is a wall-clock median (on CUDA the device's time).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model/device.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"

namespace kvlens {

class Model;

namespace bench {

// The model a benchmark runs: a directory's, or a real shape with random
// weights (Llama layout, no biases) so that cost can be measured at the
// sizes users run without downloading anything.
class BenchModel {
public:
    // A model directory on `run`'s device and dtype.
    static BenchModel load(const std::filesystem::path& dir, const RunSettings& run);
    // A named shape (syntheticShapes()); f32 CPU weights drawn from `seed`,
    // then copied to `run`'s device/dtype when it is not cpu/f32.
    static BenchModel synthetic(const std::string& shape, uint64_t seed, const RunSettings& run = {});
    BenchModel(BenchModel&&) noexcept;
    BenchModel& operator=(BenchModel&&) noexcept;
    ~BenchModel();

    const Model& get() const;
    const std::string& name() const;  // the directory, or "synthetic <shape> (random weights)"

    struct Impl;  // core/bench/bench.cpp
    const Impl& impl() const { return *m; }

private:
    explicit BenchModel(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m;
};

// "kvlens-tiny" (the bundled model's shape, up to 131072 positions),
// "smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b".
std::vector<std::string> syntheticShapes();

// Uniform random token ids below the model's vocabulary size.
std::vector<int64_t> randomTokens(const Model& model, uint64_t seed, int64_t n);

// The q-quantile (nearest rank) of v: 0.5 the median, 0.25 / 0.75 the quartiles.
double quantile(std::vector<double> v, double q);
double median(std::vector<double> v);

// Process figures from getrusage.
long minorFaults();
long peakRssKiB();

// One side of a paired timing (the full cache's or the policy's).
struct StepTiming {
    double promptMs = 0, stepMs = 0;     // step: median over the measured steps
    double ratio = 0;                    // policy: median of (policy step / the full step beside it)
    double ratioLow = 0, ratioHigh = 0;  // policy: their quartiles (the spread of the pairs)
    double cpuRatio = 0;                 // the same with process CPU time (robust on a busy machine at 1 thread)
    double policyMs = 0;                 // policy: mean time per step inside the policy (observe, plan, apply, record)
    double promptPolicyMs = 0;           // policy: time inside the policy while the prompt was read
    double kvShare = 1;                  // policy: KV bytes held / the full cache's, after the last step
    double budgetShare = 1;              // policy: mean layer budget / the context
};

// A policy and the full cache on tokens[0, context), then `steps` decode
// steps (after two warm-up steps) alternating which goes first.
std::pair<StepTiming, StepTiming> timePair(const Model& model, const PolicyConfig& policy, const BudgetSpec& budget,
                                           const std::vector<int64_t>& tokens, int64_t context, int64_t steps);

// One row of the overhead table: a policy at a budget.
struct PolicyRow {
    std::string policy;       // the policy's label
    std::string schedule;     // scheduleName()
    std::string budget;       // "= context", "25%", ...
    StepTiming full, timed;
    std::string target;       // the verdict ("PASS <= 1.10x", ...), empty where no target applies
    bool failed = false;      // the verdict is a FAIL
};

// "= context": budget = context, so every step appends one entry and evicts
// one (the eviction overhead); a prefill_once policy evicts nothing there, so
// its row runs at 50 % and its verdict is its prompt work amortised over
// `generated` tokens. Other budgets: whether the step got faster (and, at
// 8192 tokens, whether the KV held is at most 27 %).
struct BudgetCase {
    std::string label;
    BudgetSpec spec;
};
BudgetCase atContext(int64_t context);
// onRow (optional) sees each row as soon as it is measured. judgeSteps
// false: the per-step ratio of every_step and prefill_then_step rows is
// reported, not judged (on the bundled model a step is ~0.6 ms of per-op
// overhead, and a step's O(context) bookkeeping per KV head weighs as much
// as its attention over 32-wide heads; docs/performance.md).
std::vector<PolicyRow> policyRows(const Model& model, const std::vector<PolicyConfig>& policies,
                                  const std::vector<BudgetCase>& budgets, const std::vector<int64_t>& tokens,
                                  int64_t context, int64_t steps,
                                  const std::function<void(const PolicyRow&)>& onRow = {}, int64_t generated = 256,
                                  bool judgeSteps = true);

// The engine's decode against core/eval/runc_llama.c (run.c's `runomp` build)
// from position 0, both on `threads` threads, in `rounds` pairs run in turn
// on fresh caches: throughput medians, and the engine's speed-up per pair
// (reference time / engine time) as median, min and max.
struct ReferenceRace {
    bool ran = false;
    std::string why;  // when it did not run
    int threads = 1;
    int64_t tokens = 0;
    double engineTokS = 0, referenceTokS = 0;
    double ratio = 0, ratioLow = 0, ratioHigh = 0;
    double maxLogitDiff = 0;  // the largest over the rounds' last logits
};
ReferenceRace raceReference(const BenchModel& model, const std::vector<int64_t>& tokens, int64_t n, int threads,
                            int rounds = 3);

// What the GUI does after an edit: a new Session (full + the policies) reads
// the prompt and publishes the first Trace. Median of `reps` wall times, ms.
double refreshMs(const Model& model, const std::vector<PolicyConfig>& policies, const BudgetSpec& budget,
                 const std::vector<int64_t>& prompt, int reps);

// The lockstep Session as the GUI runs it: full + streaming, h2o, tova,
// snapkv, pyramidkv at 25 % on a prompt, then `steps` decode steps.
struct Refresh {
    double ms = 0, firstMs = 0;  // prompt + the decode steps; until the prompt's Trace
    std::string reuse;           // Reuse::text() of the last one
};
struct LockstepReport {
    double refreshMs = 0;       // from scratch (median of kEdits): prompt + the decode steps, attention captured as the GUI does
    double lockstepStepMs = 0;  // mean decode step of full + 5 (the steps planned: the runs read ahead)
    double fullStepMs = 0;      // mean decode step of the full cache alone
    double ratio = 0;           // lockstepStepMs / fullStepMs
    double faultsPerStep = 0;   // minor page faults per lockstep decode step
    // A Session taking over from the previous one, median of kEdits edits in a row.
    Refresh budgetEdit;     // the budget 25 % -> 20 % -> 25 % ...
    Refresh parameterEdit;  // one policy's parameter (snapkv:window 32 -> 16 -> 32 ...)
    Refresh append;         // `sentence` appended to the prompt, then again
};
constexpr int kEdits = 3;
std::vector<PolicyConfig> lockstepPolicies();
LockstepReport lockstep(const Model& model, const std::vector<int64_t>& prompt, const std::vector<int64_t>& sentence,
                        int64_t steps);

}  // namespace bench
}  // namespace kvlens
