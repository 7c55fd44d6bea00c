#include "core/run/session.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/memory_guard.h"
#include "core/run/parallel_runs.h"
#include "core/run/policy_run.h"
#include "core/run/prompt_scores.h"
#include "core/run/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens {

namespace {
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

bool sameConfig(const PolicyConfig& a, const PolicyConfig& b) {
    return a.id == b.id && a.schedule == b.schedule && a.everyN == b.everyN && a.gqa == b.gqa && a.values == b.values;
}

using Preparation = PolicyInfo::Preparation;

bool prepares(const PolicyConfig& c, Preparation p) { return c.info().preparation == p; }

bool isOracle(const PolicyConfig& c) { return prepares(c, Preparation::FutureAttention); }

bool sameSampling(const SamplingOptions& a, const SamplingOptions& b) {
    return a.greedy == b.greedy && a.temperature == b.temperature && a.topP == b.topP && a.seed == b.seed;
}
}  // namespace

std::string Reuse::text() const {
    if (runsKept == 0 && promptTokens == 0) return "computed afresh";
    std::string s;
    if (runsKept > 0)
        s = "kept " + std::to_string(runsKept) + (runsKept == 1 ? " run" : " runs") + " and " + std::to_string(steps) +
            (steps == 1 ? " step" : " steps");
    else
        s = "kept " + std::to_string(promptTokens) + " prompt tokens of the full cache";
    if (runsShared > 0) s += "; " + std::to_string(runsShared) + " shared the full cache's prompt read";
    if (runsRead > 0) s += "; " + std::to_string(runsRead) + " read the prompt";
    if (runsReadPast > 0) s += " (" + std::to_string(runsReadPast) + " past the prefix the full cache read for it)";
    return s;
}

