#include "core/run/policy_run.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/model/model.h"
#include "core/policy/factory.h"

namespace kvlens {
namespace {

// Adds the scope's duration to a counter (the policy's share of a step).
class ScopeTimer {
public:
    explicit ScopeTimer(double& total) : m_total(total), m_start(std::chrono::steady_clock::now()) {}
    ~ScopeTimer() { m_total += std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count(); }

private:
    double& m_total;
    std::chrono::steady_clock::time_point m_start;
};

LayerBudgets budgetsFor(const PolicyConfig& c, const BudgetSpec& spec, int64_t promptLength, int64_t numLayers) {
    if (!isFullCache(c)) return policyBudgets(c, spec, promptLength, numLayers);
    LayerBudgets b;
    b.perLayer.assign(numLayers, std::numeric_limits<int32_t>::max());
    b.compress = false;
    return b;
}

std::string scheduleLabel(const PolicyConfig& c) {
    if (isFullCache(c)) return "-";
    if (c.schedule == Schedule::EveryN) return "every_n(" + std::to_string(c.everyN) + ")";
    return scheduleName(c.schedule);
}

}  // namespace

// A plan's promises, checked on every trim (the cache checks the indices
// themselves): the layer keeps at most Hkv x budget entries, each head at
// most the budget unless the policy allocates per head (a plan that keeps
// everything, as knorm's skipped layers do, is always fine), and an entry is kept
// exactly when its reason is not Evicted, so every entry a rule protects
// (sinks, window) stays. A broken promise is a bug in the policy: an Error
// naming it, never a cache that silently holds something else.
void checkPlanHolds(const PolicyConfig& config, const LayerState& st, const Plan& plan) {
    checkPlanHolds(config, st, plan, budgetIsOutcome(config));
}

void checkPlanHolds(const PolicyConfig& config, const LayerState& st, const Plan& plan, bool budgetIsAnOutcome) {
    auto broken = [&](const std::string& what) {
        throw Error("policy " + config.label() + " broke its plan at layer " + std::to_string(st.layer) + ": " + what);
    };
    if (static_cast<int64_t>(plan.keep.size()) != st.numKvHeads) broken("a keep list per KV head expected");
    // Keeping every entry is always allowed (knorm's skipped layers).
    bool everything = true;
    for (int64_t h = 0; h < st.numKvHeads; ++h) everything &= static_cast<int64_t>(plan.keep[h].size()) == st.length(h);
    // A threshold keeps what scores high enough: no budget to hold to.
    const bool byThreshold = budgetIsAnOutcome;
    const bool perHead = adaptiveHeads(config) || everything || byThreshold;
    int64_t kept = 0;
    for (int64_t h = 0; h < st.numKvHeads; ++h) {
        const auto& keep = plan.keep[h];
        kept += static_cast<int64_t>(keep.size());
        if (!perHead && static_cast<int64_t>(keep.size()) > st.budget)
            broken("KV head " + std::to_string(h) + " keeps " + std::to_string(keep.size()) + " entries, budget " +
                   std::to_string(st.budget));
        if (plan.reasons.empty()) continue;
        const auto& reasons = plan.reasons.at(h);
        if (static_cast<int64_t>(reasons.size()) != st.length(h)) broken("a reason per entry expected");
        size_t next = 0;  // keep is sorted (the cache checks it)
        for (size_t i = 0; i < reasons.size(); ++i) {
            const bool isKept = next < keep.size() && keep[next] == static_cast<int64_t>(i);
            if (isKept) ++next;
            if (isKept != (reasons[i] != TokenStatus::Evicted))
                broken("KV head " + std::to_string(h) + " entry " + std::to_string(i) +
                       (isKept ? " is kept but marked evicted" : " is evicted but marked kept (a protected entry?)"));
        }
    }
    if (!everything && !byThreshold && kept > st.numKvHeads * st.budget)
        broken("the layer keeps " + std::to_string(kept) + " entries, budget " + std::to_string(st.numKvHeads) + " x " +
               std::to_string(st.budget));
}

PromptRecord PromptRecord::prefix(int64_t n) const {
    if (!complete) throw Error("PromptRecord::prefix: the record is not complete");
    PromptRecord out;
    for (const KnownRows& c : chunks) {
        if (c.from >= n) break;
        KnownRows cut = c;
        if (c.from + c.count() > n) {
            const int64_t keep = n - c.from;
            for (auto* list : {&cut.q, &cut.k, &cut.v})
                for (at::Tensor& t : *list) t = t.narrow(1, 0, keep);
        }
        out.chunks.push_back(std::move(cut));
    }
    return out;
}

PolicyRun::PolicyRun(const Model& model, PolicyConfig config, const BudgetSpec& budget, int64_t promptLength,
                     CaptureTarget capture)
    : m_model(model),
      m_config(std::move(config)),
      m_policy(isFullCache(m_config) ? nullptr : makePolicy(m_config)),
      m_cache(model.newCache(CacheOptions{m_config.has("rerotate") && m_config.getBool("rerotate")})),
      m_budgets(budgetsFor(m_config, budget, promptLength, model.config().numLayers)),
      m_promptLength(promptLength),
      m_capture(capture),
      m_critical(m_policy && m_config.has("critical") && m_config.getBool("critical")),
      m_threshold(m_policy && budgetIsOutcome(m_config)),
      m_rotation(model.rotation()) {
    const auto& c = model.config();
    m_track.assign(c.numLayers, std::vector<HeadTrack>(c.numKvHeads));
    m_lastPlan.resize(c.numLayers);
    m_lastOutputs.resize(c.numLayers);
    m_lastAttention.resize(c.numLayers);
    m_observed.resize(c.numLayers);
}

PolicyRun::~PolicyRun() = default;

LayerState PolicyRun::takeState(int64_t layer, int64_t seqLen) {
    LayerState& seen = m_observed[layer];
    if (seen.seqLen != seqLen) return state(layer, seqLen);
    LayerState s = std::move(seen);
    seen = LayerState{};
    return s;
}

void PolicyRun::forgetObserved() {
    for (auto& s : m_observed) s = LayerState{};
}

LayerState PolicyRun::state(int64_t layer, int64_t seqLen) const {
    const auto& c = m_model.config();
    LayerState s;
    s.layer = layer;
    s.numLayers = c.numLayers;
    s.numHeads = c.numHeads;
    s.numKvHeads = c.numKvHeads;
    s.device = m_model.device();
    if (m_policy && (m_policy->info().usesKeys || m_critical)) {
        KvCache::Entries e = m_cache.entries(layer);
        s.keys = e.k;
        s.values = e.v;
        s.valid = e.valid;
        if (m_critical) s.outputProjection = m_model.outputProjection(layer);
        s.rotate = m_rotation;  // only where keys are read: the other policies' every-step states skip the copy
    } else {
        s.valid = m_cache.entryValid(layer);
    }
    // Copied into the buffers the previous plan's positions left (record()
    // hands them back): a step allocates nothing for them.
    s.positions = std::move(m_sparePositions);
    s.positions.resize(static_cast<size_t>(c.numKvHeads));
    for (int64_t h = 0; h < c.numKvHeads; ++h) {
        const std::vector<int64_t>& held = m_cache.positions(layer, h);
        s.positions[h].assign(held.begin(), held.end());
    }
    if (!m_sessionScores.empty()) s.sessionScores = m_sessionScores[static_cast<size_t>(layer)];
    s.budget = budgetOf(layer);
    s.seqLen = seqLen;
    s.promptLength = m_promptLength;
    s.scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
    return s;
}

void PolicyRun::observeLayer(int64_t layer, const LayerCapture& cap, const std::vector<int64_t>& positions) {
    const auto& c = m_model.config();
    const int64_t n = static_cast<int64_t>(positions.size()), G = c.groupSize();
    m_lastOutputs[layer] = cap.outputs.select(1, n - 1).to(at::kFloat);
    const bool captureHere = m_capture.enabled && m_capture.layer == layer;
    // Policies that never read attention (window, streaming, random, knorm)
    // skip the re-ordering, so their steps cost what a full-cache step does.
    // A prefill_once policy never plans again once the prompt is read, so it
    // observes nothing after it.
    const bool observing = m_policy && !(m_promptDone && m_config.schedule == Schedule::PrefillOnce);
    const bool needProbs = captureHere || (observing && m_policy->info().usesAttention);
    at::Tensor probs;  // [Hq, n, L]
    if (needProbs) {
        // Re-ordered for the policy alone: its cost, like observe's.
        std::optional<ScopeTimer> timer;
        if (!captureHere) timer.emplace(m_policySeconds);
        probs = m_cache.byEntry(layer, cap.probs);
    }
    if (isFull()) {
        // The full cache holds every position in order: entry index = position.
        // Only the latest query's row is kept (reordering all n rows of a
        // long prompt would copy the whole attention matrix).
        m_lastAttention[layer] = (needProbs ? probs.select(1, n - 1) : m_cache.byEntry(layer, cap.probs.narrow(1, n - 1, 1)).select(1, 0)).contiguous();
    }
    if (captureHere) {
        const auto& pos = m_cache.positions(layer, m_capture.head / G);
        at::Tensor rows = probs[m_capture.head].to(at::kCPU).contiguous();  // [n, L]
        const float* p = rows.data_ptr<float>();
        const int64_t L = rows.size(1);
        for (int64_t i = 0; i < n; ++i) {
            std::vector<float> row(static_cast<size_t>(positions[i] + 1), kNoScore);
            for (size_t e = 0; e < pos.size(); ++e)
                if (pos[e] <= positions[i] && bandShows(layer, pos[e], positions[i]))
                    row[pos[e]] = p[i * L + static_cast<int64_t>(e)];
            if (static_cast<int64_t>(m_rows.size()) <= positions[i]) m_rows.resize(positions[i] + 1);
            m_rows[positions[i]] = std::make_shared<const std::vector<float>>(std::move(row));
        }
    }
    if (observing) {
        ScopeTimer timer(m_policySeconds);
        LayerState& s = m_observed[layer];
        s = state(layer, positions.back() + 1);
        m_policy->observe(s, Observation{probs, cap.queries, positions});
    }
}

void PolicyRun::sizeTracks(int64_t length) {
    for (auto& layer : m_track)
        for (auto& h : layer) {
            h.status.resize(static_cast<size_t>(length), TokenStatus::Held);
            h.score.resize(static_cast<size_t>(length), kNoScore);
            h.rank.resize(static_cast<size_t>(length), -1);
        }
}

Model::Segment PolicyRun::beginForward(const std::vector<int64_t>& tokens) {
    if (m_presented) throw Error("PolicyRun: " + m_config.label() + " reads a token before presenting the steps it read ahead");
    const int64_t first = m_cache.seqLen();
    m_pending.tokens = tokens;
    m_pending.positions.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) m_pending.positions[i] = first + static_cast<int64_t>(i);
    sizeTracks(first + static_cast<int64_t>(tokens.size()));
    ForwardOptions& fo = m_pending.options;
    fo.lastLogitsOnly = true;
    fo.rowObserver = nullptr;
    fo.band = m_band;
    if (!fo.observer)
        fo.observer = [this](int64_t layer, const LayerCapture& cap) {
            observeLayer(layer, cap, m_pending.positions);
            countLayer();
            // A long chunk of a prompt takes seconds: stop between its layers.
            if (m_cancelCheck) (*m_cancelCheck)();
            for (PolicyRun* f : m_followers) f->followLayer(layer, cap);
            if (m_recording) {
                KnownRows& rows = m_recording->chunks.back();
                rows.q[layer] = cap.queries;
                rows.k[layer] = cap.keys;
                rows.v[layer] = cap.values;
            }
        };
    return Model::Segment{&m_pending.tokens, &m_cache, &m_pending.options};
}

