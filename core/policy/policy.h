#pragma once
// Eviction policies (docs/policies.md states each rule). A policy plans:
// it returns, per KV head, the cache entries to keep plus the scores that
// decided; only KvCache::apply mutates the cache (the Session calls it).
// Policies that learn from attention (H2O, LRU/LFU, TOVA, SnapKV family)
// see every step's attention through observe(), and realign their per-entry
// state in applied(). Internal to core (uses ATen).
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/kv_cache.h"
#include "core/policy/policy_info.h"
#include "core/policy/token_status.h"

namespace kvlens {

class KvCache;

// One layer as a policy sees it when it observes or plans.
struct LayerState {
    int64_t layer = 0;
    int64_t numLayers = 0;
    int64_t numHeads = 0;     // Hq
    int64_t numKvHeads = 0;   // Hkv
    // The layer's entries in cache order (KvCache::entries): keys after RoPE.
    // Filled only for policies whose PolicyInfo::usesKeys is set: gathering
    // them costs a copy of the layer's cache on every planning step.
    at::Tensor keys;          // [Hkv, L, D] or undefined
    at::Tensor values;        // [Hkv, L, D] or undefined
    // The layer's output projection W_O [hidden, Hq*D], only for a scorer
    // run with critical=true (its values are filled then too).
    at::Tensor outputProjection;
    // Policies the Session scores (PolicyInfo::sessionScored: the hindsight
    // oracle, KVzip): [Hkv, P] fp32 by token position, P the prompt length.
    at::Tensor sessionScores;
    // The model's rotary embedding (Model::rotation), empty without one, for
    // policies that read keys (usesKeys) and need queries before RoPE or at
    // future positions.
    Rerotation rotate;
    at::Device device{at::kCPU};  // where the cache lives
    at::Tensor valid;         // [Hkv, L] bool, undefined when every head holds L entries
    // Per KV head: true position of each entry, increasing (the cache keeps
    // every head's entries in position order; ties in a score go to the
    // older entry, which is then simply the lower index).
    std::vector<std::vector<int64_t>> positions;
    int64_t budget = 0;       // B for this layer: entries per KV head after the trim
    int64_t seqLen = 0;       // tokens seen so far (prompt + generated)
    int64_t promptLength = 0;
    double scale = 0;         // 1/sqrt(head_dim), for policies that recompute attention
    int64_t length(int64_t head) const { return static_cast<int64_t>(positions[head].size()); }
    int64_t maxLength() const {  // L: the longest head
        int64_t L = 0;
        for (const auto& p : positions) L = std::max<int64_t>(L, static_cast<int64_t>(p.size()));
        return L;
    }
};

// What a step's forward pass showed a layer.
struct Observation {
    // Attention of this step's queries over the layer's entries (entry order,
    // the new entries included, padding 0): [Hq, n, L] fp32.
    at::Tensor probs;
    // The queries themselves after RoPE, [Hq, n, D], and their true positions.
    at::Tensor queries;
    std::vector<int64_t> queryPositions;
};

// Calls f(i) for each entry i of `reasons` that is Evicted, in order
// (memchr finds them: an every_step plan has one per head among thousands).
template <class F>
void forEachEvicted(const std::vector<TokenStatus>& reasons, F&& f) {
    static_assert(sizeof(TokenStatus) == 1, "memchr reads one status per byte");
    constexpr int kEvicted = static_cast<int>(TokenStatus::Evicted);
    const auto* r = reinterpret_cast<const unsigned char*>(reasons.data());
    const size_t n = reasons.size();
    for (size_t i = 0; i < n; ++i) {
        const void* hit = std::memchr(r + i, kEvicted, n - i);
        if (!hit) return;
        i = static_cast<size_t>(static_cast<const unsigned char*>(hit) - r);
        f(static_cast<int64_t>(i));
    }
}

struct Plan {
    std::vector<std::vector<int64_t>> keep;   // per KV head: sorted, unique entry indices
    at::Tensor scores;                        // [Hkv, L] fp32 (higher = keep), NaN where a rule, not a score, decided
    std::vector<std::vector<TokenStatus>> reasons;  // per KV head, per entry (size L_h): Score, Sink, Window or Evicted
};

class Policy {
public:
    virtual ~Policy() = default;
    const PolicyInfo& info() const { return *m_info; }
    const PolicyConfig& config() const { return m_config; }

    // Called for every layer after every forward step (a batched prefix, a
    // prompt token or a decode token), before any trim of that step.
    virtual void observe(const LayerState& state, const Observation& obs) { (void)state, (void)obs; }
    // The entries to keep so that every KV head holds at most state.budget
    // (head budgets may differ where the policy allocates per head, but the
    // layer total stays ≤ Hkv × budget).
    virtual Plan plan(const LayerState& state) = 0;
    // The cache applied plan.keep for `layer`: realign per-entry state.
    virtual void applied(int64_t layer, const std::vector<std::vector<int64_t>>& keep) { (void)layer, (void)keep; }

    // Policies whose kept set depends on positions alone (window,
    // streaming) name it as a band for a layer budget: read online, the
    // query at position q sees the keys p <= q with p < sinks or
    // p >= q - window. Then a prompt can be read in one batch under that
    // mask with the same result (POLICIES.md allows it).
    virtual bool positionalBand(int64_t budget, PositionBand* band) const { return (void)budget, (void)band, false; }

    // Decisions across layers (CAKE's layer budgets, DuoAttention's head
    // split): when crossLayer(), every trim first calls planAcrossLayers
    // with the state of every layer (each layer's plan then gets its own
    // back) and the layer budgets the allocator gave, which the policy may
    // redistribute before any layer plans. A policy says so only while it
    // still has to decide (each such trim holds every layer's state at once).
    virtual bool crossLayer() const { return false; }
    virtual void planAcrossLayers(const std::vector<LayerState>& states, std::vector<int64_t>& perLayer) {
        (void)states, (void)perLayer;
    }

    // Whether observe/plan/applied for a layer read and change that layer's
    // state alone (every built-in policy: their state is per layer, and
    // Random's draws depend on (seed, layer, seqLen, head)). Then a run may
    // read several known decode tokens layer by layer (the Session's
    // catch-up, PolicyRun::readsAhead) with the results of step by step.
    virtual bool layerLocal() const { return true; }
    // The queries of a calibration prompt the user chose, per layer
    // [Hq, n, D] after RoPE (SessionOptions::calibration), given before the
    // prompt is read: Q-Filters learns its filters from them instead of
    // from the prompt's. Others ignore them.
    virtual void calibrate(const std::vector<at::Tensor>& queriesPerLayer) { (void)queriesPerLayer; }

protected:
    Policy(const PolicyInfo& info, PolicyConfig config) : m_info(&info), m_config(std::move(config)) {}

private:
    const PolicyInfo* m_info;
    PolicyConfig m_config;
};

}  // namespace kvlens