struct Session::Impl {
    std::shared_ptr<const Model> model;
    SessionOptions opt;
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

void Session::Impl::validate() const {
    const ModelConfig& c = model->config();
    if (opt.prompt.empty()) throw ArgumentError("the prompt is empty (no tokens to read)");
    for (int64_t id : opt.prompt)
        if (id < 0 || id >= c.vocabSize)
            throw ArgumentError("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(c.vocabSize) + ")");
    for (int64_t id : opt.calibration)
        if (id < 0 || id >= c.vocabSize)
            throw ArgumentError("calibration token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(c.vocabSize) + ")");
    for (int64_t id : opt.question)
        if (id < 0 || id >= c.vocabSize)
            throw ArgumentError("question token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(c.vocabSize) + ")");
    for (const PolicyConfig& p : opt.policies) {
        if (!isOracle(p)) continue;
        if (p.schedule != Schedule::PrefillOnce)
            throw ArgumentError("oracle: the hindsight oracle chooses once, at the end of the prompt "
                                "(schedule=prefill_once), from what the next queries will attend to");
        if (!opt.teacherForced)
            throw ArgumentError("oracle: the hindsight oracle needs teacher-forced runs (every run reading the "
                                "full cache's tokens); free-running has no one future to read");
    }
    if (opt.attention.enabled) {
        if (opt.attention.layer < 0 || opt.attention.layer >= c.numLayers)
            throw ArgumentError("attention capture layer " + std::to_string(opt.attention.layer) + " outside [0, " +
                                std::to_string(c.numLayers) + ")");
        if (opt.attention.head < 0 || opt.attention.head >= c.numHeads)
            throw ArgumentError("attention capture head " + std::to_string(opt.attention.head) + " outside [0, " +
                                std::to_string(c.numHeads) + ")");
    }
}

namespace {

// Query-aware: the question ends the prompt and is the observation window
// of every policy that has one (Finch's rule; kvpress's query_aware keeps
// the policy's own window over context + question).
void askAware(SessionOptions& o) {
    if (o.question.empty() || o.questionMode != SessionOptions::QuestionMode::Aware) return;
    o.prompt.insert(o.prompt.end(), o.question.begin(), o.question.end());
    for (PolicyConfig& p : o.policies)
        if (p.has("window")) p.values["window"] = std::to_string(o.question.size());
    o.question.clear();  // read with the prompt
}

}  // namespace

int64_t Session::Impl::forcedToken(int64_t s) const { return kvlens::forcedToken(opt, s); }

void Session::Impl::appendLabels(const std::vector<int64_t>& ids) {
    for (int64_t id : ids)
        labels.push_back(opt.tokenizer ? opt.tokenizer->tokenLabel(static_cast<int32_t>(id)) : "#" + std::to_string(id));
}

Session::Session(std::shared_ptr<const Model> model, SessionOptions options) : m(std::make_unique<Impl>()) {
    m->model = std::move(model);
    m->opt = std::move(options);
    askAware(m->opt);
    m->validate();
    const int64_t T = static_cast<int64_t>(m->opt.prompt.size());
    const CaptureTarget capture{m->opt.attention.enabled, m->opt.attention.layer, m->opt.attention.head};
    std::vector<PolicyConfig> configs{fullCacheConfig()};
    for (const auto& p : m->opt.policies)
        if (!isFullCache(p)) configs.push_back(p);
    for (const auto& c : configs) {
        m->runs.push_back(std::make_unique<PolicyRun>(*m->model, c, m->opt.budget, T, capture));
        m->samplers.emplace_back(m->opt.sampling);
    }
    m->metrics.resize(m->runs.size());
    m->generated.resize(m->runs.size());
    m->fidelity.resize(m->runs.size());
    m->failure.resize(m->runs.size());
    m->takenFrom.assign(m->runs.size(), -1);
}

Session::Session(std::shared_ptr<const Model> model, SessionOptions options, std::unique_ptr<Session> previous)
    : Session(std::move(model), std::move(options)) {
    if (previous) m->takeOver(*previous->m);
}

void Session::Impl::takeOver(Impl& p) {
    if (!p.started || !p.consistent || p.model != model || !p.opt.refreshable || !p.record || !p.record->complete) return;
    const auto& po = p.opt;
    if (po.attention.enabled != opt.attention.enabled ||
        (opt.attention.enabled && (po.attention.layer != opt.attention.layer || po.attention.head != opt.attention.head)))
        return;  // the full cache's captured rows are for another head
    const int64_t T = static_cast<int64_t>(opt.prompt.size()), Tp = static_cast<int64_t>(po.prompt.size());
    int64_t k = 0;
    while (k < std::min(T, Tp) && opt.prompt[k] == po.prompt[k]) ++k;
    // A Session stopped while it caught up holds the runs it kept at that
    // Session's last step (their Traces in its previousTraces) and the runs
    // it computed at its own: only the former can be kept again.
    const bool catchingUp = p.steps < p.catchUp;
    const int64_t pSteps = catchingUp ? p.catchUp : p.steps;
    std::vector<std::shared_ptr<const Trace>>& pTraces = catchingUp ? p.previousTraces : p.published;
    const bool sameContext = k == T && k == Tp && po.teacherForced == opt.teacherForced &&
                             po.continuation == opt.continuation && po.question == opt.question &&
                             sameSampling(po.sampling, opt.sampling) &&
                             p.fullStepsComplete && static_cast<int64_t>(p.fullSteps.size()) == pSteps + 1 &&
                             static_cast<int64_t>(pTraces.size()) == pSteps + 1;
    if (sameContext) {
        // Every run the edit left as it was keeps its results, step for step.
        std::vector<bool> taken(p.runs.size(), false);
        auto take = [&](size_t r, size_t j) {
            runs[r] = std::move(p.runs[j]);
            samplers[r] = p.samplers[j];
            metrics[r] = std::move(p.metrics[j]);
            generated[r] = std::move(p.generated[j]);
            fidelity[r] = std::move(p.fidelity[j]);
            failure[r] = std::move(p.failure[j]);
            // Where this run's Traces stand in pTraces.
            takenFrom[r] = catchingUp ? p.takenFrom[j] : static_cast<int>(j);
            taken[j] = true;
        };
        // A run that read steps ahead which that Session never presented
        // (stopped before them) stands past its Traces: computed again.
        auto keepable = [&](size_t j) {
            return !taken[j] && (!catchingUp || p.takenFrom[j] >= 0) && !p.runs[j]->hasStepsAhead();
        };
        // Stopped before the steps the full cache ran ahead: back to the
        // last one presented (its sampler is that step's already).
        p.runs[0]->dropStepsAhead();
        take(0, 0);
        for (size_t r = 1; r < runs.size(); ++r)
            for (size_t j = 1; j < p.runs.size(); ++j)
                if (keepable(j) && sameConfig(runs[r]->config(), p.runs[j]->config()) &&
                    // an oracle that would read another horizon ahead chooses again
                    (!isOracle(runs[r]->config()) || futureHorizon(runs[r]->config(), opt.plannedSteps) ==
                                                         futureHorizon(p.runs[j]->config(), po.plannedSteps)) &&
                    runs[r]->budgets().perLayer == p.runs[j]->budgets().perLayer &&
                    // Q-Filters learnt from another calibration prompt chooses again
                    (!prepares(runs[r]->config(), Preparation::CalibrationQueries) || po.calibration == opt.calibration) &&
                    runs[r]->budgets().compress == p.runs[j]->budgets().compress &&
                    runs[r]->budgets().note == p.runs[j]->budgets().note) {
                    take(r, j);
                    break;
                }
        record = p.record;
        fullSteps = std::move(p.fullSteps);
        fullStepBytes = p.fullStepBytes;
        previousTraces = std::move(pTraces);
        previousTokens = catchingUp ? p.previousTokens : p.tokens;
        catchUp = pSteps;
        reused.promptTokens = T;
        reused.steps = pSteps;
        for (int t : takenFrom) reused.runsKept += t >= 0 ? 1 : 0;
        return;
    }
    // A shared prefix: the full cache goes back to it (at least one token is
    // read again: the logits after the prompt) and reads the rest.
    const int64_t keep = std::min(k, T - 1);
    if (keep < 1) return;
    runs[0] = std::move(p.runs[0]);
    runs[0]->rewind(keep, T);
    record = std::make_shared<PromptRecord>(p.record->prefix(keep));
    reused.promptTokens = keep;
}

void Session::Impl::reportProgress() const {
    const int64_t T = static_cast<int64_t>(opt.prompt.size()), L = model->config().numLayers;
    std::vector<RunProgress> out;
    for (size_t r = 0; r < runs.size(); ++r)
        if (takenFrom[r] < 0)
            out.push_back({runs[r]->config().label(), std::min(T, tokensRead[r].load(std::memory_order_relaxed) / L), T});
    onProgress(out);
}

// While start() reads the prompt: the runs count into tokensRead, and a
// thread of its own reports every 100 ms (a chunk of a long prompt takes
// seconds, so the reading threads cannot be relied on to report). On the
// way out (read, cancelled or failed) the runs stop counting: a later
// Session may take them over.
class Session::Impl::ProgressReporter {
public:
    explicit ProgressReporter(Impl& s) : m_s(s) {
        const int64_t L = s.model->config().numLayers;
        s.tokensRead = std::make_unique<std::atomic<int64_t>[]>(s.runs.size());
        for (size_t r = 0; r < s.runs.size(); ++r) {
            s.tokensRead[r] = s.runs[r]->cache().seqLen() * L;  // the full cache's kept prefix after an append
            s.runs[r]->setTokenCounter(&s.tokensRead[r]);
        }
        s.reportProgress();
        m_thread = std::thread([this] {
            std::unique_lock<std::mutex> lock(m_mutex);
            while (!m_cv.wait_for(lock, std::chrono::milliseconds(100), [this] { return m_done; })) m_s.reportProgress();
        });
    }
    ~ProgressReporter() {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_done = true;
        }
        m_cv.notify_all();
        m_thread.join();
        for (auto& run : m_s.runs)
            if (run) run->setTokenCounter(nullptr);
    }
    // The prompt is read: every run at its end.
    void finish() {
        const int64_t L = m_s.model->config().numLayers, T = static_cast<int64_t>(m_s.opt.prompt.size());
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            for (size_t r = 0; r < m_s.runs.size(); ++r) m_s.tokensRead[r] = T * L;
        }
        m_s.reportProgress();
    }

