// LagKV (Liang et al. 2025, AI-Lab-China-Merchants-Bank/LagKV; kvpress
// LagKVPress): attention-free scores from how much an entry's key and value
// stand out against the statistics of the *next* partition. Per KV head,
// after the `sinks` first entries the entries are cut into partitions of
// `lag`; each channel of partition i is min-max scaled by partition i+1's
// range, the entry's score is the standard deviation of its scaled channels
// (unbiased, over head_dim), softmaxed within the partition; key and value
// scores are averaged. Without cross scoring (the default) a score is the
// entry's rank within its partition / lag, so every partition keeps about
// the same share. The last full partition and what follows it have no next
// partition and score 1 (kept first); the sinks are always kept. A head
// shorter than sinks + 2·lag scores by recency (StreamingLLM's set).
#include <ATen/ATen.h>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

// x [H, P, lag, D] -> [H, P-1, lag]: partition i scaled by partition i+1's
// per-channel range, the std over channels, softmax within the partition.
at::Tensor statesScore(const at::Tensor& x) {
    const int64_t P = x.size(1);
    const at::Tensor ref = x.narrow(1, 1, P - 1), cur = x.narrow(1, 0, P - 1);
    const at::Tensor lo = std::get<0>(ref.min(-2, /*keepdim=*/true)), hi = std::get<0>(ref.max(-2, /*keepdim=*/true));
    // kvpress divides without a guard (a constant channel gives NaN).
    const at::Tensor scaled = (cur - lo) / (hi - lo).clamp_min(1e-12);
    return at::std(scaled, at::IntArrayRef{-1}, /*unbiased=*/true, /*keepdim=*/false).softmax(-1);
}

// Rank of each entry within its partition (0 = lowest), / lag; stable sorts
// give equal scores the order of their positions.
at::Tensor ranks(const at::Tensor& s) {
    const at::Tensor order = std::get<1>(s.sort(/*stable=*/true, -1, /*descending=*/false));
    const at::Tensor rank = std::get<1>(order.sort(/*stable=*/true, -1, /*descending=*/false));
    return rank.to(at::kFloat) / static_cast<double>(s.size(-1));
}

class LagKvPolicy : public ScorerPolicy {
public:
    LagKvPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_sinks(this->config().getInt("sinks")),
          m_lag(this->config().getInt("lag")),
          m_cross(this->config().getBool("cross")) {}

protected:
    int64_t sinks(const LayerState&) const override { return m_sinks; }

    at::Tensor score(const LayerState& state) override {
        const at::Tensor keys = state.keys.to(at::kFloat), values = state.values.to(at::kFloat);
        const int64_t H = keys.size(0), L = keys.size(1);
        at::Tensor out = at::zeros({H, L}, keys.options());
        // Heads of one length are scored together (all of them unless an
        // allocation gave the heads different budgets).
        for (int64_t h = 0; h < H;) {
            int64_t e = h + 1;
            while (e < H && state.length(e) == state.length(h)) ++e;
            const int64_t n = state.length(h);
            out.narrow(0, h, e - h).narrow(1, 0, n).copy_(headScores(keys.narrow(0, h, e - h).narrow(1, 0, n),
                                                                     values.narrow(0, h, e - h).narrow(1, 0, n)));
            h = e;
        }
        return out;
    }

private:
    // Scores of heads holding n entries each: k, v [h, n, D] -> [h, n].
    at::Tensor headScores(const at::Tensor& k, const at::Tensor& v) const {
        const int64_t h = k.size(0), n = k.size(1), S = std::min(m_sinks, n);
        at::Tensor s = at::ones({h, n}, k.options());
        if (n < S + 2 * m_lag) {
            if (n > S) s.narrow(1, S, n - S).copy_(at::arange(n - S, k.options()) / static_cast<double>(n - S));
            return s;
        }
        const int64_t P = (n - S) / m_lag, end = S + P * m_lag, D = k.size(2);
        auto parts = [&](const at::Tensor& x) { return x.narrow(1, S, end - S).reshape({h, P, m_lag, D}); };
        at::Tensor scored = (statesScore(parts(k)) + statesScore(parts(v))) / 2;  // [h, P-1, lag]
        if (!m_cross) scored = ranks(scored);
        s.narrow(1, S, (P - 1) * m_lag).copy_(scored.reshape({h, -1}));
        return s;
    }

    int64_t m_sinks, m_lag;
    bool m_cross;
};

const BuiltinMaker kMaker{"lagkv", construct<LagKvPolicy>};

}  // namespace

}  // namespace kvlens
