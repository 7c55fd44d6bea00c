#pragma once
// One run of a Session: a KvCache, the policy that trims it (the full
// cache's keeps everything), its schedule and budgets, and the bookkeeping a Trace shows
// (status, score and rank of every token in every layer × KV head).
// Internal to core.
#include <ATen/core/Tensor.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/kv_cache.h"
#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/policy/policy.h"
#include "core/run/trace.h"

namespace kvlens {


// The full cache's prompt read, chunk by chunk (see PolicyRun::sharesPrefill).
struct PromptRecord {
    std::vector<KnownRows> chunks;  // consecutive from position 0
    at::Tensor logits;              // [V] after the last token, once the prompt is read
    bool complete = true;           // false: some chunk's tensors were dropped (over the memory cap)
    int64_t length() const { return chunks.empty() ? 0 : chunks.back().from + chunks.back().count(); }
    // The record of the first n tokens (the chunk at n cut short); no logits.
    PromptRecord prefix(int64_t n) const;
};

// A plan's promises, checked by every trim: the layer keeps at most
// Hkv x budget entries (none with select=threshold), each head at most the budget unless the policy
// allocates per head (keeping everything is always fine), and an entry is
// kept exactly when its reason is not Evicted (so protected entries stay).
// Throws Error naming the policy and the layer.
void checkPlanHolds(const PolicyConfig& config, const LayerState& state, const Plan& plan);
// The same, told whether the config's budget is an outcome (budgetIsOutcome,
// which a run knows once: no registry look-up per layer and trim).
void checkPlanHolds(const PolicyConfig& config, const LayerState& state, const Plan& plan, bool budgetIsAnOutcome);

struct CaptureTarget {
    bool enabled = false;
    int64_t layer = 0, head = 0;  // query head
    int64_t fromRow = 0;          // queries before it are not captured (the memory guard)
};

class PolicyRun {
public:
    PolicyRun(const Model& model, PolicyConfig config, const BudgetSpec& budget, int64_t promptLength,
              CaptureTarget capture);
    ~PolicyRun();

    // The reference run: its policy (core/policy/full.cpp) keeps everything.
    bool isFull() const { return m_full; }
    const PolicyConfig& config() const { return m_config; }
    // The allocator's budgets (what a later Session compares to take a run
    // over); a policy deciding across layers may hold others (budgetOf).
    const LayerBudgets& budgets() const { return m_budgets; }
    int64_t budgetOf(int64_t layer) const {
        return m_ownBudgets.empty() ? m_budgets.perLayer[static_cast<size_t>(layer)] : m_ownBudgets[static_cast<size_t>(layer)];
    }
    const KvCache& cache() const { return m_cache; }
    // KV bytes held as the run stands (the step presented, when read ahead).
    uint64_t bytesHeld() const { return m_presented ? m_presented->bytesHeld : m_cache.bytesHeld(); }

    // Counts what this run reads, follows or replays, in tokens x layers
    // (each layer of a forward adds its tokens), for a progress display that
    // reads it from another thread; null: not counted.
    void setTokenCounter(std::atomic<int64_t>* counter) { m_tokensRead = counter; }

    // Queries per batch when a prompt is read in batches (0: automatic, so
    // that one batch's attention stays near 24 MiB). For tests and benches.
    void setPrefillChunk(int64_t queries) { m_prefillChunk = queries; }

    // Whether readPrompt() reads (most of) the prompt one token at a time
    // (every_step / every_n policies without a positional band): by far the
    // longest prompt read of a Session.
    bool readsPromptTokenByToken() const;
    // A run that reads the prompt itself (strict every_step / every_n, not
    // a follower): the prompt tokens no trim can touch, which it reads with
    // full attention as the full cache does (the smallest layer budget, at
    // most the prompt); 0 for the full cache and followers. A later Session
    // gives it that prefix from the full cache's record (replayRecord).
    int64_t untouchedPrefix() const;
    // Reads the prompt with this run's schedule (after what a replay of the
    // full cache's record gave it); `checkCancel` runs between tokens and
    // between the layers of a batch.
    void readPrompt(const std::vector<int64_t>& prompt, const std::function<void()>& checkCancel);
    // readPrompt() of a run that reads token by token, in steps, so that a
    // Session reads the next prompt token of every such run in one batched
    // forward: the batched prefix no trim can touch (returns the first token
    // still to read), each token (its segment, then its result: the trim),
    // the end of the prompt.
    int64_t beginOnlinePrompt(const std::vector<int64_t>& prompt, const std::function<void()>& checkCancel);
    Model::Segment beginPromptToken(int64_t token);
    void endPromptToken(ForwardResult&& result);
    void endPrompt();

