// PolicyRun's prompt read: alone, shared with the full cache's, or token by token.
#include "core/run/policy_run.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/model/model.h"

namespace kvlens {


void PolicyRun::readPrompt(const std::vector<int64_t>& prompt, const std::function<void()>& checkCancel) {
    const int64_t T = static_cast<int64_t>(prompt.size());
    // The tokens a replay of the full cache's record gave it (replayRecord), or none.
    const int64_t from = m_cache.seqLen();
    const std::vector<int64_t> rest = from == 0 ? prompt : std::vector<int64_t>(prompt.begin() + from, prompt.end());
    if (m_full || m_config.schedule == Schedule::PrefillOnce) {
        forwardBatched(rest, checkCancel);
        if (m_budgets.compress) trim();  // never the full cache's
    } else if (m_config.schedule == Schedule::PrefillThenStep) {
        // Full attention over the prompt, the policy scoring what the
        // prefill attended (H2O: summed over every prompt query; TOVA: the
        // last query's row), one compression to B; decode steps then trim.
        forwardBatched(rest, checkCancel);
        trim();
    } else if (std::vector<PositionBand> band = prefillBand(); !band.empty()) {
        // Window/streaming: online reading keeps a band of positions, so one
        // batch under the band's mask, then one trim, gives the same cache.
        m_band = band;
        forwardBatched(rest, checkCancel);
        m_band.clear();
        trim();
    } else {
        for (int64_t i = beginOnlinePrompt(prompt, checkCancel); i < T; ++i) {
            if (checkCancel) checkCancel();
            endPromptToken(std::move(m_model.forward({beginPromptToken(prompt[i])}).front()));
        }
    }
    endPrompt();
}

int64_t PolicyRun::beginOnlinePrompt(const std::vector<int64_t>& prompt, const std::function<void()>& checkCancel) {
    // Online from the first token. While no layer exceeds its budget no
    // trim can happen, so that prefix is read in one batch (identical result).
    // The part a replay gave it (replayRecord) is not read again.
    const int64_t prefix = std::max<int64_t>(1, untouchedPrefix()), from = m_cache.seqLen();
    if (from < prefix) forwardBatched(std::vector<int64_t>(prompt.begin() + from, prompt.begin() + prefix), checkCancel);
    if (trimDue()) trim();
    return prefix;
}

Model::Segment PolicyRun::beginPromptToken(int64_t token) { return beginForward({token}); }

void PolicyRun::endPromptToken(ForwardResult&& result) {
    finishForward(std::move(result));
    if (trimDue()) trim();
}

void PolicyRun::endPrompt() {
    forgetObserved();
    m_promptDone = true;
    m_promptPeakBytes = m_cache.peakBytesHeld();
}

bool PolicyRun::sharesPrefill() const {
    return !m_full && !m_cache.rerotate() &&
           (m_config.schedule == Schedule::PrefillOnce || m_config.schedule == Schedule::PrefillThenStep);
}

void PolicyRun::readPromptShared(const std::vector<int64_t>& prompt, const std::vector<PolicyRun*>& followers,
                                 PromptRecord* record, const std::function<void()>& checkCancel) {
    if (!m_full) throw Error("PolicyRun::readPromptShared: only the full cache leads a shared prefill");
    const int64_t from = m_cache.seqLen(), T = static_cast<int64_t>(prompt.size());
    if (from >= T || (record && record->length() != from))
        throw Error("PolicyRun::readPromptShared: a cache of " + std::to_string(from) + " tokens, a prompt of " +
                    std::to_string(T) + (record ? ", a record of " + std::to_string(record->length()) : std::string()));
    for (PolicyRun* f : followers)
        if (!f->sharesPrefill() || f->m_cache.seqLen() != from)
            throw Error("PolicyRun::readPromptShared: " + f->m_config.label() + " cannot follow from token " +
                        std::to_string(from));
    m_recording = record;
    m_followers = followers;
    struct Reset {
        PolicyRun* run;
        ~Reset() { run->m_recording = nullptr, run->m_followers.clear(); }
    } reset{this};
    forwardBatched(from == 0 ? prompt : std::vector<int64_t>(prompt.begin() + from, prompt.end()), checkCancel);
    if (record) record->logits = m_logits;
    forgetObserved();
    m_promptDone = true;
    m_promptPeakBytes = m_cache.peakBytesHeld();
}

void PolicyRun::replayRecord(const Model& model, const PromptRecord& record, const std::vector<PolicyRun*>& followers) {
    if (followers.empty()) return;
    if (!record.complete) throw Error("PolicyRun::replayRecord: the record is not complete");
    for (PolicyRun* f : followers)
        if (f->m_full || f->m_cache.rerotate() || f->m_cache.seqLen() != 0 ||
            !(f->sharesPrefill() || record.length() <= f->untouchedPrefix()))
            throw Error("PolicyRun::replayRecord: " + f->m_config.label() + " cannot follow a replay of " +
                        std::to_string(record.length()) + " tokens");
    // The scratch cache receives the chunks as the full cache did: the same
    // layout, so the same attention; every follower appends the same rows.
    KvCache scratch = model.newCache();
    ForwardOptions fo;
    fo.observer = [&](int64_t layer, const LayerCapture& cap) {
        for (PolicyRun* f : followers) f->followLayer(layer, cap);
    };
    for (const KnownRows& rows : record.chunks) {
        for (PolicyRun* f : followers) f->followChunk(rows.from, rows.count());
        model.replay(rows, scratch, fo);
        for (PolicyRun* f : followers) f->followDone(rows.count());
    }
}

void PolicyRun::followChunk(int64_t from, int64_t count) {
    m_pending.positions.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) m_pending.positions[static_cast<size_t>(i)] = from + i;
    sizeTracks(from + count);
}

