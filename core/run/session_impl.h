#pragma once
// Session::Impl, shared by the files of the Session, one per role:
// session.cpp (set-up, take-over, start and step), session_prompt.cpp (the
// prompt read: shared, batched, token by token), session_ahead.cpp (steps
// read ahead), session_measure.cpp (each run measured against the full
// cache, and the Trace). Internal to core/run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/run/parallel_runs.h"
#include "core/run/policy_run.h"
#include "core/run/sampler.h"
#include "core/run/session.h"

namespace kvlens {
namespace session_detail {
// Fidelity of one run against the full cache for the latest query.
struct LayerFidelity {
    std::vector<float> retainedMass, outputCosine;  // [Hq]
};

// What the full cache showed after one step, which every run is measured
// against; kept (under a cap) so that a later Session can measure runs it
// computes again without running the full cache.
struct FullStep {
    at::Tensor logp;     // [V] double log-probabilities
    int64_t argmax = 0;
    at::Tensor attn;     // [L, Hq, T] fp32 on the CPU (teacher-forced only)
    at::Tensor outputs;  // [L, Hq, D] (teacher-forced only)
    uint64_t bytes() const {
        uint64_t b = 0;
        for (const at::Tensor* t : {&logp, &attn, &outputs})
            if (t->defined()) b += static_cast<uint64_t>(t->numel()) * t->element_size();
        return b;
    }
};

// Caps on what a refreshable Session keeps (SessionOptions::refreshable).
constexpr uint64_t kRecordBytes = 1ull << 30;    // the prompt record
constexpr uint64_t kFullStepBytes = 256ull << 20;  // the full cache's per-step results

inline bool sameConfig(const PolicyConfig& a, const PolicyConfig& b) {
    return a.id == b.id && a.schedule == b.schedule && a.everyN == b.everyN && a.gqa == b.gqa && a.values == b.values;
}

using Preparation = PolicyInfo::Preparation;

inline bool prepares(const PolicyConfig& c, Preparation p) { return c.info().preparation == p; }

inline bool isOracle(const PolicyConfig& c) { return prepares(c, Preparation::FutureAttention); }

inline bool sameSampling(const SamplingOptions& a, const SamplingOptions& b) {
    return a.greedy == b.greedy && a.temperature == b.temperature && a.topP == b.topP && a.seed == b.seed;
}
}  // namespace session_detail

using namespace session_detail;

struct Session::Impl {
    std::shared_ptr<const Model> model;
    SessionOptions opt;
    std::string memoryNote;                        // what the memory guard dropped (memory_guard.h)
    // The memory guard for `runCount` runs: the first attention row captured.
    int64_t fitMemory(int64_t runCount);
    std::vector<std::unique_ptr<PolicyRun>> runs;  // [0]: the full cache
    std::vector<Sampler> samplers;                 // one per run (free-running)
    std::vector<std::vector<StepMetrics>> metrics; // per run
    std::vector<std::vector<int64_t>> generated;   // per run
    std::vector<std::vector<LayerFidelity>> fidelity;  // per run, per layer
    std::vector<std::string> failure;              // per run: why it stopped (non-finite logits), empty while it runs
    std::vector<int64_t> tokens;                   // the full run's sequence
    std::vector<std::string> labels;
    int64_t steps = 0;
    bool started = false;
    bool consistent = false;  // the last start()/step() completed: a later Session may take over
    const std::atomic<bool>* cancel = nullptr;

    // What a later Session takes over (opt.refreshable), and what this one took over.
    std::shared_ptr<PromptRecord> record;          // the full cache's prompt read
    std::vector<FullStep> fullSteps;               // per published step, while under kFullStepBytes
    uint64_t fullStepBytes = 0;
    bool fullStepsComplete = true;
    std::vector<std::shared_ptr<const Trace>> published;
    std::vector<int> takenFrom;                    // per run: the previous Session's run whose results it took over, -1: none
    std::vector<std::shared_ptr<const Trace>> previousTraces;  // that Session's, step by step
    std::vector<int64_t> previousTokens;
    int64_t catchUp = 0;                           // before this step only the runs computed here step
    std::vector<at::Tensor> logp;                  // per run: [V] double log-probabilities measure() computed after the last token
    Reuse reused;

    // Whether run r's result at `step` is computed here (not taken over from previousTraces).
    bool computed(size_t r, int64_t step) const { return takenFrom[r] < 0 || step > catchUp; }
    void takeOver(Impl& p);

