// Expected Attention (Devoto et al. 2025; kvpress ExpectedAttentionPress):
// the attention a key can expect from the queries still to come. The prompt
// queries after the first `sinks`, before RoPE, give a mean μ and a
// covariance Σ per query head (biased, over the tokens); the rotation of
// the next `n_future` positions, averaged into one matrix R̄, carries them
// to where future queries will be: μ' = R̄μ, Σ' = R̄ΣR̄ᵀ. A key k (cached,
// after RoPE) then expects the logit μ'·k/√d + kᵀΣ'k/(2d) (the second term
// with covariance=true), softmaxed over the head's non-sink entries,
// averaged over the group's query heads, times ‖v‖₂ (vnorm=true, plus
// epsilon first). The sinks are kept. Queries come from the prompt read:
// their post-RoPE form is turned back by the model's own rotation.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class ExpectedAttentionPolicy : public ScorerPolicy {
public:
    ExpectedAttentionPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_future(this->config().getInt("n_future")),
          m_sinks(this->config().getInt("sinks")),
          m_covariance(this->config().getBool("covariance")),
          m_vnorm(this->config().getBool("vnorm")),
          m_epsilon(this->config().getReal("epsilon")) {}

    void observe(const LayerState& state, const Observation& obs) override {
        if (!obs.queries.defined()) return;
        std::vector<int64_t> pick, pos;  // prompt queries after the sinks
        for (size_t i = 0; i < obs.queryPositions.size(); ++i) {
            const int64_t p = obs.queryPositions[i];
            if (p >= m_sinks && p < state.promptLength) pick.push_back(static_cast<int64_t>(i)), pos.push_back(p);
        }
        if (pick.empty()) return;
        const auto longs = at::TensorOptions().dtype(at::kLong).device(obs.queries.device());
        at::Tensor q = obs.queries.index_select(1, at::tensor(pick, at::TensorOptions().dtype(at::kLong)).to(obs.queries.device()))
                           .to(at::kFloat);  // [Hq, n, D]
        if (state.rotate) {  // back to before RoPE
            std::vector<int64_t> back(pos.size());
            for (size_t i = 0; i < pos.size(); ++i) back[i] = -pos[i];
            q = state.rotate(q, at::tensor(back, at::TensorOptions().dtype(at::kLong)).to(longs.device())).to(at::kFloat);
        }
        Stats& s = stats(state.layer);
        const at::Tensor sum = q.sum(1), outer = at::matmul(q.transpose(1, 2), q);  // [Hq, D], [Hq, D, D]
        s.sum = s.sum.defined() ? s.sum + sum : sum;
        s.outer = s.outer.defined() ? s.outer + outer : outer;
        s.count += static_cast<int64_t>(pick.size());
    }

protected:
    int64_t sinks(const LayerState&) const override { return m_sinks; }

    at::Tensor score(const LayerState& state) override {
        const Stats& s = stats(state.layer);
        if (s.count == 0) return {};  // no query seen yet: ties keep the most recent
        const at::Tensor keys = state.keys.to(at::kFloat), values = state.values.to(at::kFloat);  // [Hkv, L, D]
        const int64_t Hkv = keys.size(0), L = keys.size(1), D = keys.size(2), Hq = state.numHeads, G = Hq / Hkv;
        const at::Tensor mu = s.sum.to(keys.device()) / static_cast<double>(s.count);                      // [Hq, D]
        at::Tensor cov = s.outer.to(keys.device()) / static_cast<double>(s.count) -
                         mu.unsqueeze(2) * mu.unsqueeze(1);                                                 // [Hq, D, D]
        // R̄ as rows M[j] = mean_t R_t e_j (the rotation acts on row vectors as HF's does), so R̄ = Mᵀ.
        at::Tensor M = at::eye(D, keys.options());
        if (state.rotate) {
            const int64_t F = m_future;
            const at::Tensor basis = at::eye(D, keys.options()).repeat({F, 1}).unsqueeze(0);  // [1, F*D, D]
            const at::Tensor positions =
                (at::arange(F, keys.options().dtype(at::kLong)) + state.seqLen).repeat_interleave(D);
            M = state.rotate(basis, positions).to(at::kFloat).view({F, D, D}).mean(0);
        }
        const at::Tensor mu2 = at::matmul(mu, M);                                  // R̄μ as a row: μᵀR̄ᵀ = μᵀM
        const at::Tensor keysQ = keys.repeat_interleave(G, 0);                     // [Hq, L, D]
        at::Tensor logits = at::matmul(keysQ, mu2.unsqueeze(-1)).squeeze(-1) / std::sqrt(static_cast<double>(D));
        if (m_covariance) {
            const at::Tensor cov2 = at::matmul(M.t().unsqueeze(0), at::matmul(cov, M.unsqueeze(0)));  // R̄ΣR̄ᵀ
            logits = logits + (at::matmul(keysQ, cov2) * keysQ).sum(-1) / (2.0 * static_cast<double>(D));
        }
        // Softmax over each head's held entries after its sinks.
        const at::Tensor scored = (entryMask(state) & ~edgeMask(state, m_sinks, 0)).repeat_interleave(G, 0);
        at::Tensor p = logits.masked_fill(~scored, -std::numeric_limits<float>::infinity()).softmax(-1).nan_to_num(0);
        p = p.view({Hkv, G, L}).mean(1);  // [Hkv, L]
        if (m_vnorm) p = (p + m_epsilon) * at::norm(values, 2, {-1});
        return p;
    }

private:
    struct Stats {
        at::Tensor sum, outer;  // Σq [Hq, D], Σqqᵀ [Hq, D, D] of the pre-RoPE prompt queries
        int64_t count = 0;
    };
    Stats& stats(int64_t layer) {
        if (static_cast<int64_t>(m_stats.size()) <= layer) m_stats.resize(static_cast<size_t>(layer + 1));
        return m_stats[static_cast<size_t>(layer)];
    }
    const Stats& stats(int64_t layer) const {
        static const Stats none;
        return layer < static_cast<int64_t>(m_stats.size()) ? m_stats[static_cast<size_t>(layer)] : none;
    }

    int64_t m_future, m_sinks;
    bool m_covariance, m_vnorm;
    double m_epsilon;
    std::vector<Stats> m_stats;
};

const BuiltinMaker kMaker{"expected_attention", construct<ExpectedAttentionPolicy>};

}  // namespace

}  // namespace kvlens