private:
    Impl& m_s;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_done = false;
    std::thread m_thread;
};

void Session::setProgressCallback(std::function<void(const std::vector<RunProgress>&)> callback) {
    m->onProgress = std::move(callback);
}

Session::~Session() = default;

const SessionOptions& Session::options() const { return m->opt; }
const Reuse& Session::reuse() const { return m->reused; }
void Session::setCancelFlag(const std::atomic<bool>* flag) { m->cancel = flag; }

std::shared_ptr<const Trace> Session::start() {
    if (m->started) throw Error("Session::start called twice");
    try {
        return m->start();
    } catch (const Cancelled&) {
        throw;
    } catch (...) {
        const size_t runs = m->runs.size();
        rethrowAllocationFailure("reading a prompt of " + std::to_string(m->opt.prompt.size()) + " tokens with " +
                                 std::to_string(runs) + (runs == 1 ? " run" : " runs"));
    }
}

std::shared_ptr<const Trace> Session::step() {
    if (!m->started) throw Error("Session::step before start");
    try {
        return m->step();
    } catch (const Cancelled&) {
        throw;
    } catch (...) {
        rethrowAllocationFailure("decode step " + std::to_string(m->steps + 1) + " at " +
                                 std::to_string(m->tokens.size()) + " tokens");
    }
}

