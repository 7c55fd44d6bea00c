#include "core/run/generate.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/policy_run.h"
#include "core/run/sampler.h"

namespace kvlens {
namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

double GenerateResult::decodeTokensPerSecond() const {
    // The first generated token comes from the prefill; the rest from decode steps.
    const double steps = generatedIds.size() > 1 ? double(generatedIds.size() - 1) : 0.0;
    return decodeSeconds > 0 ? steps / decodeSeconds : 0.0;
}

GenerateResult generate(const Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& options,
                        const std::function<void(int64_t)>& onToken) {
    if (prompt.empty()) throw ArgumentError("the prompt is empty (no tokens to condition on)");
    if (options.steps < 0) throw ArgumentError("--steps must be ≥ 0");
    c10::InferenceMode inference;  // see Session::Impl::start
    Sampler sampler(options.sampling);
    PolicyRun run(model, options.policy, options.budget, static_cast<int64_t>(prompt.size()), CaptureTarget{});
    GenerateResult r;
    r.promptIds = prompt;
    auto t0 = Clock::now();
    run.readPrompt(prompt, {});
    auto finite = [&] {
        const std::string problem = run.nonFiniteLogits(run.cache().seqLen() - 1);
        if (!problem.empty()) throw ModelError("generate stopped: " + problem);
    };
    finite();
    auto t1 = Clock::now();
    r.prefillSeconds = seconds(t0, t1);
    for (int64_t s = 0; s < options.steps; ++s) {
        const int64_t id = sampler.next(run.logits());
        r.generatedIds.push_back(id);
        if (onToken) onToken(id);
        const bool stop = std::find(options.stopIds.begin(), options.stopIds.end(), id) != options.stopIds.end();
        if (stop || s + 1 == options.steps) break;
        run.readToken(id);
        finite();
    }
    r.decodeSeconds = seconds(t1, Clock::now());
    r.kvBytesHeld = run.cache().bytesHeld();
    const ModelConfig& c = model.config();
    r.kvBytesFull = static_cast<uint64_t>(run.cache().seqLen()) * c.kvBytesPerToken(at::elementSize(model.dtype()));
    return r;
}

}  // namespace kvlens