void PolicyRun::finishForward(ForwardResult&& result) {
    m_logits = result.logits[0];
    m_sinceTrim += static_cast<int64_t>(m_pending.tokens.size());
}

void PolicyRun::forward(const std::vector<int64_t>& tokens) {
    const Model::Segment segment = beginForward(tokens);
    const int64_t from = m_cache.seqLen(), n = static_cast<int64_t>(tokens.size());
    if (m_recording) {
        const auto L = static_cast<size_t>(m_model.config().numLayers);
        KnownRows rows;
        rows.from = from;
        rows.q.resize(L), rows.k.resize(L), rows.v.resize(L);
        m_recording->chunks.push_back(std::move(rows));
    }
    for (PolicyRun* f : m_followers) f->followChunk(from, n);
    finishForward(std::move(m_model.forward({segment}).front()));
    for (PolicyRun* f : m_followers) f->followDone(n);
}

void PolicyRun::forwardBatched(const std::vector<int64_t>& tokens, const std::function<void()>& checkCancel) {
    // One batch materialises [Hq, n, n] attention probabilities (several
    // copies on the way: scores, mask, softmax): 8 GiB per layer for a
    // 1B-class model at 8192 tokens. Chunks of queries bound that; every
    // chunk sees all earlier keys, and the policies accumulate what they
    // observe over calls (as over decode steps), so the result is the same.
    // Buffers under glibc's largest mmap threshold (32 MiB) are reused from
    // the heap; larger ones are mapped and page-faulted afresh every time
    // (measured, 4096-token prompt, 1 thread: 3.1 s and 368 MiB peak with
    // 24 MiB chunks, 5.4 s and 903 MiB with 256 MiB chunks).
    constexpr double kAttentionBytes = 24.0 * 1024 * 1024;
    const auto& c = m_model.config();
    const int64_t n = static_cast<int64_t>(tokens.size()), keys = m_cache.seqLen() + n;
    const int64_t chunk = m_prefillChunk > 0 ? m_prefillChunk
                                             : std::max<int64_t>(64, static_cast<int64_t>(kAttentionBytes / (4.0 * double(c.numHeads) * double(keys))));
    struct Checking {
        PolicyRun* run;
        ~Checking() { run->m_cancelCheck = nullptr; }
    } checking{this};
    m_cancelCheck = checkCancel ? &checkCancel : nullptr;
    for (int64_t start = 0; start < n; start += chunk) {
        if (start > 0 && checkCancel) checkCancel();
        const int64_t end = std::min(n, start + chunk);
        forward(start == 0 && end == n ? tokens : std::vector<int64_t>(tokens.begin() + start, tokens.begin() + end));
    }
}