std::shared_ptr<const Trace> Session::Impl::start() {
    // Inference mode, not just no-grad: LibTorch then skips autograd's
    // dispatch and version counters on every op, which is most of what a
    // single-token step of a small model costs (h2o at 512 tokens, budget
    // 128: 0.83 -> 0.73 ms per step; bench, 1 thread).
    c10::InferenceMode inference;
    // A Session that kept the full cache (an edit of policies or budgets:
    // the prompt is the same) reads its prompt whatever the cancel flag
    // says: cancelled half-way it would have consumed what it took over, and
    // the edit that superseded it would start afresh; whole, that edit takes
    // over from it. Its decode steps stay cancellable.
    holdCancel = takenFrom[0] >= 0;
    checkCancel();
    {
        std::vector<PolicyRun*> computedHere;
        for (size_t r = 1; r < runs.size(); ++r)
            if (takenFrom[r] < 0) computedHere.push_back(runs[r].get());
        preparePromptScores(*model, opt, computedHere, [this] { checkCancel(); });
    }
    std::optional<ProgressReporter> progress;
    if (onProgress) progress.emplace(*this);
    readPrompt();
    if (progress) {
        progress->finish();
        progress.reset();
    }
    holdCancel = false;
    tokens = opt.prompt;
    appendLabels(opt.prompt);
    started = true;
    measure();
    return publish(trace());
}

