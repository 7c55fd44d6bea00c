#include "core/model/row_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <immintrin.h>

#include <array>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/host_paths.h"

namespace kvlens {
namespace {

using Block = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);

// out[r, o] = Σ_i x[r, i] · w[o, i] for output rows [begin, end): each weight
// row is loaded once and multiplied into R accumulators (one per input row)
// while the R input rows stay in L1, so a step streams the weights from
// memory once whatever R is. With AVX-512, O weight rows go through at once
// (O × R accumulators in registers): an input vector loaded serves O
// products, and O × R independent chains hide the FMA latency. Every output's sum runs in
// the same order whatever R and O are (bit for bit). AVX2+FMA and AVX-512
// variants; other CPUs use at::linear.
template <int R>
__attribute__((target("avx2,fma"), always_inline)) inline void rowsAvx2(const float* x, const float* w, float* out,
                                                                      int64_t in, int64_t outs, int64_t o) {
    const int64_t vec = in / 8 * 8;
    const float* wr = w + o * in;
    __m256 acc[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < vec; i += 8) {
        const __m256 wv = _mm256_loadu_ps(wr + i);
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * in + i), acc[r]);
    }
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
        const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
        float s = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
        for (int64_t i = vec; i < in; ++i) s += wr[i] * x[r * in + i];
        out[r * outs + o] = s;
    }
}

template <int R, int O>
__attribute__((target("avx512f"), always_inline)) inline void rowsAvx512(const float* x, const float* w, float* out,
                                                                       int64_t in, int64_t outs, int64_t o) {
    const int64_t vec = in / 16 * 16;
    __m512 acc[O][R];
    #pragma GCC unroll 16
    for (int p = 0; p < O; ++p)
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < vec; i += 16) {
        __m512 wv[O];
        #pragma GCC unroll 16
        for (int p = 0; p < O; ++p) wv[p] = _mm512_loadu_ps(w + (o + p) * in + i);
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512 xv = _mm512_loadu_ps(x + r * in + i);
            #pragma GCC unroll 16
            for (int p = 0; p < O; ++p) acc[p][r] = _mm512_fmadd_ps(wv[p], xv, acc[p][r]);
        }
    }
    #pragma GCC unroll 16
    for (int p = 0; p < O; ++p)
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            float s = _mm512_reduce_add_ps(acc[p][r]);
            const float* wr = w + (o + p) * in;
            for (int64_t i = vec; i < in; ++i) s += wr[i] * x[r * in + i];
            out[r * outs + o + p] = s;
        }
}

// Weight rows per pass (AVX-512): O × R accumulators, O weight vectors and
// one input vector fit the 32 vector registers. Measured (all of one
// token's SmolLM2-135M MLP products, 1 thread, best of 21, three builds in
// one session): 6 rows 22.3 -> 20.7 ms with O = 4; 1 and 2 rows slower with
// it (more weight streams at once), 4 and 8 rows no better. AVX2's 16
// registers leave no room: one weight row (6 rows 20.3 -> 34.7 ms with O = 2).
constexpr int outputsPerPass(int R) {
    if (R < 5 || R > 7) return 1;
    int O = 4;
    while (O > 1 && O * R + O + 1 > 32) --O;
    return O;
}

// The kernels start on a 64-byte boundary (as the C reference's do,
// core/eval/runc_llama.c): a target attribute drops -falign-functions, and
// relinking moved blockAvx2<1> by 0x50 bytes and swung the race with the
// reference from 0.93x to 0.85x (docs/performance.md).
template <int R>
__attribute__((target("avx2,fma"), aligned(64))) void blockAvx2(const float* x, const float* w, float* out, int64_t in,
                                                   int64_t outs, int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) rowsAvx2<R>(x, w, out, in, outs, o);
}

template <int R>
__attribute__((target("avx512f"), aligned(64))) void blockAvx512(const float* x, const float* w, float* out, int64_t in,
                                                    int64_t outs, int64_t begin, int64_t end) {
    constexpr int O = outputsPerPass(R);
    int64_t o = begin;
    for (; o + O <= end; o += O) rowsAvx512<R, O>(x, w, out, in, outs, o);
    for (; o < end; ++o) rowsAvx512<R, 1>(x, w, out, in, outs, o);
}

