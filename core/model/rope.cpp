#include "core/model/rope.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "core/host_paths.h"
#include "core/model/host_rows.h"

namespace kvlens {

std::vector<double> Rope::inverseFrequencies(const ModelConfig& cfg) {
    const int64_t half = cfg.headDim / 2;
    std::vector<double> inv(half);
    // HF computes base ** (arange(0, D, 2) / D) in float32 (int64 arange cast
    // to float); do the same so keys match checkpoints bit for bit at fp32.
    for (int64_t i = 0; i < half; ++i) {
        float expo = static_cast<float>(2 * i) / static_cast<float>(cfg.headDim);
        inv[i] = 1.0f / std::pow(static_cast<float>(cfg.ropeTheta), expo);
    }
    const RopeScaling& rs = cfg.ropeScaling;
    if (rs.type == RopeScaling::Type::Linear) {
        for (double& f : inv) f /= rs.factor;
    } else if (rs.type == RopeScaling::Type::Llama3) {
        // Llama 3.1: leave high frequencies, divide low ones by `factor`, and
        // interpolate smoothly between (transformers' _compute_llama3_parameters).
        const double oldCtx = static_cast<double>(rs.originalMaxPositionEmbeddings);
        const double lowWavelen = oldCtx / rs.lowFreqFactor;
        const double highWavelen = oldCtx / rs.highFreqFactor;
        for (double& f : inv) {
            const double wavelen = 2.0 * M_PI / f;
            if (wavelen < highWavelen) continue;
            if (wavelen > lowWavelen) {
                f /= rs.factor;
                continue;
            }
            const double smooth = (oldCtx / wavelen - rs.lowFreqFactor) / (rs.highFreqFactor - rs.lowFreqFactor);
            f = (1.0 - smooth) * f / rs.factor + smooth * f;
        }
    }
    return inv;
}

Rope::Rope(const ModelConfig& cfg, at::Device device) {
    auto inv = inverseFrequencies(cfg);
    std::vector<float> f(inv.begin(), inv.end());
    m_invFreq = at::tensor(f, at::TensorOptions().dtype(at::kFloat)).to(device);
}

Rope::Angles Rope::angles(const at::Tensor& positions) const {
    // angles: [..., n, D/2] -> cos/sin over the full head_dim as cat(f, f).
    at::Tensor pos = positions.to(m_invFreq.device(), at::kFloat);
    at::Tensor half = pos.unsqueeze(-1) * m_invFreq;  // [n, D/2] or [H, n, D/2]
    at::Tensor emb = at::cat({half, half}, -1);       // [.., n, D]
    return {emb.cos(), emb.sin()};
}

at::Tensor Rope::apply(const at::Tensor& x, const Angles& a) {
    // Six small ATen ops per rotation on CPU f32 are one host loop (see
    // rmsNorm in forward.cpp): the angles of every row, shared by the heads.
    if (onHostF32(x) && x.dim() == 3 && x.stride(2) == 1 && a.cos.dim() == 2 && a.cos.is_contiguous() &&
        a.sin.is_contiguous() && a.cos.scalar_type() == at::kFloat && a.cos.size(0) == x.size(1) &&
        a.cos.size(1) == x.size(2) && !(at::GradMode::is_enabled() && x.requires_grad())) {  // training: autograd's
        at::Tensor out = at::empty({x.size(0), x.size(1), x.size(2)}, x.options());
        hostRotateRows(x.data_ptr<float>(), x.size(0), x.size(1), x.size(2), x.stride(0), x.stride(1),
                   a.cos.data_ptr<float>(), a.sin.data_ptr<float>(), out.data_ptr<float>());
        return out;
    }
    at::Tensor xf = x.to(at::kFloat);
    const int64_t half = x.size(-1) / 2;
    at::Tensor rotated = at::cat({xf.narrow(-1, half, half).neg(), xf.narrow(-1, 0, half)}, -1);
    return (xf * a.cos).addcmul_(rotated, a.sin).to(x.scalar_type());
}

at::Tensor Rope::apply(const at::Tensor& x, const at::Tensor& positions) const {
    return apply(x, angles(positions));
}

}  // namespace kvlens