void Session::Impl::readPrompt() {
    // One shared prefill: the full cache reads the prompt and every run that
    // reads it with full attention follows that forward
    // (PolicyRun::sharesPrefill); the others read it their own way
    // alongside. Taking over from a previous Session, the followers first
    // replay the record of the prefix the full cache kept, or all of it when
    // the full cache reads nothing.
    const bool fullReads = takenFrom[0] < 0;
    std::vector<PolicyRun*> followers;
    std::vector<size_t> readers, following;
    for (size_t r = 1; r < runs.size(); ++r) {
        if (takenFrom[r] >= 0) continue;
        if (runs[r]->sharesPrefill()) {
            followers.push_back(runs[r].get());
            following.push_back(r);
        } else {
            readers.push_back(r);
        }
    }
    if (!record) {
        // From the start: the record is kept for a later Session while it
        // stays under its cap (and only when one may take over).
        const ModelConfig& c = model->config();
        const double perToken = double(c.numLayers) * double(c.numHeads + 2 * c.numKvHeads) * double(c.headDim) *
                                double(at::elementSize(model->dtype()));
        record = std::make_shared<PromptRecord>();
        record->complete = opt.refreshable && perToken * double(opt.prompt.size()) <= double(kRecordBytes);
    }
    // The runs reading token by token read together: one batched forward per
    // token for all of them (the weights read once), as a decode step. That
    // job first (the longest), then the full cache (or the replay), then the
    // batched reads.
    // A reader sees its untouched prefix with full attention, as the full
    // cache did: with the record of it at hand (a Session taking over), it
    // replays that instead of reading it again (all but the last prompt
    // token, which gives its logits). A budget edit of StreamingLLM then
    // reads 75 % of the prompt at a 25 % budget.
    const int64_t T = static_cast<int64_t>(opt.prompt.size());
    const int64_t recorded = record->complete ? record->length() : 0;
    std::vector<PromptRecord> prefixes(runs.size());
    for (size_t r : readers) {
        const int64_t n = std::min({recorded, runs[r]->untouchedPrefix(), T - 1});
        if (n > 0 && !runs[r]->cache().rerotate()) {
            prefixes[r] = record->prefix(n);
            ++reused.runsReadPast;
        }
    }
    auto replayPrefix = [&](size_t r) {
        if (prefixes[r].length() > 0) PolicyRun::replayRecord(*model, prefixes[r], {runs[r].get()});
    };
    std::vector<size_t> online;
    for (size_t r : readers)
        if (runs[r]->readsPromptTokenByToken()) online.push_back(r);
    std::vector<size_t> order;
    if (!online.empty()) order.push_back(runs.size());  // stands for the online runs
    order.push_back(0);
    for (size_t r : readers)
        if (!runs[r]->readsPromptTokenByToken()) order.push_back(r);
    bool finished = false;  // the followers compressed (in the replay's job)
    runInRuns(order, [&](size_t r, const std::function<void()>& check) {
        if (r == runs.size()) {
            readOnline(online, prefixes, check);
            return;
        }
        if (r != 0) {
            replayPrefix(r);
            runs[r]->readPrompt(opt.prompt, check);
            return;
        }
        if (fullReads && runs[0]->cache().seqLen() == 0) {
            runs[0]->readPromptShared(opt.prompt, followers, record->complete ? record.get() : nullptr, check);
            return;
        }
        PolicyRun::replayRecord(*model, *record, followers);
        if (fullReads) {
            runs[0]->readPromptShared(opt.prompt, followers, record.get(), check);
            // Steps planned: the followers compress, the full cache takes
            // its steps ahead and they read them ahead, while the runs
            // reading the prompt themselves still read it.
            // Nothing to overlap (no run reads the prompt itself): step()
            // does it, after the prompt's Trace is out.
            if (!opt.teacherForced || opt.plannedSteps < 2 || order.size() < 2) return;
            const at::Tensor promptLogits = runs[0]->logits();
            for (size_t f : following) runs[f]->finishSharedPrompt(promptLogits);
            finished = true;
            if (runFullAhead(0, anyReadsAhead(following))) readAhead(0, following);
            return;
        }
        // The full cache kept (an edit of policies or budgets): the
        // followers compress now and read the steps they catch up on ahead,
        // while the runs reading the prompt themselves still read it.
        for (size_t f : following) runs[f]->finishSharedPrompt(record->logits);
        finished = true;
        readAhead(0, following);
    });
    if (!record->complete) record->chunks.clear();
    const at::Tensor logits = fullReads ? runs[0]->logits() : record->logits;
    if (!finished) runInRuns(following, [&](size_t r, const std::function<void()>&) { runs[r]->finishSharedPrompt(logits); });
    reused.runsShared = static_cast<int>(followers.size());
    reused.runsRead = static_cast<int>(readers.size()) + (fullReads ? 1 : 0);
}

void Session::Impl::readOnline(const std::vector<size_t>& online, const std::vector<PromptRecord>& prefixes,
                               const std::function<void()>& check) {
    const int64_t T = static_cast<int64_t>(opt.prompt.size());
    std::vector<int64_t> next(online.size());
    int64_t from = T;
    for (size_t i = 0; i < online.size(); ++i) {
        const PromptRecord& prefix = prefixes[online[i]];
        if (prefix.length() > 0) PolicyRun::replayRecord(*model, prefix, {runs[online[i]].get()});
        next[i] = runs[online[i]]->beginOnlinePrompt(opt.prompt, check);
        from = std::min(from, next[i]);
    }
    for (int64_t t = from; t < T; ++t) {
        check();
        std::vector<Model::Segment> segments;
        std::vector<size_t> reading;
        for (size_t i = 0; i < online.size(); ++i)
            if (next[i] <= t) {  // past its batched prefix
                segments.push_back(runs[online[i]]->beginPromptToken(opt.prompt[static_cast<size_t>(t)]));
                reading.push_back(i);
            }
        std::vector<ForwardResult> results = model->forward(segments);
        for (size_t j = 0; j < reading.size(); ++j) runs[online[reading[j]]]->endPromptToken(std::move(results[j]));
    }
    for (size_t r : online) runs[r]->endPrompt();
}

