#pragma once
// KvCache: the keys (after RoPE) and values of every layer and KV head, with
// the original position of each entry. Storage columns need not follow
// entry order: softmax does not care, and a policy that evicts one token per
// step frees a column that the next token reuses, so a step moves no data.
// Freed columns stay bounded (an eighth of the columns in use, at least 8);
// beyond that, apply() gathers the kept entries into contiguous storage. Policies plan which entries to keep;
// apply() is the only mutator that removes entries, and it compacts the
// storage physically (a gather), so attention really runs over fewer keys and
// memory really shrinks. KV heads may hold different numbers of entries
// (Ada-KV, AnDPro): shorter heads are padded at the end and masked.
// Internal to core (uses ATen); the GUI sees Trace snapshots instead.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace kvlens {

// Which keys a query sees when a positional policy (window, streaming) reads
// online: key p is visible to query q (p <= q) when p < sinks or
// p >= q - window.
struct PositionBand {
    int64_t sinks = 0, window = 0;
};

// Re-rotation of kept keys for StreamingLLM's position shift: keys
// [Hkv, n, D] turned by per-entry position deltas [Hkv, n] (long). The model
// gives its RoPE (Model::newCache); empty for models without rotary
// embeddings, where rerotate is refused. Injected, so that the cache does
// not depend on the model.
using Rerotation = std::function<at::Tensor(const at::Tensor& keys, const at::Tensor& deltas)>;

// keep: sorted, unique indices into n entries. Calls f(to, from, count) for
// each maximal run of consecutive kept entries, in order: entries
// from .. from+count-1 go to to .. to+count-1 (to <= from) when the kept
// ones close up. keep[i] - i never decreases, so runs are found by binary
// search: an eviction of a few entries costs O(runs × log n), not O(n).
template <class F>
void forEachKeptRun(const std::vector<int64_t>& keep, F&& f) {
    const size_t n = keep.size();
    size_t j = 0;
    while (j < n) {
        const int64_t offset = keep[j] - static_cast<int64_t>(j);
        size_t lo = j + 1, hi = n;  // first index whose offset is larger
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (keep[mid] - static_cast<int64_t>(mid) > offset) hi = mid;
            else lo = mid + 1;
        }
        f(static_cast<int64_t>(j), keep[j], static_cast<int64_t>(lo - j));
        j = lo;
    }
}

struct CacheOptions {
    // StreamingLLM's "position shift": after each apply(), kept keys are
    // re-rotated to their index in the cache, and new tokens are rotated at
    // the cache length instead of their true position.
    bool rerotate = false;
};

class KvCache {
public:
    // rerotate may be empty (no rotary embeddings): then options.rerotate is refused.
    KvCache(int64_t layers, int64_t kvHeads, int64_t headDim, at::ScalarType dtype, at::Device device,
            Rerotation rerotate, CacheOptions options = {});

    // What attention reads for one layer after an append.
    struct LayerView {
        at::Tensor k;      // [Hkv, S, D] rotated keys (S = columns in use, padding included)
        at::Tensor v;      // [Hkv, S, D]
        at::Tensor valid;  // [Hkv, S] bool, undefined when every column of every head is valid
        int64_t newCount;  // this step's tokens: the last newCount columns, same column for every head,
                           // except a single token placed in freed columns (newAtEnd false)
        bool newAtEnd = true;
    };

    // Appends n entries per head (k, v: [Hkv, n, D], keys rotated at the
    // positions given by rotaryPosition(layer)). Positions are the true positions
    // seqLen() .. seqLen()+n-1; call advance(n) once all layers are appended.
    // A layer may take its n rows in several appends (a forward reading rows
    // one after another, trimming between them): each continues the positions.
    LayerView append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
    void advance(int64_t n);

    // keep[h]: sorted, unique indices into head h's current entries
    // (0 .. length(layer, h)-1). Heads may keep different counts.
    void apply(int64_t layer, const std::vector<std::vector<int64_t>>& keep);
    // The same kept entries for every KV head (heads must be of equal length).
    void apply(int64_t layer, const std::vector<int64_t>& keep);
    void clear();
    // Back to the first n tokens, for a cache that never evicted (the full
    // cache, whose entries are its positions in order): the prefix a later
    // prompt shares. Refused for any other cache.
    void truncate(int64_t n);

