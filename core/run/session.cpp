#include "core/run/session.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/memory_guard.h"
#include "core/run/parallel_runs.h"
#include "core/run/policy_run.h"
#include "core/run/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens {

namespace {
// Fidelity of one run against the full cache for the latest query.
struct LayerFidelity {
    std::vector<float> retainedMass, outputCosine;  // [Hq]
};
}  // namespace

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
    const std::atomic<bool>* cancel = nullptr;

    void checkCancel() const {
        if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled{};
    }
    void validate() const;
    // Runs are independent: on the CPU up to LibTorch's thread count of them
    // run at once, each on one thread (a run reading a prompt token by token
    // is a chain of small ops that gains nothing from more threads).
    // `job(r, check)`: `check` throws Cancelled when the flag is raised or
    // another run failed.
    void eachRun(const std::function<void(size_t, const std::function<void()>&)>& job,
                 const std::vector<size_t>& order = {}) {
        const size_t workers = model->device().is_cpu() ? static_cast<size_t>(std::max(1, at::get_num_threads())) : 1;
        runInParallel(
            runs.size(), workers,
            [&](size_t r, const std::atomic<bool>& stop) {
                job(r, [&] {
                    if (stop.load(std::memory_order_relaxed)) throw Cancelled{};
                    checkCancel();
                });
            },
            order);
    }
    // Runs reading the prompt token by token first (longest first), the
    // batched reads after them on whichever worker is free.
    std::vector<size_t> promptOrder() const {
        std::vector<size_t> order(runs.size());
        for (size_t r = 0; r < order.size(); ++r) order[r] = r;
        std::stable_partition(order.begin(), order.end(), [&](size_t r) { return runs[r]->readsPromptTokenByToken(); });
        return order;
    }
    std::shared_ptr<const Trace> start();
    std::shared_ptr<const Trace> step();
    void appendLabels(const std::vector<int64_t>& ids);
    void measure();
    std::shared_ptr<const Trace> trace() const;
};

void Session::Impl::validate() const {
    const ModelConfig& c = model->config();
    if (opt.prompt.empty()) throw ArgumentError("the prompt is empty (no tokens to read)");
    for (int64_t id : opt.prompt)
        if (id < 0 || id >= c.vocabSize)
            throw ArgumentError("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(c.vocabSize) + ")");
    if (opt.attention.enabled) {
        if (opt.attention.layer < 0 || opt.attention.layer >= c.numLayers)
            throw ArgumentError("attention capture layer " + std::to_string(opt.attention.layer) + " outside [0, " +
                                std::to_string(c.numLayers) + ")");
        if (opt.attention.head < 0 || opt.attention.head >= c.numHeads)
            throw ArgumentError("attention capture head " + std::to_string(opt.attention.head) + " outside [0, " +
                                std::to_string(c.numHeads) + ")");
    }
}

void Session::Impl::appendLabels(const std::vector<int64_t>& ids) {
    for (int64_t id : ids)
        labels.push_back(opt.tokenizer ? opt.tokenizer->tokenLabel(static_cast<int32_t>(id)) : "#" + std::to_string(id));
}

Session::Session(std::shared_ptr<const Model> model, SessionOptions options) : m(std::make_unique<Impl>()) {
    m->model = std::move(model);
    m->opt = std::move(options);
    m->validate();
    const int64_t T = static_cast<int64_t>(m->opt.prompt.size());
    const CaptureTarget capture{m->opt.attention.enabled, m->opt.attention.layer, m->opt.attention.head};
    std::vector<PolicyConfig> configs{parsePolicySpec("full")};
    for (const auto& p : m->opt.policies)
        if (p.id != "full") configs.push_back(p);
    for (const auto& c : configs) {
        m->runs.push_back(std::make_unique<PolicyRun>(*m->model, c, m->opt.budget, T, capture));
        m->samplers.emplace_back(m->opt.sampling);
    }
    m->metrics.resize(m->runs.size());
    m->generated.resize(m->runs.size());
    m->fidelity.resize(m->runs.size());
    m->failure.resize(m->runs.size());
}

Session::~Session() = default;

const SessionOptions& Session::options() const { return m->opt; }
int64_t Session::stepsDone() const { return m->steps; }
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
    checkCancel();
    // One shared prefill: the full run reads the prompt for itself and every
    // run that reads it with full attention (PolicyRun::readPromptSharing);
    // the others read it their own way alongside; then the followers fork
    // the full cache and compress it, in parallel.
    std::vector<PolicyRun*> followers;
    for (size_t r = 1; r < runs.size(); ++r)
        if (runs[r]->sharesPrefill()) followers.push_back(runs[r].get());
    auto follows = [&](size_t r) { return std::find(followers.begin(), followers.end(), runs[r].get()) != followers.end(); };
    eachRun(
        [&](size_t r, const std::function<void()>& check) {
            if (r == 0)
                runs[0]->readPromptSharing(opt.prompt, followers, check);
            else if (!follows(r))
                runs[r]->readPrompt(opt.prompt, check);
        },
        promptOrder());
    eachRun([&](size_t r, const std::function<void()>& check) {
        if (r == 0 || !follows(r)) return;
        check();
        runs[r]->finishSharedPrompt();
    });
    tokens = opt.prompt;
    appendLabels(opt.prompt);
    started = true;
    measure();
    return trace();
}

