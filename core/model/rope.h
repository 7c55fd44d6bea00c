#pragma once
// Rotary position embedding in the HF layout ("rotate half": the first and
// second halves of head_dim form the pairs, not interleaved neighbours), with
// the rope_scaling types of config.h. Internal to core.
#include <ATen/core/Tensor.h>

#include "core/model/config.h"

namespace kvlens {

class Rope {
public:
    Rope(const ModelConfig& cfg, at::Device device);

    // x: [H, n, D] (any float dtype); positions: [n] or [H, n] int64, may be
    // negative (re-rotation by a delta). Returns x rotated, same dtype.
    at::Tensor apply(const at::Tensor& x, const at::Tensor& positions) const;

    // cos and sin of the angles of `positions` over the full head_dim (the
    // cat(f, f) layout), fp32: [n, D] or [H, n, D]. A forward computes them
    // once and rotates q and k of every layer with them.
    struct Angles {
        at::Tensor cos, sin;
    };
    Angles angles(const at::Tensor& positions) const;
    static at::Tensor apply(const at::Tensor& x, const Angles& a);


    // The HF inverse frequencies for a config (exposed for tests).
    static std::vector<double> inverseFrequencies(const ModelConfig& cfg);

private:
    at::Tensor m_invFreq;  // [D/2] fp32 on the run device
};

}  // namespace kvlens