    // One shared prefill (issue 17): the full run reads the prompt once for
    // itself and for every run whose schedule reads it with full attention
    // (prefill_once, prefill_then_step; not re-rotated). Such a follower
    // appends the same keys and values to its own cache (the same layout, so
    // the full cache's attention is its attention), its policy observes that
    // forward, and at the end of the prompt it compresses. The results are
    // those of the run reading the prompt alone, bit for bit.
    bool sharesPrefill() const;
    // Full cache only: reads prompt[seqLen() ..] (all of it on a new cache,
    // the rest after rewind()) with `followers` following; `record`, when
    // given, gets each chunk's queries, keys and values, every layer, and the
    // logits after the prompt.
    void readPromptShared(const std::vector<int64_t>& prompt, const std::vector<PolicyRun*>& followers,
                          PromptRecord* record, const std::function<void()>& checkCancel);
    // Followers that were not there (a later Session's edited policies):
    // the record replayed for them all at once, one attention computation
    // (Model::replay over a scratch cache with the full cache's layout).
    // Also a reader on an empty cache, with a record no longer than its
    // untouchedPrefix(): it then reads the rest of the prompt itself.
    static void replayRecord(const Model& model, const PromptRecord& record, const std::vector<PolicyRun*>& followers);
    // A follower at the end of the prompt, with the full cache's logits after it: it compresses.
    void finishSharedPrompt(const at::Tensor& logits);
    // Full cache only: back to its first `length` tokens (the prompt's
    // prefix a new prompt shares), before any decode step; the rest of the
    // new prompt (promptLength tokens in all) is read next.
    void rewind(int64_t length, int64_t promptLength);
    // Reads one more token (a decode step), trimming when the schedule says.
    void readToken(int64_t token);
    // readToken in two halves, so that a Session reads every run's token in
    // one batched forward (Model::forward(segments)): the segment to run,
    // then its result. readToken(t) is endToken(forward(beginToken(t))).
    Model::Segment beginToken(int64_t token);
    void endToken(ForwardResult&& result);

    // Known decode tokens read ahead in one forward, layer by layer
    // (ForwardOptions::rowObserver: each layer reads the rows in turn, the
    // policy observing and trimming that layer between them): a Session
    // catching up on steps whose tokens it knows reads them for every run
    // at once, the weights once for all rows. Each step is then presented
    // in turn (stepAhead) as readToken() would have left the run: logits,
    // latest outputs, Trace, held mask, attention map. Only after the
    // prompt, for a policy that decides layer by layer (not across layers,
    // not a plug-in), on a cache that is not re-rotated.
    bool readsAhead() const;
    Model::Segment beginTokensAhead(const std::vector<int64_t>& tokens);
    void endTokensAhead(ForwardResult&& result);
    // The full cache running ahead of the policy runs (whose tokens it
    // chooses): between begin and end, readTokenAhead() reads one token as
    // readToken() does (logits() is then the latest) and keeps the step to
    // present later, so that the policy runs can read its tokens ahead;
    // after end, the run shows the state before them until stepAhead().
    void beginRunningAhead();
    void readTokenAhead(int64_t token);
    void endRunningAhead();
    // Full cache only: forgets the steps read ahead and not presented (a
    // Session stopped before them), going back to the step presented last.
    void dropStepsAhead();
    // Presents the next step read ahead; false when none is left.
    bool stepAhead();
    bool hasStepsAhead() const { return m_nextAhead < m_ahead.size(); }

