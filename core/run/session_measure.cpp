// Each run measured against the full cache after a step, and the Trace a step publishes.
#include "core/run/session_impl.h"

#include <c10/core/InferenceMode.h>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/memory_guard.h"
#include "core/run/prompt_scores.h"
#include <cmath>

namespace kvlens {

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
        sm.bytesHeld = run.bytesHeld();
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