    bool holdCancel = false;  // while a Session that kept the full cache reads its prompt
    void checkCancel() const {
        if (!holdCancel && cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled{};
    }
    // Progress of the prompt read (setProgressCallback): the runs count into
    // tokensRead (tokens x layers), a thread reports every 100 ms.
    std::function<void(const std::vector<RunProgress>&)> onProgress;
    std::unique_ptr<std::atomic<int64_t>[]> tokensRead;  // per run
    void reportProgress() const;
    class ProgressReporter;
    void validate() const;
    // The token every run reads at decode step s (an agnostic question's,
    // then the continuation's), -1 where the runs choose.
    int64_t forcedToken(int64_t s) const;
    // Teacher-forced steps whose tokens are known before they are taken
    // (those the full cache read before, while catching up; the question's
    // and the continuation's) are read ahead, up to kAhead at a time, by
    // every run that can (PolicyRun::readsAhead): one forward for all their
    // rows, the weights read once instead of once a step. The steps are
    // then presented one per step(). Bounded by the steps the caller plans.
    static constexpr int64_t kAhead = 16;
    // The tokens of steps s, s+1, ... known now (at most kAhead).
    std::vector<int64_t> knownTokens(int64_t s) const;
    // The runs of `candidates` that can read ahead read the known tokens
    // from step s on in one forward (when at least two are known).
    void readAhead(int64_t s, const std::vector<size_t>& candidates);
    // The policy runs still stepping at step s (computed here, not stopped).
    std::vector<size_t> policyRunsAt(int64_t s) const;
    bool anyReadsAhead(const std::vector<size_t>& candidates) const;
    // Teacher-forced, with its steps planned: the full cache first takes up
    // to kAhead steps alone (one row a step), choosing their tokens, so that
    // the policy runs read them ahead; its steps are presented in turn.
    // `followed`: some policy run will read the full cache's tokens ahead. True when it ran ahead.
    bool runFullAhead(int64_t s, bool followed);
    std::vector<int64_t> fullAhead;          // by step: the token the full cache chose ahead, -1: none
    std::vector<Sampler> fullAheadSampler;   // by step: its sampler after that choice
    // Runs are independent: on the CPU up to LibTorch's thread count of them
    // run at once, each on one thread (a run reading a prompt token by token
    // is a chain of small ops that gains nothing from more threads).
    // `job(r, check)` for each r of `which`, started in that order (give
    // the longest first); `check` throws Cancelled when the flag is raised
    // or another run failed. In `check` the last run still reading takes the
    // threads the others freed (widenIfAlone), where its products are big
    // enough to gain from them. On this project's 2-core machine, whose two
    // cores behave like one for compute, it gains little: at SmolLM2-135M's
    // shape a budget edit's prompt trace came at 1656 ms instead of 1769 ms
    // (medians of 9, interleaved); on the bundled model (0.6 M parameters)
    // starting a second thread's team mid-read cost more than it saved
    // (a refresh from scratch 175-223 ms instead of 55-63 ms).
    static constexpr int64_t kWidenParameters = 16'000'000;
    void runInRuns(const std::vector<size_t>& which, const std::function<void(size_t, const std::function<void()>&)>& job) {
        const size_t workers = model->device().is_cpu() ? static_cast<size_t>(std::max(1, at::get_num_threads())) : 1;
        const bool widen = model->parameterCount() >= kWidenParameters;
        runInParallel(which.size(), workers, [&](size_t i, const std::atomic<bool>& stop) {
            job(which[i], [&] {
                if (stop.load(std::memory_order_relaxed)) throw Cancelled{};
                checkCancel();
                if (widen) widenIfAlone();
            });
        });
    }
    std::shared_ptr<const Trace> start();
    std::shared_ptr<const Trace> step();
    void readPrompt();
    // The runs that read the prompt token by token, each token of all of them in one forward.
    void readOnline(const std::vector<size_t>& online, const std::vector<PromptRecord>& prefixes,
                    const std::function<void()>& check);
    void appendLabels(const std::vector<int64_t>& ids);
    void measure();
    FullStep fullStep() const;
    std::shared_ptr<const Trace> trace() const;
    std::shared_ptr<const Trace> publish(std::shared_ptr<const Trace> t) {
        if (opt.refreshable) published.push_back(t);
        consistent = true;
        return t;
    }
};

}  // namespace kvlens
