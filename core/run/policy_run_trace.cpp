// What a Trace shows of a PolicyRun: its budgets, plans, held entries and attention.
#include "core/run/policy_run.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/policy_run_detail.h"

namespace kvlens {

using policy_run_detail::ranksOfRow;

namespace {

std::string scheduleLabel(const PolicyConfig& c) {
    if (isFullCache(c)) return "-";
    if (c.schedule == Schedule::EveryN) return "every_n(" + std::to_string(c.everyN) + ")";
    return scheduleName(c.schedule);
}

}  // namespace

std::string PolicyRun::nonFiniteLogits(int64_t position) const {
    if (!m_logits.defined() || at::isfinite(m_logits).all().item<bool>()) return {};
    const int64_t nan = at::isnan(m_logits).sum().item<int64_t>();
    return "logits after position " + std::to_string(position) + " are not finite (" + std::to_string(nan) +
           " NaN, " + std::to_string(m_logits.numel() - nan - at::isfinite(m_logits).sum().item<int64_t>()) +
           " infinite of " + std::to_string(m_logits.numel()) +
           "): the model's weights or config.json produce them, or the values overflow this dtype";
}

at::Tensor PolicyRun::heldMask() const {
    if (m_presented) return m_presented->held;
    const auto& c = m_model.config();
    const int64_t T = m_cache.seqLen(), H = c.numKvHeads;
    at::Tensor mask = at::zeros({c.numLayers, H, T}, at::TensorOptions().dtype(at::kBool));
    bool* m = mask.data_ptr<bool>();
    for (int64_t l = 0; l < c.numLayers; ++l)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t p : m_cache.positions(l, h)) m[(l * H + h) * T + p] = true;
    return mask;
}

void PolicyRun::fillTrace(PolicyTrace& out) const {
    out.id = m_config.id;
    out.label = m_config.label();
    out.schedule = scheduleLabel(m_config);
    out.rerotate = m_cache.rerotate();
    out.budgetNote = m_budgets.note;
    out.promptPeakBytes = m_promptPeakBytes;
    if (m_presented) {  // a step read ahead, not the last
        out.bytesHeld = m_presented->bytesHeld;
        out.bytesAllocated = m_presented->bytesAllocated;
        out.layers = m_presented->layers;
        return;
    }
    out.bytesHeld = m_cache.bytesHeld();
    out.bytesAllocated = m_cache.bytesAllocated();
    out.layers.resize(m_track.size());
    for (size_t l = 0; l < m_track.size(); ++l) {
        const int64_t length = m_track[l].empty() ? 0 : static_cast<int64_t>(m_track[l].front().status.size());
        fillLayerTrace(static_cast<int64_t>(l), out.layers[l], length);
    }
}

void PolicyRun::fillLayerTrace(int64_t layer, LayerTrace& lt, int64_t length) const {
    const auto l = static_cast<size_t>(layer);
    lt.budget = budgetOf(layer);
    if (m_threshold) {  // what the threshold left: the fullest KV head (each head's count is its `held`)
        lt.budget = 0;
        for (size_t h = 0; h < m_track[l].size(); ++h) lt.budget = std::max(lt.budget, m_cache.length(layer, static_cast<int64_t>(h)));
    }
    lt.heads.resize(m_track[l].size());
    for (size_t h = 0; h < m_track[l].size(); ++h) {
        const HeadTrack& t = m_track[l][h];
        HeadTrace& ht = lt.heads[h];
        const auto n = static_cast<std::ptrdiff_t>(std::min<int64_t>(length, static_cast<int64_t>(t.status.size())));
        ht.status.assign(t.status.begin(), t.status.begin() + n);
        ht.score.assign(t.score.begin(), t.score.begin() + n);
        ht.rank.assign(t.rank.begin(), t.rank.begin() + n);
        ht.cutoff = kNoScore;
        ht.held = m_cache.length(layer, static_cast<int64_t>(h));
        describeHeld(m_lastPlan[l], h, ht);
    }
}

void PolicyRun::describeHeld(const LastPlan& last, size_t h, HeadTrace& ht) {
    if (h >= last.positions.size()) return;  // never planned: every held token is just held
    const auto& pos = last.positions[h];
    const float* row = last.scores.defined() ? last.scores.data_ptr<float>() + h * last.scores.size(1) : nullptr;
    for (size_t i = 0; i < pos.size(); ++i) {
        const TokenStatus r = i < last.reasons[h].size() ? last.reasons[h][i] : TokenStatus::Evicted;
        const float s = row ? row[i] : kNoScore;
        if (r == TokenStatus::Evicted) continue;
        ht.status[pos[i]] = r;
        ht.score[pos[i]] = s;
        if (r == TokenStatus::Score && !std::isnan(s) && (std::isnan(ht.cutoff) || s < ht.cutoff)) ht.cutoff = s;
    }
    if (!row) return;
    if (last.ranks.size() != last.positions.size()) last.ranks.assign(last.positions.size(), {});
    std::vector<int32_t>& ranks = last.ranks[h];
    if (ranks.size() != pos.size()) ranks = ranksOfRow(row, static_cast<int64_t>(pos.size()));
    for (size_t i = 0; i < pos.size(); ++i)
        if (ranks[i] >= 0) ht.rank[pos[i]] = ranks[i];
}

AttentionMap PolicyRun::attentionMap() const {
    AttentionMap m;
    m.layer = m_capture.layer;
    m.head = m_capture.head;
    m.size = m_presented ? m_presented->length : m_cache.seqLen();
    m.rows.assign(m_rows.begin(), m_rows.begin() + std::min<int64_t>(m.size, static_cast<int64_t>(m_rows.size())));
    m.rows.resize(static_cast<size_t>(m.size));  // rows not captured read kNoScore
    return m;
}

}  // namespace kvlens