bool PolicyRun::trimDueAfter(int64_t sinceTrim) const {
    if (!m_policy) return false;
    switch (m_config.schedule) {
        case Schedule::EveryStep: return true;
        case Schedule::EveryN: return sinceTrim >= m_config.everyN;
        case Schedule::PrefillOnce: return false;
        case Schedule::PrefillThenStep: return true;
    }
    return false;
}

void PolicyRun::trim() {
    ScopeTimer timer(m_policySeconds);
    const auto& c = m_model.config();
    std::vector<LayerState> across;  // every layer's state, for a policy that decides across layers
    if (m_policy->crossLayer()) {
        for (int64_t l = 0; l < c.numLayers; ++l) across.push_back(takeState(l, m_cache.seqLen()));
        m_ownBudgets = m_budgets.perLayer;
        m_policy->planAcrossLayers(across, m_ownBudgets);
        for (int64_t l = 0; l < c.numLayers; ++l) across[static_cast<size_t>(l)].budget = budgetOf(l);
    }
    for (int64_t l = 0; l < c.numLayers; ++l) {
        if (across.empty()) {
            trimLayer(l, m_cache.seqLen());
            continue;
        }
        LayerState st = std::move(across[static_cast<size_t>(l)]);
        if (!overBudget(l)) continue;
        Plan plan = m_policy->plan(st);
        applyPlan(l, st, std::move(plan));
    }
    m_sinceTrim = 0;
}