    int64_t layers() const { return static_cast<int64_t>(m_layers.size()); }
    int64_t kvHeads() const { return m_kvHeads; }
    int64_t headDim() const { return m_headDim; }
    bool rerotate() const { return m_options.rerotate; }
    // Tokens appended so far: the true position of the next token.
    int64_t seqLen() const { return m_seqLen; }
    // Position at which the next token's query and key are rotated in a
    // layer: seqLen(), or the layer's cache length under rerotate.
    int64_t rotaryPosition(int64_t layer) const;
    int64_t length(int64_t layer, int64_t head) const;
    // Original (true) positions of head's entries, in cache order, which is increasing
    // position order (appends come last; apply() keeps the order).
    const std::vector<int64_t>& positions(int64_t layer, int64_t head) const;
    // Physical storage column of each of head's entries (maps captured
    // attention columns back to entries).
    const std::vector<int64_t>& columns(int64_t layer, int64_t head) const;
    // [Hkv, S] int64 true positions per storage column, -1 for padding.
    at::Tensor positionTensor(int64_t layer) const;

    // A layer's entries in cache order, for policies: entry i of head h is
    // row i; heads shorter than L are padded at the end.
    struct Entries {
        at::Tensor k, v;      // [Hkv, L, D]
        at::Tensor valid;     // [Hkv, L] bool, undefined when all heads hold L entries
        at::Tensor index;     // [Hkv, L] int64 storage column of each row (0 for padding)
    };
    Entries entries(int64_t layer) const;
    // Only the [Hkv, L] mask of Entries (undefined when every head holds L entries).
    at::Tensor entryValid(int64_t layer) const;
    // Re-orders captured attention over storage columns ([H, n, S], H a
    // multiple of Hkv) into entry order ([H, n, L], padding 0).
    at::Tensor byEntry(int64_t layer, const at::Tensor& columnsLast) const;

    // Σ kept entries × bytes per entry (K and V): what the policy holds.
    uint64_t bytesHeld() const;
    uint64_t bytesHeld(int64_t layer) const;
    // Bytes of the K/V tensors actually allocated (capacity included).
    uint64_t bytesAllocated() const;
    uint64_t bytesAllocated(int64_t layer) const;
    // The most bytesHeld() was at any moment since clear() or truncate():
    // the whole prompt for a run that reads it in one forward and then
    // compresses (prefill_once, a positional band), the budget plus the
    // token just read for one that evicts token by token.
    uint64_t peakBytesHeld() const { return m_peakEntries * entryBytes(); }
    // Bytes of the storage columns in use (padding of ragged heads included).
    uint64_t bytesInUse() const;

private:
    struct Layer {
        at::Tensor k, v;      // [Hkv, capacity, D]
        at::Tensor valid;     // [Hkv, capacity] bool; undefined until the first hole (then kept, all true while dense)
        bool dense = true;    // every column < used holds an entry in every head: attention needs no mask
        int64_t used = 0;     // columns in use
        int64_t ahead = 0;    // rows appended since the last advance()
        std::vector<std::vector<int64_t>> cols;  // per head: storage column of each entry
        std::vector<std::vector<int64_t>> pos;   // per head: true position of each entry
        // Per head: position each key is rotated at. Kept only under rerotate:
        // otherwise every key is rotated at its true position (pos).
        std::vector<std::vector<int64_t>> rot;
        std::vector<std::vector<int64_t>> holes; // per head: freed columns, reused by single-token appends
        // entryIndex() of the current layout, built on first use after a change
        // (observe and plan both need it every step).
        mutable Entries indexCache;
        mutable bool indexIdentity = false, indexValid = false;
    };
    bool placeInHoles(Layer& L, const at::Tensor& k, const at::Tensor& v, int64_t rot0);
    // apply()'s steps: a few evictions free their columns and move nothing
    // (false: too many holes, compact instead); otherwise the kept entries
    // are gathered (and re-rotated), stored from column 0 (the allocation
    // shrunk when far too large), and the bookkeeping rebuilt.
    bool evictInPlace(Layer& L, const std::vector<std::vector<int64_t>>& keep);
    std::pair<at::Tensor, at::Tensor> gatherKept(const Layer& L, const std::vector<std::vector<int64_t>>& keep,
                                                 int64_t newMax) const;
    void storeCompacted(Layer& L, const at::Tensor& k, const at::Tensor& v, int64_t newMax);
    void rebuildBookkeeping(Layer& L, const std::vector<std::vector<int64_t>>& keep, bool equalLengths);
    void reserve(Layer& L, int64_t columns);
    void checkKeep(int64_t layer, const std::vector<std::vector<int64_t>>& keep) const;
    uint64_t entryBytes() const;
    Entries entryIndex(int64_t layer, bool* identity) const;  // index + valid only

    int64_t m_kvHeads, m_headDim;
    at::ScalarType m_dtype;
    at::Device m_device;
    Rerotation m_rerotate;
    CacheOptions m_options;
    int64_t m_seqLen = 0;
    std::vector<Layer> m_layers;
    // The high-water mark of the entries held in every layer and head,
    // taken after each append (what apply() removes only lowers it).
    uint64_t m_peakEntries = 0;
    void notePeak();
    uint64_t entries() const;
    uint64_t entriesOf(const Layer& L) const;
};

}  // namespace kvlens
