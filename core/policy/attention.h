#pragma once
// What attention-based policies keep between calls, and the attention they
// recompute: per-entry statistics that follow the cache through evictions
// (H2O sums, LRU/LFU uses, TOVA's last row), the last queries a layer saw
// (SnapKV's observation window), and per-entry views of a LayerState.
// Internal to core (uses ATen).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "core/policy/policy.h"

namespace kvlens {

// [Hkv, L] bool: true where head h really holds entry i (false on padding).
at::Tensor entryMask(const LayerState& state);
// [Hkv, L] int64: true position of each entry; padding reads as the largest
// int64, so that no query ever sees it.
at::Tensor entryPositions(const LayerState& state);
// [Hkv, L] bool: entry i of head h is among the first `sinks` or the last
// `window` entries of that head (never on padding).
at::Tensor edgeMask(const LayerState& state, int64_t sinks, int64_t window);

// Attention of `queries` ([Hq, m, D], after RoPE, at true positions qpos)
// over the state's entries: softmax(q·k · state.scale) in fp32, causal by
// position (entry visible iff its position <= the query's), padding masked.
// [Hkv, G, m, L]; a query that sees no entry gets a row of zeros.
at::Tensor attentionOver(const LayerState& state, const at::Tensor& queries, const std::vector<int64_t>& qpos);

// The last `size` queries each layer has seen (SnapKV's observation window).
// observe() batches only while nothing is evicted, so keeping the tail of
// every batch gives the same window as feeding tokens one at a time.
class QueryWindow {
public:
    explicit QueryWindow(int64_t size) : m_size(size) {}
    void add(int64_t layer, const Observation& obs);
    // [Hq, m, D] fp32, m <= size (undefined before the first add), and their positions.
    at::Tensor queries(int64_t layer) const;
    std::vector<int64_t> positions(int64_t layer) const;

private:
    struct Layer {
        at::Tensor queries;              // [Hq, m, D] fp32
        std::vector<int64_t> positions;  // m
    };
    int64_t m_size;
    std::vector<Layer> m_layers;
};

// Per-entry statistics of every layer, [Hkv, L] fp32 in entry order,
// aligned with the cache: new entries (always the last ones of each head)
// start at 0, and so does padding, because a ragged head's next entry lands
// in what was its padding; realigned when the cache applies a plan.
class EntryStats {
public:
    // The layer's statistics ([heads, >= length]) grown with zeros to at
    // least `length` columns, on `device`; update them in place.
    at::Tensor& grown(int64_t layer, int64_t heads, int64_t length, at::Device device);
    void set(int64_t layer, const at::Tensor& stats);
    // [Hkv, L] for the state's entries.
    at::Tensor forState(const LayerState& state);
    void realign(int64_t layer, const std::vector<std::vector<int64_t>>& keep);

private:
    // Storage with spare columns, so that the one entry a step adds costs no
    // reallocation; columns past m_lengths[layer] are stale until grown.
    std::vector<at::Tensor> m_layers;  // per layer [Hkv, capacity] fp32
    std::vector<int64_t> m_lengths;    // per layer: columns in use
};

}  // namespace kvlens
