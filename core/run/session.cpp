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
#include "core/policy/param_default.h"
#include "core/run/memory_guard.h"
#include "core/run/parallel_runs.h"
#include "core/run/policy_run.h"
#include "core/run/prompt_scores.h"
#include "core/run/sampler.h"
#include "core/tokenizer/tokenizer.h"

#include "core/run/session_impl.h"

namespace kvlens {

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
    if (!opt.budgets.empty() && opt.budgets.size() != opt.policies.size())
        throw ArgumentError(std::to_string(opt.budgets.size()) + " budgets for " + std::to_string(opt.policies.size()) +
                            " policies: give one budget per policy, or none");
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
// of every policy that has one at its default (Finch's rule; kvpress's
// query_aware keeps the policy's own window over context + question). A
// window the user set stays theirs: the list and the column say the same.
void askAware(SessionOptions& o) {
    if (o.question.empty() || o.questionMode != SessionOptions::QuestionMode::Aware) return;
    o.prompt.insert(o.prompt.end(), o.question.begin(), o.question.end());
    for (PolicyConfig& p : o.policies)
        if (atDefault(p, "window")) p.values["window"] = std::to_string(o.question.size());
    o.question.clear();  // read with the prompt
}

}  // namespace

int64_t Session::Impl::fitMemory(int64_t runCount) {
    const int64_t planned = opt.plannedSteps > 0 ? opt.plannedSteps : 16;
    RunShape shape;
    shape.tokens = static_cast<int64_t>(opt.prompt.size()) + planned;
    shape.steps = planned;
    shape.runs = runCount;
    shape.elementBytes = static_cast<uint64_t>(at::elementSize(model->dtype()));
    shape.capture = opt.attention.enabled;
    shape.keepTraces = opt.refreshable;
    const uint64_t budget = opt.memoryBudget ? opt.memoryBudget : defaultMemoryBudget();
    return fitRunMemory(model->config(), shape, budget, &memoryNote).captureFrom;
}

const std::string& Session::memoryNote() const { return m->memoryNote; }

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
    std::vector<std::pair<PolicyConfig, BudgetSpec>> configs{{fullCacheConfig(), m->opt.budget}};
    for (size_t i = 0; i < m->opt.policies.size(); ++i)
        if (!isFullCache(m->opt.policies[i]))
            configs.emplace_back(m->opt.policies[i], m->opt.budgets.empty() ? m->opt.budget : m->opt.budgets[i]);
    CaptureTarget capture{m->opt.attention.enabled, m->opt.attention.layer, m->opt.attention.head};
    capture.fromRow = m->fitMemory(static_cast<int64_t>(configs.size()));
    for (const auto& [config, budget] : configs) {
        m->runs.push_back(std::make_unique<PolicyRun>(*m->model, config, budget, T, capture));
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

}  // namespace kvlens
