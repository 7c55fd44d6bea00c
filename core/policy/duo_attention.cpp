// DuoAttention, scored on the fly (Xiao et al. 2024, mit-han-lab/duo-attention;
// kvpress DuoAttentionPress with on_the_fly_scoring): KV heads are split
// into retrieval heads, which keep the whole cache, and streaming heads,
// which keep `sinks` + the `recent` newest entries. A KV head's score is how
// far back a typical query of the layer looks: the mean pre-RoPE query of
// each query head and the mean pre-RoPE key of its KV head, placed at
// positions 0 .. q_len-1 by the model's RoPE; the last query's attention a_j
// over them gives sum_j a_j (q_len - j) / q_len (the area under the
// cumulative attention curve: high when the mass sits on far keys), averaged
// over the group. The `ratio` of all KV heads of all layers with the lowest
// scores stream. kvpress averages these statistics over 50 BookSum chapters
// it downloads; here they come from the prompt being read (docs/policies.md).
// The budget does not apply: what each head holds is the outcome.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class DuoAttentionPolicy : public Policy {
public:
    DuoAttentionPolicy(const PolicyInfo& info, PolicyConfig config)
        : Policy(info, std::move(config)),
          m_sinks(this->config().getInt("sinks")),
          m_recent(this->config().getInt("recent")),
          m_ratio(this->config().getReal("ratio")),
          m_qlen(this->config().getInt("q_len")) {
        // The allocators and wrappers divide a budget DuoAttention does not have.
        for (const auto& [name, neutral] : std::vector<std::pair<std::string, std::string>>{
                 {"alloc", "uniform"}, {"heads", "uniform"}, {"critical", "false"}, {"chunk_length", "1"},
                 {"select", "budget"}})
            if (this->config().text(name) != neutral)
                throw ArgumentError("duo: " + name + "=" + this->config().text(name) +
                                    " does not apply to DuoAttention (a head keeps everything or its sinks and "
                                    "recent entries, whatever the budget)");
    }

    void observe(const LayerState& state, const Observation& obs) override {
        if (!obs.queries.defined()) return;
        std::vector<int64_t> pick, back;  // the prompt's queries, and the rotation that undoes their RoPE
        for (size_t i = 0; i < obs.queryPositions.size(); ++i)
            if (obs.queryPositions[i] < state.promptLength)
                pick.push_back(static_cast<int64_t>(i)), back.push_back(-obs.queryPositions[i]);
        if (pick.empty()) return;
        const auto longs = at::TensorOptions().dtype(at::kLong);
        at::Tensor q = obs.queries.index_select(1, at::tensor(pick, longs).to(obs.queries.device())).to(at::kFloat);
        if (state.rotate) q = state.rotate(q, at::tensor(back, longs).to(q.device())).to(at::kFloat);
        Sum& s = sum(state.layer);
        s.queries = s.queries.defined() ? s.queries + q.sum(1) : q.sum(1);  // [Hq, D]
        s.count += static_cast<int64_t>(pick.size());
    }

    // Until the split is made (then every layer plans by it alone).
    bool crossLayer() const override { return m_streaming.empty(); }

    // The split is made once, when the prompt has been read.
    void planAcrossLayers(const std::vector<LayerState>& states, std::vector<int64_t>& perLayer) override {
        (void)perLayer;
        if (!m_streaming.empty() || states.empty() || states.front().seqLen < states.front().promptLength) return;
        std::vector<std::pair<double, int64_t>> byScore;  // (score, layer * Hkv + head)
        m_scores.clear();
        for (const LayerState& s : states) {
            const std::vector<double> scores = headScores(s);
            m_scores.push_back(scores);
            for (size_t h = 0; h < scores.size(); ++h)  // a head that cannot be scored (NaN) retrieves
                byScore.emplace_back(std::isnan(scores[h]) ? std::numeric_limits<double>::infinity() : scores[h],
                                     s.layer * s.numKvHeads + static_cast<int64_t>(h));
        }
        // Lowest first; ties to the lower layer and head, as a stable argsort would.
        std::stable_sort(byScore.begin(), byScore.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        // Rounded half to even, as kvpress's Python round() does.
        const auto streaming = static_cast<size_t>(std::nearbyint(m_ratio * static_cast<double>(byScore.size())));
        const int64_t Hkv = states.front().numKvHeads;
        m_streaming.assign(states.size(), std::vector<bool>(static_cast<size_t>(Hkv), false));
        for (size_t i = 0; i < streaming && i < byScore.size(); ++i)
            m_streaming[static_cast<size_t>(byScore[i].second / Hkv)][static_cast<size_t>(byScore[i].second % Hkv)] = true;
    }

    Plan plan(const LayerState& state) override {
        if (m_streaming.empty()) return keepEverything(state);  // the prompt is not read yet: no split
        const auto& streaming = m_streaming.at(static_cast<size_t>(state.layer));
        const auto& scores = m_scores.at(static_cast<size_t>(state.layer));
        const int64_t H = state.numKvHeads, L = state.maxLength();
        Plan plan;
        plan.keep.assign(static_cast<size_t>(H), {});
        plan.reasons.assign(static_cast<size_t>(H), {});
        plan.scores = at::full({H, L}, std::numeric_limits<float>::quiet_NaN(), at::TensorOptions().dtype(at::kFloat));
        float* shown = plan.scores.data_ptr<float>();
        for (int64_t h = 0; h < H; ++h) {
            const int64_t len = state.length(h);
            auto& reasons = plan.reasons[static_cast<size_t>(h)];
            auto& keep = plan.keep[static_cast<size_t>(h)];
            // Every entry no rule kept shows its head's score (why the head streams or retrieves).
            std::fill(shown + h * L, shown + h * L + len, static_cast<float>(scores[static_cast<size_t>(h)]));
            if (!streaming[static_cast<size_t>(h)]) {  // a retrieval head keeps everything
                reasons.assign(static_cast<size_t>(len), TokenStatus::Score);
                keep.resize(static_cast<size_t>(len));
                std::iota(keep.begin(), keep.end(), int64_t{0});
                continue;
            }
            const int64_t sinks = std::min(m_sinks, len), recent = std::min(m_recent, len - sinks);
            reasons.assign(static_cast<size_t>(len), TokenStatus::Evicted);
            for (int64_t i = 0; i < len; ++i) {
                if (i < sinks) reasons[static_cast<size_t>(i)] = TokenStatus::Sink;
                else if (i >= len - recent) reasons[static_cast<size_t>(i)] = TokenStatus::Window;
                else continue;
                keep.push_back(i);
                shown[h * L + i] = std::numeric_limits<float>::quiet_NaN();
            }
        }
        return plan;
    }

private:
    struct Sum {
        at::Tensor queries;  // [Hq, D]: the sum of the prompt's pre-RoPE queries
        int64_t count = 0;
    };
    Sum& sum(int64_t layer) {
        if (static_cast<int64_t>(m_sums.size()) <= layer) m_sums.resize(static_cast<size_t>(layer + 1));
        return m_sums[static_cast<size_t>(layer)];
    }

    // Per KV head of the layer: the attention area of its mean query over its mean key.
    std::vector<double> headScores(const LayerState& state) {
        const int64_t Hkv = state.numKvHeads, Hq = state.numHeads, G = Hq / Hkv;
        const Sum& s = sum(state.layer);
        if (s.count == 0 || !state.keys.defined()) return std::vector<double>(static_cast<size_t>(Hkv), 1.0);
        const auto longs = at::TensorOptions().dtype(at::kLong);
        std::vector<at::Tensor> meanKeys;  // the head's held keys turned back to before RoPE, averaged
        for (int64_t h = 0; h < Hkv; ++h) {
            const auto& pos = state.positions[static_cast<size_t>(h)];
            at::Tensor k = state.keys[h].narrow(0, 0, static_cast<int64_t>(pos.size())).to(at::kFloat).unsqueeze(0);
            if (state.rotate) {
                std::vector<int64_t> back(pos.size());
                for (size_t i = 0; i < pos.size(); ++i) back[i] = -pos[i];
                k = state.rotate(k, at::tensor(back, longs).to(k.device())).to(at::kFloat);
            }
            meanKeys.push_back(k.squeeze(0).mean(0));
        }
        at::Tensor kbar = at::stack(meanKeys);                                        // [Hkv, D]
        at::Tensor qbar = s.queries.to(kbar.device()) / static_cast<double>(s.count);  // [Hq, D]
        const int64_t Q = m_qlen, D = kbar.size(1);
        at::Tensor keys = kbar.unsqueeze(1).expand({Hkv, Q, D}).contiguous();  // the mean key at 0 .. Q-1
        at::Tensor query = qbar.unsqueeze(1);                                   // the mean query at Q-1
        if (state.rotate) {
            keys = state.rotate(keys, at::arange(Q, longs.device(kbar.device()))).to(at::kFloat);
            query = state.rotate(query, at::full({1}, Q - 1, longs.device(kbar.device()))).to(at::kFloat);
        }
        // [Hkv, Q, D] x [Hkv, D, G]: each KV head's keys against its group's queries.
        const at::Tensor logits = at::matmul(keys, query.view({Hkv, G, D}).transpose(1, 2)).transpose(1, 2) *
                                  state.scale;                                   // [Hkv, G, Q]
        const at::Tensor a = logits.softmax(-1);
        const at::Tensor area = (at::arange(Q, 0, -1, a.options()) / static_cast<double>(Q));  // (Q - j) / Q
        const at::Tensor perHead = (a * area).sum(-1).mean(1).to(at::kCPU, at::kDouble).contiguous();
        return std::vector<double>(perHead.data_ptr<double>(), perHead.data_ptr<double>() + Hkv);
    }

    int64_t m_sinks, m_recent;
    double m_ratio;
    int64_t m_qlen;
    std::vector<Sum> m_sums;                      // per layer
    std::vector<std::vector<bool>> m_streaming;   // [layer][kv head], once split
    std::vector<std::vector<double>> m_scores;    // [layer][kv head]
};

const BuiltinMaker kMaker{"duo", construct<DuoAttentionPolicy>};

}  // namespace

}  // namespace kvlens
