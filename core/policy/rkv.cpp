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

#include <limits>
#include <vector>

#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"
#include "core/policy/select.h"

namespace kvlens {
namespace {

// Redundancy of n keys [n, D] -> [n] (see above). The similarity matrix
// is one product; its column sums, less each row's newest duplicate, are one
// pass over it on the host (no n x n masks or index tensors: at 2,000 keys
// those were most of R-KV's prompt work).
at::Tensor redundancy(const at::Tensor& keys) {
    const int64_t n = keys.size(0);
    const at::Tensor unit = keys / (at::norm(keys, 2, {-1}, /*keepdim=*/true) + 1e-8);
    if (!keys.is_cpu()) {  // on a device: tensor ops there, rather than the matrix copied to the host
        at::Tensor sim = at::matmul(unit, unit.t());  // [n, n]
        sim.fill_diagonal_(0);
        const at::Tensor cols = at::arange(n, keys.options().dtype(at::kLong)).expand({n, n});
        const at::Tensor last = at::where(sim > 0.5, cols, at::full({}, -1, cols.options())).amax(-1, /*keepdim=*/true);
        sim = sim.masked_fill(cols == last, 0);  // last = -1 matches no column
        return (sim.sum(0) / static_cast<double>(n)).softmax(-1);
    }
    const at::Tensor sim = at::matmul(unit, unit.t()).contiguous();  // [n, n] fp32 on the host
    const float* s = sim.data_ptr<float>();
    std::vector<double> cols(static_cast<size_t>(n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        const float* row = s + i * n;
        int64_t last = n - 1;  // the newest key more than 0.5 alike (the diagonal is not one)
        while (last >= 0 && (last == i || !(row[last] > 0.5f))) --last;
        double* c = cols.data();
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) c[j] += row[j];
        c[i] -= row[i];  // the diagonal
        if (last >= 0) c[last] -= row[last];
    }
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