    const at::Tensor& logits() const { return m_logits; }  // [V] fp32: prediction after the last token read
    // Empty while the logits are finite; otherwise one sentence saying they
    // are not (NaN/Inf weights, an overflow), after `position`.
    std::string nonFiniteLogits(int64_t position) const;
    // Per layer, the latest query's attention output per head [Hq, D] and its
    // attention by token position [Hq, T] (0 where not held).
    const std::vector<at::Tensor>& lastOutputs() const { return m_lastOutputs; }
    const std::vector<at::Tensor>& lastAttention() const { return m_lastAttention; }
    // [L, Hkv, T] bool on the CPU: which token positions each layer's KV heads hold.
    at::Tensor heldMask() const;

    // What the Session computed ahead for this run's policy, per layer [Hkv, P]
    // (LayerState::sessionScores: the oracle's future attention, KVzip's reconstruction).
    void setSessionScores(std::vector<at::Tensor> perLayer) { m_sessionScores = std::move(perLayer); }
    // A calibration prompt's queries per layer, for the policy (Policy::calibrate).
    void calibrate(const std::vector<at::Tensor>& queriesPerLayer) {
        m_policy->calibrate(queriesPerLayer);
    }

    // Seconds spent inside the policy so far (observe and the attention
    // re-ordered for it, plan, the cache's apply, the trace record): what
    // eviction costs beyond the model.
    double policySeconds() const { return m_policySeconds; }

    void fillTrace(PolicyTrace& out) const;           // status/score/rank, budgets, memory
    AttentionMap attentionMap() const;                // the captured rows so far

private:
    // Evicted tokens are recorded when they leave (status, the score and rank
    // that decided); the held ones are described by the layer's latest plan,
    // read only when a Trace is built, so a step pays O(evicted), not O(L log L).
    struct HeadTrack {
        std::vector<TokenStatus> status;  // by position: Held, or Evicted
        std::vector<float> score;
        std::vector<int32_t> rank;
    };
    struct LastPlan {
        std::vector<std::vector<int64_t>> positions;  // per head: entry positions when planned
        std::vector<std::vector<TokenStatus>> reasons;
        at::Tensor scores;                            // [Hkv, L] fp32 on the CPU, or undefined
        // Per head: the rank of each entry by score, sorted once per plan
        // (a prefill_once plan describes every later Trace).
        mutable std::vector<std::vector<int32_t>> ranks;
    };
    void forward(const std::vector<int64_t>& tokens);
    Model::Segment beginForward(const std::vector<int64_t>& tokens);
    void finishForward(ForwardResult&& result);
    // The same in chunks that bound the attention matrix held at once.
    void forwardBatched(const std::vector<int64_t>& tokens, const std::function<void()>& checkCancel);
    void observeLayer(int64_t layer, const LayerCapture& cap, const std::vector<int64_t>& positions);
    void sizeTracks(int64_t length);
    // A follower: a chunk of the shared prompt begins, one layer of it, it ends.
    void followChunk(int64_t from, int64_t count);
    void followLayer(int64_t layer, const LayerCapture& cap);
    void followDone(int64_t count);
    void countLayer() {
        if (m_tokensRead) m_tokensRead->fetch_add(static_cast<int64_t>(m_pending.positions.size()), std::memory_order_relaxed);
    }
    bool trimDue() const { return trimDueAfter(m_sinceTrim); }
    bool trimDueAfter(int64_t sinceTrim) const;
    void trim();
    void trimLayer(int64_t layer, int64_t seqLen);
    bool overBudget(int64_t layer) const;  // a trim of the layer has something to decide
    void applyPlan(int64_t layer, LayerState& state, Plan plan);
    // One row of a forward reading ahead, at one layer (ForwardOptions::rowObserver).
    void aheadRow(int64_t layer, int64_t row, const LayerCapture& cap);
    // A layer's part of a Trace, over the first `length` token positions.
    void fillLayerTrace(int64_t layer, LayerTrace& out, int64_t length) const;
    void record(int64_t layer, std::vector<std::vector<int64_t>> positionsBefore, Plan plan);
    // Per layer, the band a positional policy keeps when it reads the prompt
    // online (empty when the prompt must be read token by token).
    std::vector<PositionBand> prefillBand() const;
    bool bandShows(int64_t layer, int64_t key, int64_t query) const;
    LayerState state(int64_t layer, int64_t seqLen) const;
    // The state observe() saw, if this step observed the layer and nothing
    // changed it since (trim plans on it instead of building it again).
    LayerState takeState(int64_t layer, int64_t seqLen);
    // Drops what takeState did not take: a kept state's key/value views
    // would hold the cache's storage from before its next reallocation.
    void forgetObserved();
    static void describeHeld(const LastPlan& last, size_t head, HeadTrace& out);