std::shared_ptr<const Trace> Session::Impl::step() {
    c10::InferenceMode inference;
    // Cancelled only here, before anything changes: a step is short, and a
    // Session left whole can be taken over by the next one.
    checkCancel();
    consistent = false;
    const size_t R = runs.size();
    const int64_t s = steps, position = static_cast<int64_t>(tokens.size());
    std::vector<int64_t> next(R);
    // While catching up, the full cache's token is the one it read before.
    const bool replaying = !computed(0, s + 1);
    if (opt.teacherForced) {
        runFullAhead(s, anyReadsAhead(policyRunsAt(s)));
        const int64_t forced = forcedToken(s);
        const bool chosenAhead = s < static_cast<int64_t>(fullAhead.size()) && fullAhead[static_cast<size_t>(s)] >= 0;
        const int64_t t = replaying ? previousTokens.at(static_cast<size_t>(position))
                          : forced >= 0 ? forced
                          : chosenAhead ? fullAhead[static_cast<size_t>(s)]
                                        : samplers[0].next(runs[0]->logits());
        if (chosenAhead) samplers[0] = fullAheadSampler[static_cast<size_t>(s)];
        if (t < 0 || t >= model->config().vocabSize)
            throw ArgumentError("continuation token id " + std::to_string(t) + " is outside the vocabulary");
        next.assign(R, t);
        // The token read next is the target every run's last prediction is scored on.
        for (size_t r = 0; r < R; ++r)
            if (failure[r].empty() && computed(r, s + 1))
                metrics[r].back().targetLogProb =  // a run taken over until this step has none measured here
                    (logp[r].defined() ? logp[r] : at::log_softmax(runs[r]->logits().to(at::kDouble), -1))[t].item<double>();
    } else {
        // An agnostic question is read by every run before it generates.
        const int64_t asked = s < static_cast<int64_t>(opt.question.size()) ? opt.question[static_cast<size_t>(s)] : -1;
        for (size_t r = 0; r < R; ++r)
            if (failure[r].empty() && computed(r, s + 1)) next[r] = asked >= 0 ? asked : samplers[r].next(runs[r]->logits());
        if (replaying) next[0] = previousTokens.at(static_cast<size_t>(position));
    }
    if (opt.teacherForced) readAhead(s, policyRunsAt(s));
    // One batched forward for every run still going: the weights are read
    // once a step, each run attends over its own cache (Model::forward(segments)).
    std::vector<Model::Segment> segments;
    std::vector<size_t> slot(R, R), stepping, presenting;
    for (size_t r = 0; r < R; ++r)
        if (failure[r].empty() && computed(r, s + 1)) {  // a stopped run reads nothing more
            if (runs[r]->hasStepsAhead()) {
                presenting.push_back(r);
                continue;
            }
            slot[r] = segments.size();
            segments.push_back(runs[r]->beginToken(next[r]));
            stepping.push_back(r);
        }
    for (size_t r : presenting) {
        runs[r]->stepAhead();
        generated[r].push_back(next[r]);
    }
    std::vector<ForwardResult> results = segments.empty() ? std::vector<ForwardResult>() : model->forward(segments);
    // What each run's policy does with its token (trims) runs in parallel.
    runInRuns(stepping, [&](size_t r, const std::function<void()>&) {
        runs[r]->endToken(std::move(results[slot[r]]));
        generated[r].push_back(next[r]);
    });
    tokens.push_back(next[0]);
    appendLabels({next[0]});
    ++steps;
    measure();
    return publish(trace());
}

bool Session::Impl::runFullAhead(int64_t s, bool followed) {
    if (!followed || !opt.teacherForced || opt.plannedSteps <= 0 || !computed(0, s + 1) || runs[0]->hasStepsAhead())
        return false;
    const int64_t k = std::min(kAhead, opt.plannedSteps - s);
    if (k < 2) return false;
    fullAhead.resize(static_cast<size_t>(s + k), -1);
    fullAheadSampler.resize(static_cast<size_t>(s + k), samplers[0]);
    runs[0]->beginRunningAhead();
    for (int64_t j = 0; j < k; ++j) {
        const int64_t forced = forcedToken(s + j);
        const int64_t t = forced >= 0 ? forced : samplers[0].next(runs[0]->logits());
        if (t < 0 || t >= model->config().vocabSize)
            throw ArgumentError("continuation token id " + std::to_string(t) + " is outside the vocabulary");
        runs[0]->readTokenAhead(t);
        fullAhead[static_cast<size_t>(s + j)] = t;
        fullAheadSampler[static_cast<size_t>(s + j)] = samplers[0];
    }
    runs[0]->endRunningAhead();
    return true;
}

