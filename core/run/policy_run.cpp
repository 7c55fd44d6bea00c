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

#include "core/run/policy_run_detail.h"

namespace kvlens {

using policy_run_detail::ScopeTimer;

namespace {

LayerBudgets budgetsFor(const PolicyConfig& c, const BudgetSpec& spec, int64_t promptLength, int64_t numLayers) {
    if (!c.info().fullCache) return policyBudgets(c, spec, promptLength, numLayers);
    LayerBudgets b;
    b.perLayer.assign(numLayers, std::numeric_limits<int32_t>::max());
    b.compress = false;
    return b;
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
      m_policy(makePolicy(m_config)),
      m_full(m_config.info().fullCache),
      m_cache(model.newCache(CacheOptions{m_config.has("rerotate") && m_config.getBool("rerotate")})),
      m_budgets(budgetsFor(m_config, budget, promptLength, model.config().numLayers)),
      m_promptLength(promptLength),
      m_capture(capture),
      m_critical(!m_full && m_config.has("critical") && m_config.getBool("critical")),
      m_threshold(!m_full && budgetIsOutcome(m_config)),
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
    if (m_policy->info().usesKeys || m_critical) {
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
    const bool observing = !m_full && !(m_promptDone && m_config.schedule == Schedule::PrefillOnce);
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
            if (positions[i] < m_capture.fromRow) continue;  // cut by the memory guard: a null row
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
    if (m_full) return false;
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

namespace policy_run_detail {

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

}  // namespace policy_run_detail

using policy_run_detail::ranksOfRow;

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


}  // namespace kvlens
