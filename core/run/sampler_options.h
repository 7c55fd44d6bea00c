#pragma once
// How the next token is chosen (torch-free; see sampler.h).
#include <cstdint>

namespace kvlens {

struct SamplingOptions {
    bool greedy = true;
    double temperature = 1.0;  // > 0
    double topP = 1.0;         // (0, 1]
    uint64_t seed = 0;
};

}  // namespace kvlens