void PolicyRun::followLayer(int64_t layer, const LayerCapture& cap) {
    m_cache.append(layer, cap.keys, cap.values);
    observeLayer(layer, cap, m_pending.positions);
    countLayer();
}

void PolicyRun::followDone(int64_t count) {
    m_cache.advance(count);
    m_sinceTrim += count;
}

void PolicyRun::finishSharedPrompt(const at::Tensor& logits) {
    m_logits = logits;
    if (m_budgets.compress || m_config.schedule == Schedule::PrefillThenStep) trim();
    forgetObserved();
    m_promptDone = true;
    m_promptPeakBytes = m_cache.peakBytesHeld();
}

void PolicyRun::rewind(int64_t length, int64_t promptLength) {
    if (!m_full) throw Error("PolicyRun::rewind: only the full cache rewinds");
    m_ahead.clear();
    m_nextAhead = 0;
    m_presented = nullptr;
    m_cache.truncate(length);
    sizeTracks(length);
    for (auto& layer : m_track)
        for (auto& h : layer) std::fill(h.status.begin(), h.status.end(), TokenStatus::Held);
    if (static_cast<int64_t>(m_rows.size()) > length) m_rows.resize(static_cast<size_t>(length));
    m_promptLength = promptLength;
    m_promptDone = false;
    m_sinceTrim = 0;
    m_logits = at::Tensor();
    forgetObserved();
}

bool PolicyRun::readsPromptTokenByToken() const {
    return !m_full && m_config.schedule != Schedule::PrefillOnce && m_config.schedule != Schedule::PrefillThenStep &&
           prefillBand().empty();
}

int64_t PolicyRun::untouchedPrefix() const {
    if (m_full || sharesPrefill() || m_promptDone || m_threshold) return 0;  // a threshold may trim at once
    // Until a layer holds more than its budget no trim evicts anything (a
    // band hides nothing either: a query at or before position B sees every
    // key), so every run reads that prefix with full attention.
    const int64_t minBudget = *std::min_element(m_budgets.perLayer.begin(), m_budgets.perLayer.end());
    return std::min(m_promptLength, minBudget);
}

std::vector<PositionBand> PolicyRun::prefillBand() const {
    if (m_full || m_config.schedule != Schedule::EveryStep || m_cache.rerotate() || m_promptDone || m_threshold)
        return {};
    std::vector<PositionBand> band(m_budgets.perLayer.size());
    for (size_t l = 0; l < band.size(); ++l)
        if (!m_policy->positionalBand(m_budgets.perLayer[l], &band[l])) return {};
    return band;
}

bool PolicyRun::bandShows(int64_t layer, int64_t key, int64_t query) const {
    if (m_band.empty()) return true;
    const PositionBand& b = m_band[static_cast<size_t>(layer)];
    return key < b.sinks || key >= query - b.window;
}

}  // namespace kvlens
