#pragma once
// Generation by one run, free-running: the prompt is read with the policy's
// schedule (the full cache by default), then tokens are sampled one at a
// time. Timed. Comparisons of several policies live in run/Session.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/sampler_options.h"

namespace kvlens {

class Model;

struct GenerateOptions {
    int64_t steps = 32;
    SamplingOptions sampling;
    std::vector<int64_t> stopIds;  // generation ends after emitting one of these
    PolicyConfig policy = fullCacheConfig();
    BudgetSpec budget;
};

struct GenerateResult {
    std::vector<int64_t> promptIds;
    std::vector<int64_t> generatedIds;
    double prefillSeconds = 0;
    double decodeSeconds = 0;     // all decode steps together
    uint64_t kvBytesHeld = 0;     // at the end
    uint64_t kvBytesFull = 0;     // what the full cache would hold for the same tokens
    double decodeTokensPerSecond() const;
};

// onToken(id) is called after each generated token (for streaming output).
GenerateResult generate(const Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& options,
                        const std::function<void(int64_t)>& onToken = {});

}  // namespace kvlens
