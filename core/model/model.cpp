#include "core/model/model.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "core/model/device_internal.h"
#include "core/model/model_impl.h"

namespace kvlens {
namespace fs = std::filesystem;
namespace {

int64_t countParameters(const Weights& w, bool tied) {
    int64_t params = w.embed.numel() + w.finalNorm.numel();
    if (w.posEmbed.defined()) params += w.posEmbed.numel();
    if (w.finalNormBias.defined()) params += w.finalNormBias.numel();
    if (!tied) params += w.lmHead.numel();
    for (const auto& lw : w.layers)
        for (const at::Tensor* t : {&lw.attnNorm, &lw.attnNormBias, &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.bq, &lw.bk,
                                    &lw.bv, &lw.bo, &lw.qNorm, &lw.kNorm, &lw.mlpNorm, &lw.mlpNormBias, &lw.wGate,
                                    &lw.wUp, &lw.bUp, &lw.wDown, &lw.bDown})
            if (t->defined()) params += t->numel();
    return params;
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : m(std::move(impl)) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const fs::path& dir, const RunSettings& settings) {
    if (!fs::is_directory(dir)) throw FormatError(dir.string(), "not a model directory (does not exist or is not a folder)");
    auto impl = std::make_unique<Impl>();
    impl->dir = dir;
    impl->cfg = loadConfig(dir / "config.json");
    impl->device = resolveDevice(settings.device);
    impl->dtype = resolveDtype(settings.dtype, impl->device);
    applyThreads(settings.threads);
    impl->w = loadWeights(dir, impl->cfg, impl->dtype, impl->device, &impl->tied);
    if (impl->cfg.usesRope()) impl->rope = std::make_unique<Rope>(impl->cfg, impl->device);

    impl->params = countParameters(impl->w, impl->tied);
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

std::unique_ptr<Model> Model::fromWeights(const ModelConfig& cfg, const Weights& weights, at::Device device) {
    if (!cfg.usesRope()) throw ArgumentError("Model::fromWeights: only rotary (llama-family) models");
    auto impl = std::make_unique<Impl>();
    impl->cfg = cfg;
    impl->device = device;
    impl->dtype = weights.embed.scalar_type();
    impl->w = weights;
    impl->tied = weights.lmHead.is_same(weights.embed);
    impl->rope = std::make_unique<Rope>(impl->cfg, impl->device);
    impl->params = countParameters(impl->w, impl->tied);
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

std::unique_ptr<Model> Model::on(const RunSettings& settings) const {
    const c10::Device device = resolveDevice(settings.device);
    const c10::ScalarType dtype = resolveDtype(settings.dtype, device);
    applyThreads(settings.threads);
    probeKernels(dtype, device);
    auto to = [&](const at::Tensor& t) { return t.defined() ? t.to(device, dtype) : t; };
    auto impl = std::make_unique<Impl>();
    impl->dir = m->dir;
    impl->cfg = m->cfg;
    impl->device = device;
    impl->dtype = dtype;
    const Weights& w = m->w;
    Weights& o = impl->w;
    o.embed = to(w.embed);
    o.posEmbed = to(w.posEmbed);
    o.finalNorm = to(w.finalNorm);
    o.finalNormBias = to(w.finalNormBias);
    o.lmHead = m->tied ? o.embed : to(w.lmHead);
    for (const LayerWeights& l : w.layers)
        o.layers.push_back({to(l.attnNorm), to(l.attnNormBias), to(l.wq), to(l.wk), to(l.wv), to(l.wo), to(l.bq),
                            to(l.bk), to(l.bv), to(l.bo), to(l.qNorm), to(l.kNorm), to(l.mlpNorm), to(l.mlpNormBias),
                            to(l.wGate), to(l.wUp), to(l.bUp), to(l.wDown), to(l.bDown)});
    impl->tied = m->tied;
    if (impl->cfg.usesRope()) impl->rope = std::make_unique<Rope>(impl->cfg, impl->device);
    impl->params = m->params;
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

std::unique_ptr<Model> Model::withMergedKvHeads(int64_t kvHeads) const {
    const ModelConfig& c = m->cfg;
    if (kvHeads < 1 || kvHeads > c.numKvHeads || c.numKvHeads % kvHeads != 0)
        throw ArgumentError("KV heads can be merged to a divisor of the model's " + std::to_string(c.numKvHeads) +
                            " KV heads (asked for " + std::to_string(kvHeads) + ")");
    const int64_t r = c.numKvHeads / kvHeads, D = c.headDim;
    // [Hkv*D, ...] -> mean over each run of r consecutive heads -> [kvHeads*D, ...]
    auto pool = [&](const at::Tensor& t) {
        if (!t.defined()) return t;
        std::vector<int64_t> shape{kvHeads, r, D};
        for (int64_t i = 1; i < t.dim(); ++i) shape.push_back(t.size(i));
        std::vector<int64_t> out{kvHeads * D};
        for (int64_t i = 1; i < t.dim(); ++i) out.push_back(t.size(i));
        return t.reshape(shape).to(at::kFloat).mean(1).to(t.scalar_type()).reshape(out).contiguous();
    };
    auto impl = sharingImpl();
    impl->cfg.numKvHeads = kvHeads;
    for (LayerWeights& l : impl->w.layers) {
        l.wk = pool(l.wk);
        l.wv = pool(l.wv);
        l.bk = pool(l.bk);
        l.bv = pool(l.bv);
    }
    if (impl->cfg.usesRope()) impl->rope = std::make_unique<Rope>(impl->cfg, impl->device);
    impl->params = countParameters(impl->w, impl->tied);
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

std::unique_ptr<Model::Impl> Model::sharingImpl() const {
    auto impl = std::make_unique<Impl>();
    impl->dir = m->dir;
    impl->cfg = m->cfg;
    impl->device = m->device;
    impl->dtype = m->dtype;
    impl->w = m->w;  // shares every tensor
    impl->tied = m->tied;
    impl->params = m->params;
    impl->kvSource = m->kvSource;
    return impl;
}

std::unique_ptr<Model> Model::withSharedLayerKv(int64_t every) const {
    const int64_t L = m->cfg.numLayers;
    if (every < 1 || every > L)
        throw ArgumentError("layers can share KV in groups of 1 to " + std::to_string(L) + " (the model's layers; asked for " +
                            std::to_string(every) + ")");
    auto impl = sharingImpl();
    impl->kvSource.resize(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) impl->kvSource[static_cast<size_t>(l)] = kvSourceLayer(l / every * every);
    if (impl->cfg.usesRope()) impl->rope = std::make_unique<Rope>(impl->cfg, impl->device);
    return std::unique_ptr<Model>(new Model(std::move(impl)));
}

int64_t Model::kvSourceLayer(int64_t layer) const {
    return m->kvSource.empty() ? layer : m->kvSource.at(static_cast<size_t>(layer));
}

at::Tensor Model::outputProjection(int64_t layer) const { return m->w.layers.at(static_cast<size_t>(layer)).wo; }

const ModelConfig& Model::config() const { return m->cfg; }
const fs::path& Model::directory() const { return m->dir; }
at::Device Model::device() const { return m->device; }
at::ScalarType Model::dtype() const { return m->dtype; }
int64_t Model::parameterCount() const { return m->params; }
bool Model::tiedEmbeddings() const { return m->tied; }

KvCache Model::newCache(CacheOptions options) const {
    if (options.rerotate && !m->rope)
        throw ArgumentError(std::string("rerotate needs rotary position embeddings; ") + familyName(m->cfg.family) +
                            " has learned absolute positions");
    return KvCache(m->cfg.numLayers, m->cfg.numKvHeads, m->cfg.headDim, m->dtype, m->device, rotation(), options);
}

Rerotation Model::rotation() const {
    Rerotation rotate;
    if (const Rope* rope = m->rope.get())
        rotate = [rope](const at::Tensor& x, const at::Tensor& positions) { return rope->apply(x, positions); };
    return rotate;
}

}  // namespace kvlens
