#pragma once
// Row-wise host loops of the forward on CPU f32, written to round exactly as
// the ATen ops they replace (core/model/CMakeLists: built without FMA
// contraction), so that the host and the tensor paths (KVLENS_DEVICE_PATHS)
// give the same bits and a policy's near-tie falls the same way in both.
// Internal to core/model.
#include <cstdint>

namespace kvlens {

// out[r] = w * (x[r] * (1 / sqrt(meanSquare[r] + eps))), in float as
// `weight * (x * at::rsqrt(x.pow(2).mean(-1) + eps))` computes it.
void hostRmsNormRows(const float* x, const float* meanSquare, const float* w, int64_t rows, int64_t E, float eps,
                     float* out);

// out[h, i] = x[h, i] * cos[i] + rotate_half(x[h, i]) * sin[i], each product
// rounded before the sum, as `(x * cos).addcmul_(rotated, sin)`. x is
// [H, n, D] with rows of D contiguous floats (strides xs0, xs1); the angles
// [n, D] contiguous; out contiguous.
void hostRotateRows(const float* x, int64_t H, int64_t n, int64_t D, int64_t xs0, int64_t xs1, const float* cs,
                    const float* sn, float* out);

}  // namespace kvlens
