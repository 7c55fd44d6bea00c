#pragma once
// y = x Wᵀ (+ b) for the forward's projections, choosing the fastest
// product per shape. A decode step multiplies one row (or one row per run of
// a batched lockstep step) by each weight matrix: that is memory-bound, and
// OpenBLAS's GEMM packs the whole weight matrix for every such call (52 % of
// a SmolLM2-135M decode step, perf). For a few f32 rows on the CPU the
// weights are streamed once for all rows instead (rowLinearHost); otherwise
// at::linear. KVLENS_SIMD=avx2 or none in the environment picks a lesser
// variant (to measure them). Internal to core.
#include <ATen/core/Tensor.h>

#include <initializer_list>
#include <vector>

namespace kvlens {

// Rows one pass over the weights serves (measured: docs/performance.md),
// and rows up to which the streaming kernel is used at all, in passes of
// kStreamedRowsMax: a decode step of up to 32 lockstep runs. Every row's
// result is the same whichever rows share its call (bit for bit), so a
// batched lockstep step equals each run's own step. Longer inputs (a prompt)
// go to at::linear.
constexpr int64_t kStreamedRowsMax = 8;
constexpr int64_t kStreamedRowsTotal = 32;

at::Tensor rowLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = at::Tensor());

// Several projections of the same input (q, k and v; gate and up) in one
// pass of threads: the results of rowLinear(x, p.w, p.b) for each p.
struct Projection {
    const at::Tensor& w;
    const at::Tensor& b;
};
constexpr size_t kMaxProjections = 3;  // more go to at::linear one by one
std::vector<at::Tensor> rowLinears(const at::Tensor& x, std::initializer_list<Projection> ps);

}  // namespace kvlens
