// Q-Filters (Godey et al. 2025, NathanGodey/qfilters; kvpress QFilterPress):
// the queries of a head lean along one direction, so a key's projection on
// it predicts the attention it will draw. Per query head, the filter is the
// first right singular vector of the head's prompt queries (after RoPE, not
// centred), its sign set so that it points against the direction most
// queries lean (a majority vote of the projections' signs), negated as the
// reference stores it; a KV head's filter is the mean of its group's. A key
// scores -<f, k>: the keys most aligned with the queries' direction stay.
// The reference computes the filters once on a calibration corpus (about
// 3000 queries per head) and downloads them; here they come from the
// prompt being read (at most `samples` of its queries, evenly spaced), so
// nothing is downloaded. No sinks; kvpress keeps no window, the authors'
// decoding cache keeps the last 64 tokens (`window`, 0 by default).
#include <ATen/ATen.h>

#include <algorithm>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class QFilterPolicy : public ScorerPolicy {
public:
    QFilterPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_samples(this->config().getInt("samples")),
          m_window(this->config().getInt("window")) {}

    // A calibration prompt's queries replace the prompt's: every stride-th
    // of them (at most `samples`), as from the prompt.
    void calibrate(const std::vector<at::Tensor>& queriesPerLayer) override {
        m_calibrated = true;
        for (size_t l = 0; l < queriesPerLayer.size(); ++l) {
            const at::Tensor& q = queriesPerLayer[l];  // [Hq, n, D]
            const int64_t n = q.size(1), stride = (n + m_samples - 1) / m_samples;
            Layer& layer = this->layer(static_cast<int64_t>(l));
            layer.queries = q.index_select(1, at::arange(0, n, stride, at::TensorOptions().dtype(at::kLong)).to(q.device()))
                                .to(at::kFloat);
            layer.filter = at::Tensor();
        }
    }

    void observe(const LayerState& state, const Observation& obs) override {
        if (m_calibrated || !obs.queries.defined() || state.promptLength <= 0) return;
        Layer& l = layer(state.layer);
        // Every stride-th prompt query, so that at most `samples` are kept.
        const int64_t stride = (state.promptLength + m_samples - 1) / m_samples;
        std::vector<int64_t> pick;
        for (size_t i = 0; i < obs.queryPositions.size(); ++i) {
            const int64_t p = obs.queryPositions[i];
            if (p < state.promptLength && p % stride == 0) pick.push_back(static_cast<int64_t>(i));
        }
        if (pick.empty()) return;
        const at::Tensor idx = at::tensor(pick, at::TensorOptions().dtype(at::kLong)).to(obs.queries.device());
        const at::Tensor q = obs.queries.index_select(1, idx).to(at::kFloat);  // [Hq, m, D]
        l.queries = l.queries.defined() ? at::cat({l.queries.to(q.device()), q}, 1) : q;
        l.filter = at::Tensor();  // to be computed again from what is now known
    }

protected:
    int64_t window(const LayerState&) const override { return m_window; }

    at::Tensor score(const LayerState& state) override {
        Layer& l = layer(state.layer);
        if (!l.queries.defined()) return {};  // no prompt query seen: ties keep the most recent
        if (!l.filter.defined()) l.filter = filters(l.queries, state.numKvHeads);
        const at::Tensor keys = state.keys.to(at::kFloat);                           // [Hkv, L, D]
        return at::matmul(keys, l.filter.to(keys.device()).unsqueeze(-1)).squeeze(-1).neg();  // [Hkv, L]
    }

private:
    struct Layer {
        at::Tensor queries;  // [Hq, m, D] the sampled prompt queries
        at::Tensor filter;   // [Hkv, D], undefined until asked for
    };

    // f per KV head: the group's mean of -sign_h · v_h, v_h the first right
    // singular vector of head h's queries, sign_h +1 when most queries project positively on it.
    static at::Tensor filters(const at::Tensor& queries, int64_t kvHeads) {
        const at::Tensor q = queries.to(at::kCPU);
        const int64_t Hq = q.size(0), D = q.size(2);
        at::Tensor f = at::empty({Hq, D}, q.options());
        for (int64_t h = 0; h < Hq; ++h) {
            const at::Tensor v = std::get<2>(at::linalg_svd(q[h], /*full_matrices=*/false))[0];  // [D]
            const bool positive = (at::matmul(q[h], v) > 0).to(at::kFloat).mean().item<double>() > 0.5;
            f[h] = positive ? v.neg() : v;
        }
        return f.view({kvHeads, Hq / kvHeads, D}).mean(1);
    }

    Layer& layer(int64_t l) {
        if (static_cast<int64_t>(m_layers.size()) <= l) m_layers.resize(static_cast<size_t>(l + 1));
        return m_layers[static_cast<size_t>(l)];
    }

    int64_t m_samples, m_window;
    bool m_calibrated = false;  // the filters come from a calibration prompt, not the prompt
    std::vector<Layer> m_layers;
};

const BuiltinMaker kMaker{"qfilter", construct<QFilterPolicy>};

}  // namespace

}  // namespace kvlens