std::vector<size_t> Session::Impl::policyRunsAt(int64_t s) const {
    std::vector<size_t> out;
    for (size_t r = 1; r < runs.size(); ++r)
        if (failure[r].empty() && computed(r, s + 1)) out.push_back(r);
    return out;
}

bool Session::Impl::anyReadsAhead(const std::vector<size_t>& candidates) const {
    return std::any_of(candidates.begin(), candidates.end(), [&](size_t r) { return runs[r]->readsAhead(); });
}

std::vector<int64_t> Session::Impl::knownTokens(int64_t s) const {
    const int64_t V = model->config().vocabSize;
    std::vector<int64_t> known;
    if (!opt.teacherForced) return known;
    for (int64_t step = s; step < s + kAhead && (opt.plannedSteps <= 0 || step < opt.plannedSteps); ++step) {
        // The token read at `step` sits at this position of the sequence.
        const auto at = static_cast<size_t>(static_cast<int64_t>(opt.prompt.size()) + step);
        const int64_t forced = forcedToken(step);
        const int64_t t = !computed(0, step + 1) ? (at < previousTokens.size() ? previousTokens[at] : -1)  // caught up on
                          : forced >= 0 ? forced
                          : step < static_cast<int64_t>(fullAhead.size()) ? fullAhead[static_cast<size_t>(step)]
                                                                          : -1;
        if (t < 0 || t >= V) break;
        known.push_back(t);
    }
    return known;
}

void Session::Impl::readAhead(int64_t s, const std::vector<size_t>& candidates) {
    std::vector<size_t> which;
    for (size_t r : candidates)
        if (runs[r]->readsAhead()) which.push_back(r);
    if (which.empty()) return;
    const std::vector<int64_t> known = knownTokens(s);
    if (known.size() < 2) return;  // one step: the lockstep forward reads it
    std::vector<Model::Segment> segments;
    for (size_t r : which) segments.push_back(runs[r]->beginTokensAhead(known));
    std::vector<ForwardResult> results = model->forward(segments);
    for (size_t i = 0; i < which.size(); ++i) runs[which[i]]->endTokensAhead(std::move(results[i]));
}

FullStep Session::Impl::fullStep() const {
    const PolicyRun& full = *runs[0];
    FullStep f;
    f.logp = at::log_softmax(full.logits().to(at::kDouble), -1);
    f.argmax = full.logits().argmax().item<int64_t>();
    // The latest attention and outputs, every layer, read once for all runs.
    if (opt.teacherForced) {
        f.attn = at::stack(full.lastAttention()).to(at::kCPU, at::kFloat);  // [L, Hq, T]
        f.outputs = at::stack(full.lastOutputs());                           // [L, Hq, D]
    }
    return f;
}