bool PolicyRun::overBudget(int64_t layer) const {
    if (m_threshold) return true;  // a threshold may evict whatever the count
    const int64_t Hkv = m_model.config().numKvHeads;
    int64_t total = 0;
    for (int64_t h = 0; h < Hkv; ++h) total += m_cache.length(layer, h);
    return total > Hkv * budgetOf(layer);
}

void PolicyRun::trimLayer(int64_t layer, int64_t seqLen) {
    if (!overBudget(layer)) return;
    LayerState st = takeState(layer, seqLen);
    Plan plan = m_policy->plan(st);
    applyPlan(layer, st, std::move(plan));
}

void PolicyRun::applyPlan(int64_t layer, LayerState& st, Plan plan) {
    checkPlanHolds(m_config, st, plan, m_threshold);
    m_cache.apply(layer, plan.keep);
    m_policy->applied(layer, plan.keep);
    record(layer, std::move(st.positions), std::move(plan));  // the state's positions are those before the trim
}

namespace {

// The rank of every scored entry of a plan's row as the selection orders
// them (higher score first, ties to the more recent token, which is the
// later entry); -1 where the score is NaN. One sort: O(n log n).
std::vector<int32_t> ranksOfRow(const float* row, int64_t n) {
    std::vector<int32_t> order;
    order.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        if (!std::isnan(row[i])) order.push_back(static_cast<int32_t>(i));
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return row[a] != row[b] ? row[a] > row[b] : a > b; });
    std::vector<int32_t> rank(static_cast<size_t>(n), -1);
    for (size_t r = 0; r < order.size(); ++r) rank[static_cast<size_t>(order[r])] = static_cast<int32_t>(r);
    return rank;
}

}  // namespace

