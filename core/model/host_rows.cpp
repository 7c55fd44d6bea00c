#include "core/model/host_rows.h"

#include <cmath>

#include "core/host_paths.h"

namespace kvlens {

KVLENS_HOST_CLONES void hostRmsNormRows(const float* x, const float* meanSquare, const float* w, int64_t rows,
                                        int64_t E, float eps, float* out) {
    for (int64_t r = 0; r < rows; ++r) {
        const float scale = 1.0f / std::sqrt(meanSquare[r] + eps);
        const float* xr = x + r * E;
        float* o = out + r * E;
#pragma omp simd
        for (int64_t i = 0; i < E; ++i) o[i] = w[i] * (xr[i] * scale);
    }
}

KVLENS_HOST_CLONES void hostRotateRows(const float* x, int64_t H, int64_t n, int64_t D, int64_t xs0, int64_t xs1,
                                       const float* cs, const float* sn, float* out) {
    const int64_t half = D / 2;
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i) {
            const float* xr = x + h * xs0 + i * xs1;
            const float* c = cs + i * D;
            const float* s = sn + i * D;
            float* o = out + (h * n + i) * D;
#pragma omp simd
            for (int64_t d = 0; d < half; ++d) o[d] = xr[d] * c[d] + (-xr[d + half]) * s[d];
#pragma omp simd
            for (int64_t d = half; d < D; ++d) o[d] = xr[d] * c[d] + xr[d - half] * s[d];
        }
}

}  // namespace kvlens
