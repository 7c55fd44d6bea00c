#pragma once
// Next-token choice: greedy (argmax, ties to the lower id) or temperature +
// nucleus (top-p) sampling from a seeded generator, so runs reproduce.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>

#include "core/run/sampler_options.h"

namespace kvlens {

class Sampler {
public:
    explicit Sampler(SamplingOptions options);  // throws ArgumentError for bad values
    int64_t next(const at::Tensor& logits);     // logits: [V], any float dtype/device

private:
    SamplingOptions m_options;
    std::mt19937_64 m_rng;
};

}  // namespace kvlens