void PolicyRun::record(int64_t layer, std::vector<std::vector<int64_t>> positionsBefore, Plan plan) {
    LastPlan& last = m_lastPlan[layer];
    last.positions.swap(positionsBefore);
    m_sparePositions = std::move(positionsBefore);  // the old plan's buffers, for the next state()
    last.reasons = std::move(plan.reasons);
    last.scores = plan.scores.defined() ? plan.scores.to(at::kCPU, at::kFloat).contiguous() : at::Tensor();
    last.ranks.clear();
    const auto& before = last.positions;
    const float* sp = last.scores.defined() ? last.scores.data_ptr<float>() : nullptr;
    const int64_t stride = last.scores.defined() ? last.scores.size(1) : 0;
    for (size_t h = 0; h < before.size(); ++h) {
        HeadTrack& t = m_track[layer][h];
        const float* row = sp ? sp + static_cast<int64_t>(h) * stride : nullptr;
        const auto& reasons = last.reasons[h];
        const int64_t* pos = before[h].data();
        const auto n = static_cast<int64_t>(before[h].size());
        // A few evictions (every_step) are ranked by counting; many (a
        // prompt's compression) by one sort of the row.
        const bool many = n - static_cast<int64_t>(plan.keep[h].size()) > 16;
        const std::vector<int32_t> ranks = many && row ? ranksOfRow(row, n) : std::vector<int32_t>();
        auto evicted = [&](int64_t i) {
            t.status[pos[i]] = TokenStatus::Evicted;
            t.score[pos[i]] = row ? row[i] : kNoScore;
            if (std::isnan(t.score[pos[i]])) return;
            if (many) {
                t.rank[pos[i]] = ranks[static_cast<size_t>(i)];
                return;
            }
            // Entries this plan ranked above the evicted one (ranksBefore:
            // higher score, or an equal score and more recent, which is a
            // later entry); NaN compares false, so unscored entries never count.
            const float s = row[i];
            int32_t above = 0, ties = 0;
            for (int64_t j = 0; j < n; ++j) above += row[j] > s ? 1 : 0;
            for (int64_t j = i + 1; j < n; ++j) ties += row[j] == s ? 1 : 0;
            t.rank[pos[i]] = above + ties;
        };
        forEachEvicted(reasons, [&](int64_t i) {
            if (i < n) evicted(i);
        });
        for (auto i = static_cast<int64_t>(reasons.size()); i < n; ++i) evicted(i);  // past the reasons: evicted
    }
}