std::shared_ptr<const Trace> Session::Impl::step() {
    c10::InferenceMode inference;
    checkCancel();
    const size_t R = runs.size();
    std::vector<int64_t> next(R);
    if (opt.teacherForced) {
        const int64_t s = steps;
        const int64_t t = s < static_cast<int64_t>(opt.continuation.size()) ? opt.continuation[s]
                                                                           : samplers[0].next(runs[0]->logits());
        if (t < 0 || t >= model->config().vocabSize)
            throw ArgumentError("continuation token id " + std::to_string(t) + " is outside the vocabulary");
        next.assign(R, t);
        // The token read next is the target every run's last prediction is scored on.
        for (size_t r = 0; r < R; ++r)
            if (failure[r].empty())
                metrics[r].back().targetLogProb = at::log_softmax(runs[r]->logits().to(at::kDouble), -1)[t].item<double>();
    } else {
        for (size_t r = 0; r < R; ++r)
            if (failure[r].empty()) next[r] = samplers[r].next(runs[r]->logits());
    }
    checkCancel();
    // One batched forward for every run still going: the weights are read
    // once a step, each run attends over its own cache (Model::forward(segments)).
    std::vector<Model::Segment> segments;
    std::vector<size_t> slot(R, R);
    for (size_t r = 0; r < R; ++r)
        if (failure[r].empty()) {  // a stopped run reads nothing more
            slot[r] = segments.size();
            segments.push_back(runs[r]->beginToken(next[r]));
        }
    std::vector<ForwardResult> results = model->forward(segments);
    // What each run's policy does with its token (trims) runs in parallel.
    eachRun([&](size_t r, const std::function<void()>& check) {
        if (slot[r] == R) return;
        check();
        runs[r]->endToken(std::move(results[slot[r]]));
        generated[r].push_back(next[r]);
    });
    tokens.push_back(next[0]);
    appendLabels({next[0]});
    ++steps;
    measure();
    return trace();
}

void Session::Impl::measure() {
    const ModelConfig& c = model->config();
    const PolicyRun& full = *runs[0];
    const int64_t position = static_cast<int64_t>(tokens.size()) - 1;
    // Nothing can be compared with a full cache whose logits are NaN; a
    // policy run whose logits are stops, with the reason in its trace, and
    // the others go on.
    if (const std::string problem = full.nonFiniteLogits(position); !problem.empty())
        throw ModelError("the full cache's " + problem + "; no run can be compared with it");
    for (size_t r = 1; r < runs.size(); ++r)
        if (failure[r].empty()) failure[r] = runs[r]->nonFiniteLogits(position);
    at::Tensor logpFull = at::log_softmax(full.logits().to(at::kDouble), -1);
    const int64_t fullArgmax = full.logits().argmax().item<int64_t>();
    // The full cache's latest attention and outputs, every layer, read once for all runs.
    at::Tensor fullAttn, fullOutputs;
    if (opt.teacherForced) {
        fullAttn = at::stack(full.lastAttention()).to(at::kCPU, at::kFloat);  // [L, Hq, T]
        fullOutputs = at::stack(full.lastOutputs());                           // [L, Hq, D]
    }
    for (size_t r = 0; r < runs.size(); ++r) {
        const PolicyRun& run = *runs[r];
        if (!failure[r].empty()) continue;
        StepMetrics sm;
        sm.position = position;
        sm.argmax = run.logits().argmax().item<int64_t>();
        sm.top1Agrees = sm.argmax == fullArgmax;
        sm.targetLogProb = std::nan("");
        if (!opt.teacherForced) {
            // Each run read its own text: no distribution of the full cache's to compare with.
            sm.kl = sm.retainedMass = sm.outputCosine = std::nan("");
        } else {
            at::Tensor logp = at::log_softmax(run.logits().to(at::kDouble), -1);
            sm.kl = (logpFull.exp() * (logpFull - logp)).sum().item<double>();
        }
        fidelity[r].assign(c.numLayers, {});
        if (!opt.teacherForced) {  // different contexts: nothing to compare per layer
            metrics[r].push_back(sm);
            continue;
        }
        // Every layer at once: [L, Hq] retained mass and output cosine.
        std::vector<at::Tensor> masks;
        for (int64_t l = 0; l < c.numLayers; ++l) masks.push_back(run.heldMask(l));
        const at::Tensor held = at::stack(masks).repeat_interleave(c.groupSize(), 1).to(at::kFloat);  // [L, Hq, T]
        const at::Tensor mass = (fullAttn * held).sum(-1).contiguous();
        const at::Tensor cos =
            at::cosine_similarity(at::stack(run.lastOutputs()), fullOutputs, -1).to(at::kCPU, at::kFloat).contiguous();
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
        PolicyTrace pt;
        runs[r]->fillTrace(pt);
        pt.generated = generated[r];
        pt.metrics = metrics[r];
        pt.failure = failure[r].empty() ? std::string() : "stopped: " + failure[r];
        for (size_t i = 0; i < pt.generated.size() && pt.divergedAt < 0; ++i)
            if (pt.generated[i] != generated[0][i]) pt.divergedAt = static_cast<int64_t>(i);
        for (size_t l = 0; l < pt.layers.size() && l < fidelity[r].size(); ++l) {
            pt.layers[l].retainedMass = fidelity[r][l].retainedMass;
            pt.layers[l].outputCosine = fidelity[r][l].outputCosine;
        }
        t->policies.push_back(std::move(pt));
        if (opt.attention.enabled) t->attention.push_back(runs[r]->attentionMap());
    }
    return t;
}

}  // namespace kvlens