    const Model& m_model;
    PolicyConfig m_config;
    std::unique_ptr<Policy> m_policy;  // the full cache's too
    bool m_full = false;              // m_config's info().fullCache
    KvCache m_cache;
    LayerBudgets m_budgets;
    std::vector<int64_t> m_ownBudgets;  // the layer budgets a cross-layer policy chose (empty: the allocator's)
    int64_t m_promptLength = 0;
    int64_t m_sinceTrim = 0;           // tokens read since the last trim (every_n)
    bool m_promptDone = false;
    uint64_t m_promptPeakBytes = 0;  // the cache's high-water mark when the prompt was read
    int64_t m_prefillChunk = 0;
    double m_policySeconds = 0;
    std::atomic<int64_t>* m_tokensRead = nullptr;
    const std::function<void()>* m_cancelCheck = nullptr;  // while forwardBatched runs: checked after each layer
    std::vector<PositionBand> m_band;  // in force while a prompt is read in one banded batch
    PromptRecord* m_recording = nullptr;  // while the full run reads a prompt
    std::vector<PolicyRun*> m_followers;  // while the full run reads a prompt
    struct Pending {                   // the forward begun and not yet finished
        std::vector<int64_t> tokens, positions;
        ForwardOptions options;
    } m_pending;
    CaptureTarget m_capture;
    bool m_critical = false;           // critical=true: states carry values and W_O
    bool m_threshold = false;          // select=threshold: every trim plans every layer, the budget is an outcome
    Rerotation m_rotation;             // the model's RoPE, for LayerState::rotate
    std::vector<at::Tensor> m_sessionScores;  // per layer, for a Session-scored policy
    at::Tensor m_logits;
    std::vector<at::Tensor> m_lastOutputs, m_lastAttention;
    std::vector<std::vector<HeadTrack>> m_track;  // [layer][kv head]
    std::vector<LastPlan> m_lastPlan;             // [layer]
    std::vector<LayerState> m_observed;           // [layer]: the state of this step's observe (seqLen 0: none)
    mutable std::vector<std::vector<int64_t>> m_sparePositions;  // buffers state() reuses
    std::vector<AttentionMap::Row> m_rows;        // captured attention rows, by query position (shared with the Traces)
    // Steps read ahead (beginTokensAhead), each as the run stood after it.
    struct AheadStep {
        int64_t length = 0;                    // tokens read
        at::Tensor logits;                     // [V]
        std::vector<at::Tensor> lastOutputs;   // per layer
        std::vector<at::Tensor> lastAttention; // per layer (the full cache's)
        std::vector<LayerTrace> layers;
        at::Tensor held;                       // [L, Hkv, length] bool (heldMask)
        uint64_t bytesHeld = 0, bytesAllocated = 0;
        bool trims = false;                    // the schedule trims after this step
    };
    AheadStep snapshot() const;                // the run as it stands
    void show(const AheadStep& step);          // present it (logits, outputs, Trace, held mask)
    std::vector<AheadStep> m_ahead;
    AheadStep m_before;                        // the run before the steps read ahead, shown until the first is presented
    size_t m_nextAhead = 0;
    const AheadStep* m_presented = nullptr;    // the step shown, while it is not the last
};

}  // namespace kvlens
