// PolicyRun's decode steps, and the teacher-forced steps it reads ahead.
#include "core/run/policy_run.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/policy_run_detail.h"

namespace kvlens {

using policy_run_detail::ScopeTimer;

void PolicyRun::readToken(int64_t token) { endToken(std::move(m_model.forward({beginToken(token)}).front())); }

Model::Segment PolicyRun::beginToken(int64_t token) { return beginForward({token}); }

void PolicyRun::endToken(ForwardResult&& result) {
    finishForward(std::move(result));
    if (m_promptDone && trimDue()) trim();
    forgetObserved();
}

bool PolicyRun::readsAhead() const {
    return !m_full && m_promptDone && !m_cache.rerotate() && !m_policy->crossLayer() && m_policy->layerLocal() &&
           !hasStepsAhead();
}

Model::Segment PolicyRun::beginTokensAhead(const std::vector<int64_t>& tokens) {
    if (!readsAhead()) throw Error("PolicyRun: " + m_config.label() + " cannot read decode tokens ahead");
    // Until its first step is presented the run shows what it was (a
    // Session may read ahead before it publishes the prompt's Trace).
    AheadStep before = snapshot();
    const Model::Segment segment = beginForward(tokens);
    m_before = std::move(before);
    const auto& c = m_model.config();
    const auto n = static_cast<int64_t>(tokens.size());
    m_ahead.assign(static_cast<size_t>(n), AheadStep{});
    int64_t since = m_sinceTrim;
    for (int64_t i = 0; i < n; ++i) {
        AheadStep& st = m_ahead[static_cast<size_t>(i)];
        st.length = m_pending.positions[static_cast<size_t>(i)] + 1;
        st.lastOutputs.resize(static_cast<size_t>(c.numLayers));
        st.layers.resize(static_cast<size_t>(c.numLayers));
        st.held = at::zeros({c.numLayers, c.numKvHeads, st.length}, at::TensorOptions().dtype(at::kBool));
        // As endToken: the step's token counts, then the schedule may trim.
        st.trims = trimDueAfter(++since);
        if (st.trims) since = 0;
    }
    m_sinceTrim = since;  // as it will be after the last step
    ForwardOptions& fo = m_pending.options;
    fo.lastLogitsOnly = false;
    fo.rowObserver = [this](int64_t layer, int64_t row, const LayerCapture& cap) { aheadRow(layer, row, cap); };
    return segment;
}

void PolicyRun::aheadRow(int64_t layer, int64_t row, const LayerCapture& cap) {
    const auto i = static_cast<size_t>(row);
    AheadStep& st = m_ahead[i];
    const std::vector<int64_t> position{m_pending.positions[i]};
    observeLayer(layer, cap, position);
    if (st.trims) {
        ScopeTimer timer(m_policySeconds);
        trimLayer(layer, st.length);
    }
    m_observed[static_cast<size_t>(layer)] = LayerState{};
    // The layer as the run's Trace would show it after this step.
    st.lastOutputs[static_cast<size_t>(layer)] = m_lastOutputs[static_cast<size_t>(layer)];
    fillLayerTrace(layer, st.layers[static_cast<size_t>(layer)], st.length);
    bool* held = st.held.data_ptr<bool>() + layer * m_cache.kvHeads() * st.length;
    for (int64_t h = 0; h < m_cache.kvHeads(); ++h)
        for (int64_t p : m_cache.positions(layer, h)) held[h * st.length + p] = true;
    st.bytesHeld += m_cache.bytesHeld(layer);
    st.bytesAllocated += m_cache.bytesAllocated(layer);
}

void PolicyRun::endTokensAhead(ForwardResult&& result) {
    for (size_t i = 0; i < m_ahead.size(); ++i) m_ahead[i].logits = result.logits[static_cast<int64_t>(i)];
    forgetObserved();
    m_nextAhead = 0;
    show(m_before);
}

void PolicyRun::show(const AheadStep& st) {
    m_logits = st.logits;
    m_lastOutputs = st.lastOutputs;
    if (!st.lastAttention.empty()) m_lastAttention = st.lastAttention;  // the full cache's
    m_presented = &st;
}

void PolicyRun::beginRunningAhead() {
    if (!m_full) throw Error("PolicyRun::beginRunningAhead: only the full cache runs ahead");
    if (hasStepsAhead()) throw Error("PolicyRun::beginRunningAhead: steps read ahead are not presented yet");
    m_before = snapshot();
    m_ahead.clear();
    m_nextAhead = 0;
    m_presented = nullptr;
}

void PolicyRun::endRunningAhead() {
    if (!m_ahead.empty()) show(m_before);
}

void PolicyRun::readTokenAhead(int64_t token) {
    if (!m_full) throw Error("PolicyRun::readTokenAhead: only the full cache runs ahead");
    readToken(token);
    m_ahead.push_back(snapshot());
}

PolicyRun::AheadStep PolicyRun::snapshot() const {
    AheadStep st;
    st.length = m_cache.seqLen();
    st.logits = m_logits;
    st.lastOutputs = m_lastOutputs;
    st.lastAttention = m_lastAttention;
    st.held = heldMask();
    st.bytesHeld = m_cache.bytesHeld();
    st.bytesAllocated = m_cache.bytesAllocated();
    st.layers.resize(m_track.size());
    for (size_t l = 0; l < m_track.size(); ++l) fillLayerTrace(static_cast<int64_t>(l), st.layers[l], st.length);
    return st;
}

void PolicyRun::dropStepsAhead() {
    if (!hasStepsAhead()) return;
    if (!m_full) throw Error("PolicyRun::dropStepsAhead: only the full cache goes back");
    if (!m_presented) throw Error("PolicyRun::dropStepsAhead: no step was presented to go back to");
    const int64_t length = m_presented->length;
    m_cache.truncate(length);
    sizeTracks(length);
    if (static_cast<int64_t>(m_rows.size()) > length) m_rows.resize(static_cast<size_t>(length));
    m_ahead.clear();
    m_nextAhead = 0;
    m_presented = nullptr;  // the logits and outputs are the presented step's
}

bool PolicyRun::stepAhead() {
    if (!hasStepsAhead()) return false;
    show(m_ahead[m_nextAhead++]);
    if (!hasStepsAhead()) {  // the last: the run's own state is this step's
        m_presented = nullptr;
        m_ahead.clear();
        m_before = AheadStep{};
        m_nextAhead = 0;
    }
    return true;
}

}  // namespace kvlens
