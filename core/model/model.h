#pragma once
// Model: one HF checkpoint loaded for inference with a KV cache we own.
// `forward` runs a batch of new tokens (a prefill, or a single decode token)
// against a KvCache, writing the cache, and optionally captures the attention
// probabilities of every layer and query head (fp32; they cost memory).
// Internal to core and the CLI (uses ATen); the GUI talks to run/Session.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "core/cache/kv_cache.h"
#include "core/model/config.h"
#include "core/model/device.h"

namespace kvlens {

struct Weights;

// What one layer computed in a forward step, handed to an observer while it
// is still in memory (so a long prompt never holds every layer's attention).
struct LayerCapture {
    at::Tensor probs;    // [Hq, n, S] fp32 attention over the cache's storage columns (after append)
    at::Tensor queries;  // [Hq, n, D] rotated queries
    at::Tensor outputs;  // [Hq, n, D] attention outputs per head (before o_proj)
    at::Tensor keys;     // [Hkv, n, D] the rotated keys appended to the cache
    at::Tensor values;   // [Hkv, n, D] the values appended
};

// What a forward computed before attention for a run of consecutive tokens,
// every layer: enough to repeat its attention over another cache without
// reading the weights (Model::replay). The shared prefill's record
// (core/run/prompt_record.h) is a list of these.
struct KnownRows {
    int64_t from = 0;               // true position of the first row
    std::vector<at::Tensor> q;      // per layer [Hq, n, D] rotated queries
    std::vector<at::Tensor> k, v;   // per layer [Hkv, n, D] rotated keys, values
    int64_t count() const { return q.empty() ? 0 : q.front().size(1); }
};
using LayerObserver = std::function<void(int64_t layer, const LayerCapture& capture)>;

struct ForwardOptions {
    LayerObserver observer;              // called once per layer, when set
    bool captureAttention = false;
    std::vector<int64_t> captureLayers;  // empty = every layer (when capturing)
    bool lastLogitsOnly = false;         // [1, V] instead of [n, V]: prompts × large vocabularies are big
    // Per layer (empty: none): query q sees key p only when p < sinks or
    // p >= q - window, as a window/streaming policy read online would.
    std::vector<PositionBand> band;
    // Set: the rows are read one after another at every layer (a run's
    // known decode tokens in one forward, layer by layer): row i's key and
    // value are appended and it attends over the cache as rowObserver(layer,
    // i - 1, ...) left it (a policy's trim of that layer), then
    // rowObserver(layer, i, its capture) runs; `observer` is not called.
    // A row then computes what a decode step of its own would, provided
    // that what rowObserver does to a layer depends on that layer alone.
    // Not with a band, a re-rotated cache or captureAttention.
    std::function<void(int64_t layer, int64_t row, const LayerCapture& capture)> rowObserver;
};

struct ForwardResult {
    at::Tensor logits;                 // [n, V] fp32 (or [1, V])
    std::vector<at::Tensor> attention; // per layer: [Hq, n, S] fp32 over the cache's storage
                                       // columns (KvCache::columns maps them to entries);
                                       // undefined for layers not captured
};

class Model {
public:
    // Reads config.json and the safetensors weights of an HF model directory.
    // Throws FormatError / ModelError naming the file and tensor at fault,
    // ArgumentError for a bad device or dtype.
    static std::unique_ptr<Model> load(const std::filesystem::path& dir, const RunSettings& settings = {});
    // Core-internal (Weights is in model_impl.h): a model over tensors held in
    // memory, sharing their storage, so that the trainer's autograd leaves are
    // the weights forward() reads. Llama family only (rotary positions).
    static std::unique_ptr<Model> fromWeights(const ModelConfig& cfg, const Weights& weights, at::Device device);
    ~Model();
    // The same model on another device and/or dtype (a copy of the weights):
    // how a synthetic bench model reaches the GPU. ArgumentError as load().
    std::unique_ptr<Model> on(const RunSettings& settings) const;
    // The what-if of KV-head sharing (issue 22): the same model with its KV
    // heads merged to `kvHeads` (a divisor of its own) by mean-pooling the
    // K and V projections of each run of consecutive heads (the GQA/MQA
    // conversion of Ainslie et al. 2023, before any uptraining). A model not
    // trained for it degrades. ArgumentError for another count.
    std::unique_ptr<Model> withMergedKvHeads(int64_t kvHeads) const;
    // The what-if of layers sharing KV (CLA, Brandon et al. 2024): every run
    // of `every` consecutive layers reads the K/V its first layer computes
    // (from that layer's input); the others' K/V projections go unused. Each
    // layer still keeps its own cache of those K/V, so eviction acts per
    // layer as before and the memory saved is what the KV memory view
    // computes, not what this model allocates. With re-rotated caches the
    // shared keys carry the first layer's cache positions. A model not
    // trained for it degrades. ArgumentError for `every` < 1 or above the
    // layer count; 1 is the model itself.
    std::unique_ptr<Model> withSharedLayerKv(int64_t every) const;
    // Layer l reads the K/V of layer kvSourceLayer(l) (l itself but in the what-if).
    int64_t kvSourceLayer(int64_t layer) const;
    // Layer l's attention output projection W_O, [hidden, Hq*D] (what
    // CriticalKV's value norms read).
    at::Tensor outputProjection(int64_t layer) const;

    const ModelConfig& config() const;
    const std::filesystem::path& directory() const;
    at::Device device() const;
    at::ScalarType dtype() const;
    int64_t parameterCount() const;
    bool tiedEmbeddings() const;  // lm_head shares the embedding matrix

    KvCache newCache(CacheOptions options = {}) const;
    // The model's rotary embedding as a function (x [H, n, D] turned by
    // positions [n] or [H, n], negative to undo), empty without one (GPT-2).
    Rerotation rotation() const;
    ForwardResult forward(const std::vector<int64_t>& tokens, KvCache& cache, const ForwardOptions& options = {}) const;

    // Several runs' tokens in one forward (the lockstep Session's decode
    // step): every projection and the MLP are computed once over all rows,
    // so the weights are read once a step; attention is each segment's own,
    // over its own cache, with its own options. The results are those of
    // forward() per segment (bit for bit while the rows stay within
    // rowLinear's streamed kernel, core/model/row_linear.h).
    struct Segment {
        const std::vector<int64_t>* tokens = nullptr;
        KvCache* cache = nullptr;
        const ForwardOptions* options = nullptr;
    };
    std::vector<ForwardResult> forward(const std::vector<Segment>& segments) const;

    // The attention half of a forward whose queries, keys and values are
    // known (a recorded prefill): appends rows.k/v to `cache` (which must
    // hold rows.from tokens, not re-rotated), attends, calls the observer
    // per layer, advances the cache. No weight is read and no logits come
    // out. With the same cache layout and rows it computes what forward()
    // did, bit for bit (the same attention code).
    void replay(const KnownRows& rows, KvCache& cache, const ForwardOptions& options) const;

    struct Impl;

private:
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> sharingImpl() const;  // a what-if's start: this model's config and tensors, shared
    std::unique_ptr<Impl> m;
};

}  // namespace kvlens