void Session::Impl::measure() {
    const ModelConfig& c = model->config();
    const int64_t position = static_cast<int64_t>(tokens.size()) - 1;
    // Nothing can be compared with a full cache whose logits are NaN; a
    // policy run whose logits are stops, with the reason in its trace, and
    // the others go on.
    FullStep fresh;
    if (computed(0, steps)) {
        if (const std::string problem = runs[0]->nonFiniteLogits(position); !problem.empty())
            throw ModelError("the full cache's " + problem + "; no run can be compared with it");
        fresh = fullStep();
        if (opt.refreshable && fullStepsComplete && fullStepBytes + fresh.bytes() <= kFullStepBytes) {
            fullStepBytes += fresh.bytes();
            fullSteps.push_back(fresh);
        } else {
            fullStepsComplete = false;
        }
    }
    const FullStep& full = computed(0, steps) ? fresh : fullSteps.at(static_cast<size_t>(steps));
    at::Tensor fullP;  // the full cache's probabilities, once for every run's KL
    logp.assign(runs.size(), at::Tensor());
    for (size_t r = 1; r < runs.size(); ++r)
        if (failure[r].empty() && computed(r, steps)) failure[r] = runs[r]->nonFiniteLogits(position);
    for (size_t r = 0; r < runs.size(); ++r) {
        const PolicyRun& run = *runs[r];
        if (!failure[r].empty() || !computed(r, steps)) continue;
        StepMetrics sm;
        sm.position = position;
        sm.argmax = run.logits().argmax().item<int64_t>();
        sm.top1Agrees = sm.argmax == full.argmax;
        sm.targetLogProb = std::nan("");
        if (!opt.teacherForced) {
            // Each run read its own text: no distribution of the full cache's to compare with.
            sm.kl = sm.retainedMass = sm.outputCosine = std::nan("");
        } else {
            if (!fullP.defined()) fullP = full.logp.exp();
            logp[r] = at::log_softmax(run.logits().to(at::kDouble), -1);
            sm.kl = (fullP * (full.logp - logp[r])).sum().item<double>();
        }
        fidelity[r].assign(c.numLayers, {});
        if (!opt.teacherForced) {  // different contexts: nothing to compare per layer
            metrics[r].push_back(sm);
            continue;
        }
        // Every layer at once: [L, Hq] retained mass and output cosine.
        const at::Tensor held = run.heldMask().repeat_interleave(c.groupSize(), 1).to(at::kFloat);  // [L, Hq, T]
        const at::Tensor mass = (full.attn * held).sum(-1).contiguous();
        const at::Tensor cos =
            at::cosine_similarity(at::stack(run.lastOutputs()), full.outputs, -1).to(at::kCPU, at::kFloat).contiguous();
        const int64_t Hq = mass.size(1);
        double massSum = 0, cosSum = 0;
        for (int64_t l = 0; l < c.numLayers; ++l) {
            const float *m = mass.data_ptr<float>() + l * Hq, *k = cos.data_ptr<float>() + l * Hq;
            LayerFidelity& f = fidelity[r][l];
            f.retainedMass.assign(m, m + Hq);
            f.outputCosine.assign(k, k + Hq);
            double ms = 0, cs = 0;
            for (int64_t h = 0; h < Hq; ++h) ms += m[h], cs += k[h];
            massSum += ms / static_cast<double>(Hq);
            cosSum += cs / static_cast<double>(Hq);
        }
        sm.retainedMass = massSum / static_cast<double>(c.numLayers);
        sm.outputCosine = cosSum / static_cast<double>(c.numLayers);
        metrics[r].push_back(sm);
    }
}

std::shared_ptr<const Trace> Session::Impl::trace() const {
    const ModelConfig& c = model->config();
    auto t = std::make_shared<Trace>();
    t->step = steps;
    t->promptLength = static_cast<int64_t>(opt.prompt.size());
    t->tokens = tokens;
    t->labels = labels;
    t->numLayers = c.numLayers;
    t->numHeads = c.numHeads;
    t->numKvHeads = c.numKvHeads;
    t->teacherForced = opt.teacherForced;
    t->slidingWindow = c.slidingWindow.value_or(0);
    for (size_t r = 0; r < runs.size(); ++r) {
        if (!computed(r, steps)) {
            // Taken over: what the previous Session published at this step.
            const Trace& before = *previousTraces.at(static_cast<size_t>(steps));
            t->policies.push_back(before.policies.at(static_cast<size_t>(takenFrom[r])));
            if (opt.attention.enabled) t->attention.push_back(before.attention.at(static_cast<size_t>(takenFrom[r])));
            continue;
        }
        PolicyTrace pt;
        runs[r]->fillTrace(pt);
        pt.generated = generated[r];
        pt.metrics = metrics[r];
        pt.failure = failure[r].empty() ? std::string() : "stopped: " + failure[r];
        for (size_t l = 0; l < pt.layers.size() && l < fidelity[r].size(); ++l) {
            pt.layers[l].retainedMass = fidelity[r][l].retainedMass;
            pt.layers[l].outputCosine = fidelity[r][l].outputCosine;
        }
        t->policies.push_back(std::move(pt));
        if (opt.attention.enabled) t->attention.push_back(runs[r]->attentionMap());
    }
    // Where each run first generated otherwise than the full cache (after
    // the runs are assembled: a run computed here is compared with a full
    // cache taken over).
    const std::vector<int64_t>& fullGenerated = t->policies[0].generated;
    for (PolicyTrace& pt : t->policies) {
        pt.divergedAt = -1;
        for (size_t i = 0; i < pt.generated.size() && i < fullGenerated.size() && pt.divergedAt < 0; ++i)
            if (pt.generated[i] != fullGenerated[i]) pt.divergedAt = static_cast<int64_t>(i);
    }
    return t;
}

}  // namespace kvlens
