#pragma once
// Plain generation with the full cache (prefill, then one-token decodes),
// timed. Policies join in run/Session; this is the engine's own loop.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/run/sampler.h"

namespace kvlens {

class Model;

struct GenerateOptions {
    int64_t steps = 32;
    SamplingOptions sampling;
    std::vector<int64_t> stopIds;  // generation ends after emitting one of these
};

struct GenerateResult {
    std::vector<int64_t> promptIds;
    std::vector<int64_t> generatedIds;
    double prefillSeconds = 0;
    double decodeSeconds = 0;     // all decode steps together
    uint64_t kvBytesHeld = 0;     // at the end
    double decodeTokensPerSecond() const;
};

// onToken(id) is called after each generated token (for streaming output).
GenerateResult generate(const Model& model, const std::vector<int64_t>& prompt, const GenerateOptions& options,
                        const std::function<void(int64_t)>& onToken = {});

}  // namespace kvlens
