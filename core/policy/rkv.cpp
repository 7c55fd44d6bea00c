// R-KV (Cai et al. 2025, Zefan-Cai/R-KV, rkv/compression/r1_kv.py): for
// reasoning traces that repeat themselves, an entry is worth keeping by its
// importance minus its redundancy. Per KV head:
// - importance: the last `window` queries' logits on the keys before the
//   window, the group's maximum over its query heads, softmax over those
//   keys, the mean over the window's queries, then a max-pool along the keys
//   (kernel `kernel`, stride 1, padding ignored);
// - redundancy: the cosine similarity of every pair of the head's keys with
//   the diagonal zeroed and, in each row, the most recent key more than 0.5
//   alike zeroed too (the newest copy is not redundant); the column mean over
//   every row, softmaxed over the head's entries;
// - score = lambda · importance − (1 − lambda) · redundancy; the window is kept.
// The reference works in bf16 and, in a row with no key above 0.5, zeroes
// column 0; here fp32, and such a row is left whole.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/host_paths.h"
#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"
#include "core/policy/select.h"

namespace kvlens {
namespace {

// On the host, for unit keys u [n, D]: cols[j] = Σ_i u_i·u_j less the
// diagonal and less each row's newest key more than 0.5 alike. The column
// sums are one product with Σ_i u_i (O(n·D)); a row's newest duplicate is
// found by walking back from the newest key, which stops at once where
// keys are alike (a real model's usually are) and costs the n x n
// similarities only where none is. The similarity matrix itself (16 MB at
// 2,000 keys, its product most of R-KV's prompt work) is never formed.
KVLENS_HOST_CLONES void redundancyColumns(const float* u, int64_t n, int64_t D, double* cols) {
    std::vector<double> total(static_cast<size_t>(D), 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < D; ++d) total[static_cast<size_t>(d)] += u[i * D + d];
    auto dot = [&](int64_t i, int64_t j) {
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t d = 0; d < D; ++d) s += u[i * D + d] * u[j * D + d];
        return s;
    };
    for (int64_t j = 0; j < n; ++j) {
        double c = 0;
        for (int64_t d = 0; d < D; ++d) c += total[static_cast<size_t>(d)] * u[j * D + d];
        cols[j] = c - dot(j, j);  // the diagonal
    }
    // Each row walks back over blocks of keys, its similarities to a block
    // computed across the block (the keys transposed: no horizontal sums).
    constexpr int64_t kBlock = 64;
    std::vector<float> keysByDim(static_cast<size_t>(n * D));
    for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < D; ++d) keysByDim[static_cast<size_t>(d * n + j)] = u[j * D + d];
    float sims[kBlock];
    for (int64_t i = 0; i < n; ++i) {
        bool found = false;
        for (int64_t hi = n; hi > 0 && !found; hi -= kBlock) {
            const int64_t lo = std::max<int64_t>(0, hi - kBlock), len = hi - lo;
            std::fill(sims, sims + len, 0.0f);
            for (int64_t d = 0; d < D; ++d) {
                const float ud = u[i * D + d];
                const float* col = keysByDim.data() + d * n + lo;
#pragma omp simd
                for (int64_t j = 0; j < len; ++j) sims[j] += ud * col[j];
            }
            for (int64_t j = len - 1; j >= 0 && !found; --j)
                if (lo + j != i && sims[j] > 0.5f) {
                    cols[lo + j] -= sims[j];
                    found = true;
                }
        }
    }
}

// Redundancy of n keys [n, D] -> [n] (see above).
at::Tensor redundancy(const at::Tensor& keys) {
    const int64_t n = keys.size(0);
    const at::Tensor unit = keys / (at::norm(keys, 2, {-1}, /*keepdim=*/true) + 1e-8);
    if (!onHostF32(unit)) {  // on a device: tensor ops there, rather than the keys copied to the host
        at::Tensor sim = at::matmul(unit, unit.t());  // [n, n]
        sim.fill_diagonal_(0);
        const at::Tensor cols = at::arange(n, keys.options().dtype(at::kLong)).expand({n, n});
        const at::Tensor last = at::where(sim > 0.5, cols, at::full({}, -1, cols.options())).amax(-1, /*keepdim=*/true);
        sim = sim.masked_fill(cols == last, 0);  // last = -1 matches no column
        return (sim.sum(0) / static_cast<double>(n)).softmax(-1);
    }
    const at::Tensor u = unit.contiguous();
    std::vector<double> cols(static_cast<size_t>(n));
    redundancyColumns(u.data_ptr<float>(), n, u.size(1), cols.data());
    at::Tensor mean = at::empty({n}, at::TensorOptions().dtype(at::kFloat));
    float* m = mean.data_ptr<float>();
    for (int64_t j = 0; j < n; ++j) m[j] = static_cast<float>(cols[static_cast<size_t>(j)] / static_cast<double>(n));
    return mean.softmax(-1);
}

class RkvPolicy : public ScorerPolicy {
public:
    RkvPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_window(this->config().getInt("window")),
          m_kernel(this->config().getInt("kernel")),
          m_lambda(this->config().getReal("lambda")),
          m_queries(m_window) {}

    void observe(const LayerState& state, const Observation& obs) override { m_queries.add(state.layer, obs); }

protected:
    int64_t window(const LayerState&) const override { return m_window; }

    at::Tensor score(const LayerState& state) override {
        const at::Tensor q = m_queries.queries(state.layer);  // [Hq, m, D]
        if (!q.defined()) return {};
        const at::Tensor keys = state.keys.to(at::kFloat);    // [Hkv, L, D]
        const int64_t Hkv = keys.size(0), L = keys.size(1), D = keys.size(2), G = state.numHeads / Hkv;
        const at::Tensor before = entryMask(state) & ~edgeMask(state, 0, m_window);  // [Hkv, L]
        // Importance: max over the group's logits, softmax over the keys before the window.
        const at::Tensor logits =
            at::matmul(q.to(keys.device()).view({Hkv, G, -1, D}), keys.unsqueeze(1).transpose(-1, -2)).amax(1) *
            state.scale;  // [Hkv, m, L]
        const at::Tensor masked =
            logits.masked_fill(~before.unsqueeze(1), -std::numeric_limits<float>::infinity());
        at::Tensor probs = masked.softmax(-1).nan_to_num(0);  // a head with nothing before its window: 0
        const at::Tensor importance = pool1d(probs.mean(1), before, m_kernel, PoolKind::Max);  // [Hkv, L]
        // Redundancy over each head's held keys.
        at::Tensor red = at::zeros({Hkv, L}, keys.options());
        for (int64_t h = 0; h < Hkv; ++h) {
            const int64_t n = state.length(h);
            if (n > 0) red[h].narrow(0, 0, n).copy_(redundancy(keys[h].narrow(0, 0, n)));
        }
        return importance * m_lambda - red * (1 - m_lambda);
    }

private:
    int64_t m_window, m_kernel;
    double m_lambda;
    QueryWindow m_queries;
};

const BuiltinMaker kMaker{"rkv", construct<RkvPolicy>};

}  // namespace

}  // namespace kvlens