void PolicyRun::readPrompt(const std::vector<int64_t>& prompt, const std::function<void()>& checkCancel) {
    const int64_t T = static_cast<int64_t>(prompt.size());
    // The tokens a replay of the full cache's record gave it (replayRecord), or none.
    const int64_t from = m_cache.seqLen();
    const std::vector<int64_t> rest = from == 0 ? prompt : std::vector<int64_t>(prompt.begin() + from, prompt.end());
    if (!m_policy || m_config.schedule == Schedule::PrefillOnce) {
        forwardBatched(rest, checkCancel);
        if (m_policy && m_budgets.compress) trim();
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
}

bool PolicyRun::sharesPrefill() const {
    return m_policy && !m_cache.rerotate() &&
           (m_config.schedule == Schedule::PrefillOnce || m_config.schedule == Schedule::PrefillThenStep);
}

void PolicyRun::readPromptShared(const std::vector<int64_t>& prompt, const std::vector<PolicyRun*>& followers,
                                 PromptRecord* record, const std::function<void()>& checkCancel) {
    if (m_policy) throw Error("PolicyRun::readPromptShared: only the full cache leads a shared prefill");
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
}

void PolicyRun::replayRecord(const Model& model, const PromptRecord& record, const std::vector<PolicyRun*>& followers) {
    if (followers.empty()) return;
    if (!record.complete) throw Error("PolicyRun::replayRecord: the record is not complete");
    for (PolicyRun* f : followers)
        if (!f->m_policy || f->m_cache.rerotate() || f->m_cache.seqLen() != 0 ||
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
}

void PolicyRun::rewind(int64_t length, int64_t promptLength) {
    if (m_policy) throw Error("PolicyRun::rewind: only the full cache rewinds");
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
    return m_policy && m_config.schedule != Schedule::PrefillOnce && m_config.schedule != Schedule::PrefillThenStep &&
           prefillBand().empty();
}

int64_t PolicyRun::untouchedPrefix() const {
    if (!m_policy || sharesPrefill() || m_promptDone || m_threshold) return 0;  // a threshold may trim at once
    // Until a layer holds more than its budget no trim evicts anything (a
    // band hides nothing either: a query at or before position B sees every
    // key), so every run reads that prefix with full attention.
    const int64_t minBudget = *std::min_element(m_budgets.perLayer.begin(), m_budgets.perLayer.end());
    return std::min(m_promptLength, minBudget);
}

std::vector<PositionBand> PolicyRun::prefillBand() const {
    if (!m_policy || m_config.schedule != Schedule::EveryStep || m_cache.rerotate() || m_promptDone || m_threshold)
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

void PolicyRun::readToken(int64_t token) { endToken(std::move(m_model.forward({beginToken(token)}).front())); }

Model::Segment PolicyRun::beginToken(int64_t token) { return beginForward({token}); }

void PolicyRun::endToken(ForwardResult&& result) {
    finishForward(std::move(result));
    if (m_promptDone && trimDue()) trim();
    forgetObserved();
}

bool PolicyRun::readsAhead() const {
    return m_policy && m_promptDone && !m_cache.rerotate() && !m_policy->crossLayer() && m_policy->layerLocal() &&
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
    if (m_policy) throw Error("PolicyRun::beginRunningAhead: only the full cache runs ahead");
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
    if (m_policy) throw Error("PolicyRun::readTokenAhead: only the full cache runs ahead");
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
    if (m_policy) throw Error("PolicyRun::dropStepsAhead: only the full cache goes back");
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