template <int... Rs>
Block blockFor(int64_t rows, bool avx512, std::integer_sequence<int, Rs...>) {
    Block out = nullptr;
    ((rows == Rs + 1 ? (out = avx512 ? &blockAvx512<Rs + 1> : &blockAvx2<Rs + 1>, 0) : 0), ...);
    return out;
}

enum class Simd { None, Avx2, Avx512 };

Simd simdLevel() {
    static const Simd level = [] {
        __builtin_cpu_init();
        const char* force = std::getenv("KVLENS_SIMD");  // avx2 | none: measure the alternatives
        if (force && std::string(force) == "none") return Simd::None;
        const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        if (force && std::string(force) == "avx2" && avx2) return Simd::Avx2;
        if (__builtin_cpu_supports("avx512f")) return Simd::Avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Simd::Avx2;
        return Simd::None;
    }();
    return level;
}

}  // namespace

std::vector<at::Tensor> rowLinears(const at::Tensor& x, std::initializer_list<Projection> ps) {
    const bool grad = at::GradMode::is_enabled();
    bool streamed = simdLevel() != Simd::None && x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= kStreamedRowsTotal &&
                    onHostF32(x) && !(grad && x.requires_grad()) && ps.size() <= kMaxProjections;
    for (const Projection& p : ps)  // training (anything asking for gradients): autograd's linear
        streamed = streamed && p.w.scalar_type() == at::kFloat && p.w.dim() == 2 && p.w.is_contiguous() &&
                   x.size(1) == p.w.size(1) && !(grad && (p.w.requires_grad() || (p.b.defined() && p.b.requires_grad())));
    std::vector<at::Tensor> outs;
    outs.reserve(ps.size());
    if (!streamed) {  // autograd's or OpenBLAS's linear
        for (const Projection& p : ps) outs.push_back(p.b.defined() ? at::linear(x, p.w, p.b) : at::linear(x, p.w));
        return outs;
    }
    const at::Tensor xc = x.contiguous();
    const int64_t rows = xc.size(0), in = xc.size(1);
    // The weights' rows one after another: [first[i], first[i + 1]) are the
    // i-th projection's (fixed arrays: this runs ~200 times a decode step).
    std::array<int64_t, kMaxProjections + 1> first{};
    std::array<const float*, kMaxProjections> weights{};
    std::array<float*, kMaxProjections> results{};
    size_t count = 0;
    for (const Projection& p : ps) {
        outs.push_back(at::empty({rows, p.w.size(0)}, xc.options()));
        first[count + 1] = first[count] + p.w.size(0);
        weights[count] = p.w.data_ptr<float>();
        results[count] = outs.back().data_ptr<float>();
        ++count;
    }
    const bool avx512 = simdLevel() == Simd::Avx512;
    const float* xp = xc.data_ptr<float>();
    // Tasks of about 64 KiB of weights.
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in));
    // Rows in groups of at most kStreamedRowsMax, each a pass over the
    // weights: a row's result never depends on which rows share its call.
    for (int64_t r0 = 0; r0 < rows; r0 += kStreamedRowsMax) {
        const int64_t n = std::min(kStreamedRowsMax, rows - r0);
        const Block block = blockFor(n, avx512, std::make_integer_sequence<int, kStreamedRowsMax>{});
        // One parallel region for every projection: a sleeping thread is
        // woken once for q, k and v (or gate and up), not three times.
        at::parallel_for(0, first[count], grain, [&](int64_t begin, int64_t end) {
            for (size_t i = 0; i < count; ++i) {
                const int64_t b = std::max(begin, first[i]), e = std::min(end, first[i + 1]);
                if (b >= e) continue;
                const int64_t outsI = first[i + 1] - first[i];
                block(xp + r0 * in, weights[i], results[i] + r0 * outsI, in, outsI, b - first[i], e - first[i]);
            }
        });
    }
    const Projection* p = ps.begin();
    for (size_t i = 0; i < count; ++i)
        if (p[i].b.defined()) outs[i].add_(p[i].b);
    return outs;
}

at::Tensor rowLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return std::move(rowLinears(x, {Projection{w, b}}).front());
}

}  // namespace kvlens
