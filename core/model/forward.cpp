// The forward pass: one code path for the Llama family (llama, mistral,
// qwen2, qwen3 differ only in flags) and one for GPT-2, sharing attention
// over the KvCache.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/host_paths.h"
#include "core/model/host_rows.h"
#include "core/model/model_impl.h"
#include "core/model/row_linear.h"

namespace kvlens {
namespace {

at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
    // A decode step's six small ATen ops per norm (two norms and two
    // rotations a layer) cost a real-size model's step a few per cent: on
    // CPU f32 the mean square by ATen, the rest one host loop.
    if (onHostF32(x) && x.is_contiguous() && weight.scalar_type() == at::kFloat && weight.is_contiguous() &&
        !(at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()))) {  // training: autograd's
        const at::Tensor meanSquare = x.pow(2).mean(-1).contiguous();  // ATen's own sum order
        at::Tensor out = at::empty_like(x);
        const int64_t E = x.size(-1);
        hostRmsNormRows(x.data_ptr<float>(), meanSquare.data_ptr<float>(), weight.data_ptr<float>(), x.numel() / E, E,
                        static_cast<float>(eps), out.data_ptr<float>());
        return out;
    }
    // HF: normalise in fp32, cast back, then scale.
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return weight * normed.to(x.scalar_type());
}

// [n, H*D] -> [H, n, D]
at::Tensor splitHeads(const at::Tensor& x, int64_t heads, int64_t dim) {
    return x.view({x.size(0), heads, dim}).transpose(0, 1);
}

struct AttentionInput {
    at::Tensor q;                 // [Hq, n, D] rotated
    KvCache::LayerView kv;        // [Hkv, S, D]
    at::Tensor keyPositions;      // [Hkv, S] true positions (sliding window only), or undefined
    int64_t firstQueryPosition;   // true position of q[:, 0]
    std::optional<int64_t> slidingWindow;
    const PositionBand* band = nullptr;  // a positional policy's visibility (ForwardOptions::band)
};

// A positional policy's band over the true positions: causal, and key p
// visible to query q when p < sinks or p >= q - window; padding invisible.
at::Tensor bandMask(const AttentionInput& in, int64_t n, int64_t S) {
    auto longs = at::TensorOptions().dtype(at::kLong).device(in.q.device());
    const at::Tensor qpos = at::arange(n, longs).add_(in.firstQueryPosition).view({1, n, 1});
    const at::Tensor kpos = in.keyPositions.narrow(1, 0, S).unsqueeze(1);  // [Hkv, 1, S]
    at::Tensor allowed = (kpos >= 0) & (kpos <= qpos) & ((kpos < in.band->sinks) | (kpos >= qpos - in.band->window));
    if (in.kv.valid.defined()) allowed = allowed & in.kv.valid.narrow(1, 0, S).unsqueeze(1);
    return allowed;
}

// Which (query, key) pairs may attend: [Hkv or 1, n, S] bool, or undefined
// when all may (a decode step over a dense cache).
at::Tensor attentionMask(const AttentionInput& in, int64_t n, int64_t S) {
    const bool window = in.slidingWindow && in.firstQueryPosition + n > *in.slidingWindow;
    if (in.band) return bandMask(in, n, S);
    if (n == 1 && !in.kv.valid.defined() && !window) return at::Tensor();
    auto opts = at::TensorOptions().device(in.q.device());
    if (n == 1) {
        // One query sees every valid column, its own key included (which may
        // sit in a reused column rather than the last one).
        at::Tensor allowed = in.kv.valid.defined() ? in.kv.valid.unsqueeze(1) : at::ones({1, 1, S}, opts.dtype(at::kBool));
        if (window) {
            at::Tensor qpos = at::full({1, 1, 1}, in.firstQueryPosition, opts.dtype(at::kLong));
            allowed = allowed & (in.keyPositions.unsqueeze(1) > qpos - *in.slidingWindow);
        }
        return allowed;
    }
    // Old entries: visible when valid. New entries: causal among themselves.
    at::Tensor old = in.kv.valid.defined() ? in.kv.valid.narrow(1, 0, S - n).unsqueeze(1).expand({-1, n, -1})
                                           : at::ones({1, n, S - n}, opts.dtype(at::kBool));
    at::Tensor causal = at::ones({n, n}, opts.dtype(at::kBool)).tril().unsqueeze(0).expand({old.size(0), n, n});
    at::Tensor allowed = at::cat({old, causal}, -1);
    if (window) {
        at::Tensor qpos = at::arange(n, opts.dtype(at::kLong)).add_(in.firstQueryPosition).view({1, n, 1});
        allowed = allowed & (in.keyPositions.unsqueeze(1) > qpos - *in.slidingWindow);
    }
    return allowed;
}

// A decode step's attention on the CPU in f32 (one query per head): the
// scores by host loops into one tensor, one softmax, the weighted sum of
// the values by host loops: two ATen ops per run and layer instead of a
// dozen small ones (a lockstep step of six runs at SmolLM2-135M's shape
// spent 13.5 ms in those). Masks as attentionMask() for one query: invalid
// columns, keys outside the model's sliding window. Not for bands (they are
// prompt reads) or other dtypes and devices: the tensor code below.
bool decodesOnHost(const AttentionInput& in) {
    return in.q.size(1) == 1 && !in.band && onHostF32(in.q) && in.kv.k.is_cpu() &&
           in.kv.k.scalar_type() == at::kFloat && in.kv.v.scalar_type() == at::kFloat && in.kv.k.stride(2) == 1 &&
           in.kv.v.stride(2) == 1 && (!in.kv.valid.defined() || in.kv.valid.stride(1) == 1);
}

// The two loops of a decode step's host attention, compiled for AVX-512
// and AVX2+FMA as well as the baseline, the CPU's best chosen at load time
// (the build targets plain x86-64, whose SSE2 code ran these at 4 floats a
// time: 15 % of a lockstep step of six runs at SmolLM2-135M's shape).
struct HostHeads {
    int64_t kvHeads, group, keys, dim;
};

// Scores of every query head on every key: [Hq, S], -inf where not visible.
KVLENS_HOST_CLONES void hostScores(const HostHeads& n, const float* qp, const float* kp, int64_t k0, int64_t k1,
                                   const bool* valid, int64_t valid0, const int64_t* kpos, int64_t oldest, float scale,
                                   float* sp) {
    const int64_t G = n.group, S = n.keys, D = n.dim;
    for (int64_t h = 0; h < n.kvHeads; ++h)
        for (int64_t s = 0; s < S; ++s) {
            const bool visible = (!valid || valid[h * valid0 + s]) && (!kpos || kpos[h * S + s] > oldest);
            const float* kr = kp + h * k0 + s * k1;
            for (int64_t g = 0; g < G; ++g) {
                const float* qr = qp + (h * G + g) * D;
                float dot = 0;
                #pragma omp simd reduction(+ : dot)
                for (int64_t d = 0; d < D; ++d) dot += qr[d] * kr[d];
                sp[(h * G + g) * S + s] = visible ? dot * scale : -INFINITY;
            }
        }
}

// out[h] += p[h, s] * v[h / G, s] over the keys (out zeroed by the caller).
KVLENS_HOST_CLONES void hostWeightedValues(const HostHeads& n, const float* pp, const float* vp, int64_t v0,
                                           int64_t v1, float* op) {
    const int64_t G = n.group, S = n.keys, D = n.dim;
    for (int64_t h = 0; h < n.kvHeads; ++h)
        for (int64_t s = 0; s < S; ++s) {
            const float* vr = vp + h * v0 + s * v1;
            for (int64_t g = 0; g < G; ++g) {
                const float p = pp[(h * G + g) * S + s];
                if (p == 0.0f) continue;  // masked (or underflowed): adds nothing
                float* o = op + (h * G + g) * D;
                #pragma omp simd
                for (int64_t d = 0; d < D; ++d) o[d] += p * vr[d];
            }
        }
}

at::Tensor attendOneQueryOnHost(const AttentionInput& in, at::Tensor* probsOut) {
    const int64_t Hq = in.q.size(0), D = in.q.size(2), Hkv = in.kv.k.size(0), S = in.kv.k.size(1), G = Hq / Hkv;
    const at::Tensor q = in.q.contiguous();
    const float* qp = q.data_ptr<float>();
    const float *kp = in.kv.k.data_ptr<float>(), *vp = in.kv.v.data_ptr<float>();
    const int64_t k0 = in.kv.k.stride(0), k1 = in.kv.k.stride(1), v0 = in.kv.v.stride(0), v1 = in.kv.v.stride(1);
    const bool* valid = in.kv.valid.defined() ? in.kv.valid.data_ptr<bool>() : nullptr;
    const int64_t valid0 = valid ? in.kv.valid.stride(0) : 0;
    const bool window = in.slidingWindow && in.firstQueryPosition + 1 > *in.slidingWindow;
    at::Tensor keyPos;
    if (window) keyPos = in.keyPositions.contiguous();
    const int64_t* kpos = window ? keyPos.data_ptr<int64_t>() : nullptr;
    const int64_t oldest = window ? in.firstQueryPosition - *in.slidingWindow : 0;  // keys at or before it are out
    const float scale = static_cast<float>(1.0 / std::sqrt(double(D)));
    at::Tensor scores = at::empty({Hq, 1, S}, q.options());
    const HostHeads heads{Hkv, G, S, D};
    hostScores(heads, qp, kp, k0, k1, valid, valid0, kpos, oldest, scale, scores.data_ptr<float>());
    const at::Tensor probs = at::softmax(scores, -1);
    at::Tensor out = at::zeros({Hq, 1, D}, q.options());
    hostWeightedValues(heads, probs.data_ptr<float>(), vp, v0, v1, out.data_ptr<float>());
    if (probsOut) *probsOut = probs;
    return out;
}

// Grouped-query attention without expanding the cache to Hq heads: query
// head h reads KV head h / G (HF's repeat_kv order).
at::Tensor attend(const AttentionInput& in, at::Tensor* probsOut) {
    if (decodesOnHost(in)) return attendOneQueryOnHost(in, probsOut);
    const int64_t Hq = in.q.size(0), n = in.q.size(1), D = in.q.size(2);
    const int64_t Hkv = in.kv.k.size(0), S = in.kv.k.size(1), G = Hq / Hkv;
    at::Tensor qg = in.q.reshape({Hkv, G * n, D});
    at::Tensor scores = at::matmul(qg, in.kv.k.transpose(1, 2)).to(at::kFloat).mul_(1.0 / std::sqrt(double(D)));
    at::Tensor mask = attentionMask(in, n, S);
    if (mask.defined())
        scores.view({Hkv, G, n, S}).masked_fill_(mask.logical_not().unsqueeze(1), -INFINITY);  // a fresh tensor: in place
    at::Tensor probs = at::softmax(scores, -1);
    if (probsOut) *probsOut = probs.view({Hq, n, S});
    return at::matmul(probs.to(in.kv.v.scalar_type()), in.kv.v).view({Hq, n, D});
}

struct Projected {
    at::Tensor q, k, v;  // [Hq, rows, D], [Hkv, rows, D] x2 (k, v undefined when the layer reads another's)
};

// A layer's projections of every row, q, k and v in one pass of threads.
Projected project(const ModelConfig& c, const LayerWeights& lw, const at::Tensor& h, bool ownKv) {
    if (!ownKv) return {splitHeads(rowLinear(h, lw.wq, lw.bq), c.numHeads, c.headDim), {}, {}};
    const auto qkv = rowLinears(h, {{lw.wq, lw.bq}, {lw.wk, lw.bk}, {lw.wv, lw.bv}});
    return {splitHeads(qkv[0], c.numHeads, c.headDim), splitHeads(qkv[1], c.numKvHeads, c.headDim),
            splitHeads(qkv[2], c.numKvHeads, c.headDim)};
}

// A layer's MLP on x, its norm included: GPT-2's GELU or the gated SiLU
// (gate and up in one pass of threads).
at::Tensor mlp(const ModelConfig& c, const LayerWeights& lw, const at::Tensor& x) {
    if (c.family == Family::Gpt2) {
        const at::Tensor h = at::layer_norm(x, {c.hiddenSize}, lw.mlpNorm, lw.mlpNormBias, c.normEps);
        const char* approx = c.activation == "gelu" ? "none" : "tanh";
        return rowLinear(at::gelu(rowLinear(h, lw.wUp, lw.bUp), approx), lw.wDown, lw.bDown);
    }
    const at::Tensor h = rmsNorm(x, lw.mlpNorm, c.normEps);
    const at::Tensor noBias;
    const auto gateUp = rowLinears(h, {{lw.wGate, noBias}, {lw.wUp, noBias}});
    return rowLinear(at::silu(gateUp[0]) * gateUp[1], lw.wDown);
}

bool wantsCapture(const ForwardOptions& o, int64_t layer) {
    if (!o.captureAttention) return false;
    if (o.captureLayers.empty()) return true;
    return std::find(o.captureLayers.begin(), o.captureLayers.end(), layer) != o.captureLayers.end();
}

}  // namespace

ForwardResult Model::forward(const std::vector<int64_t>& tokens, KvCache& cache, const ForwardOptions& opt) const {
    return std::move(forward(std::vector<Segment>{Segment{&tokens, &cache, &opt}}).front());
}

void Model::replay(const KnownRows& rows, KvCache& cache, const ForwardOptions& opt) const {
    const ModelConfig& c = m->cfg;
    const int64_t n = rows.count(), pos0 = rows.from;
    if (static_cast<int64_t>(rows.q.size()) != c.numLayers || rows.k.size() != rows.q.size() || rows.v.size() != rows.q.size())
        throw ArgumentError("replay: rows for " + std::to_string(rows.q.size()) + " layers, the model has " +
                            std::to_string(c.numLayers));
    if (cache.seqLen() != pos0 || cache.rerotate())
        throw ArgumentError("replay: rows from position " + std::to_string(pos0) + " over a cache of " +
                            std::to_string(cache.seqLen()) + " tokens" + (cache.rerotate() ? " (re-rotated)" : ""));
    for (int64_t l = 0; l < c.numLayers; ++l) {
        AttentionInput in{rows.q[l], cache.append(l, rows.k[l], rows.v[l]), at::Tensor(), pos0, c.slidingWindow};
        if (c.slidingWindow && pos0 + n > *c.slidingWindow) in.keyPositions = cache.positionTensor(l);
        at::Tensor probs;
        const at::Tensor o = attend(in, opt.observer ? &probs : nullptr);
        if (opt.observer) opt.observer(l, LayerCapture{probs, rows.q[l], o, rows.k[l], rows.v[l]});
    }
    cache.advance(n);
}

std::vector<ForwardResult> Model::forward(const std::vector<Segment>& segments) const {
    const ModelConfig& c = m->cfg;
    const Weights& w = m->w;
    const size_t R = segments.size();
    if (R == 0) throw ArgumentError("forward: no segments");
    // Rows of segment r: [first[r], first[r] + count[r]) of the stacked input.
    std::vector<int64_t> first(R), count(R), pos0(R), ids, positions;
    int64_t rows = 0;
    for (size_t r = 0; r < R; ++r) {
        const Segment& seg = segments[r];
        const int64_t n = static_cast<int64_t>(seg.tokens->size());
        if (n == 0) throw ArgumentError("forward: no tokens");
        for (int64_t t : *seg.tokens)
            if (t < 0 || t >= c.vocabSize)
                throw ArgumentError("token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                    std::to_string(c.vocabSize) + ")");
        if (seg.options->rowObserver && (!seg.options->band.empty() || seg.cache->rerotate() || seg.options->captureAttention))
            throw ArgumentError("forward: rows read one after another cannot have a band, a re-rotated cache or captured attention");
        pos0[r] = seg.cache->seqLen();
        if (c.family == Family::Gpt2 && pos0[r] + n > c.maxPositions)
            throw ArgumentError("gpt2 has learned positions for " + std::to_string(c.maxPositions) +
                                " tokens; this run needs " + std::to_string(pos0[r] + n));
        first[r] = rows;
        count[r] = n;
        rows += n;
        ids.insert(ids.end(), seg.tokens->begin(), seg.tokens->end());
        for (int64_t i = 0; i < n; ++i) positions.push_back(pos0[r] + i);
    }
    auto longOpts = at::TensorOptions().dtype(at::kLong).device(m->device);
    auto onDevice = [&](const std::vector<int64_t>& v) { return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(m->device); };
    at::Tensor x = at::embedding(w.embed, onDevice(ids));  // [rows, E]
    if (w.posEmbed.defined()) x = x + at::embedding(w.posEmbed, onDevice(positions));

    std::vector<ForwardResult> results(R);
    for (auto& res : results) res.attention.resize(c.numLayers);
    const bool gpt2 = c.family == Family::Gpt2;
    // Rotary angles of every row, computed again only when a layer rotates
    // from other positions than the one before (re-rotated caches).
    Rope::Angles angles;
    std::vector<int64_t> rotary(static_cast<size_t>(rows)), anglesFor;
    std::vector<at::Tensor> outputs(R);
    // The layer-sharing what-if: the K/V of a source layer, kept for the
    // layers after it that read them (empty otherwise).
    std::vector<std::pair<at::Tensor, at::Tensor>> sharedKv(m->kvSource.empty() ? 0 : static_cast<size_t>(c.numLayers));
    for (int64_t l = 0; l < c.numLayers; ++l) {
        const LayerWeights& lw = w.layers[l];
        at::Tensor h = gpt2 ? at::layer_norm(x, {c.hiddenSize}, lw.attnNorm, lw.attnNormBias, c.normEps)
                            : rmsNorm(x, lw.attnNorm, c.normEps);
        const int64_t source = kvSourceLayer(l);
        // Every run's rows at once: projections, q/k norms and rotation are
        // row by row, so each row's values are those of its run alone.
        auto [qs, ks, vs] = project(c, lw, h, source == l);
        if (c.qkNorm) {
            qs = rmsNorm(qs, lw.qNorm, c.normEps);
            if (source == l) ks = rmsNorm(ks, lw.kNorm, c.normEps);
        }
        if (m->rope) {
            for (size_t r = 0; r < R; ++r) {
                const int64_t r0 = segments[r].cache->rotaryPosition(l);
                for (int64_t i = 0; i < count[r]; ++i) rotary[static_cast<size_t>(first[r] + i)] = r0 + i;
            }
            if (rotary != anglesFor) {
                angles = m->rope->angles(onDevice(rotary));
                anglesFor = rotary;
            }
            qs = Rope::apply(qs, angles);
            if (source == l) ks = Rope::apply(ks, angles);
        }
        if (!sharedKv.empty()) {
            if (source == l) sharedKv[static_cast<size_t>(l)] = {ks, vs};
            else std::tie(ks, vs) = sharedKv.at(static_cast<size_t>(source));
        }
        for (size_t r = 0; r < R; ++r) {
            const Segment& seg = segments[r];
            const ForwardOptions& opt = *seg.options;
            KvCache& cache = *seg.cache;
            const int64_t n = count[r];
            const at::Tensor q = qs.narrow(1, first[r], n), k = ks.narrow(1, first[r], n), v = vs.narrow(1, first[r], n);
            if (opt.rowObserver) {
                // Row by row: each attends over the cache the previous row's observer left.
                std::vector<at::Tensor> rowOutputs;
                for (int64_t i = 0; i < n; ++i) {
                    const at::Tensor qi = q.narrow(1, i, 1), ki = k.narrow(1, i, 1), vi = v.narrow(1, i, 1);
                    AttentionInput in{qi, cache.append(l, ki, vi), at::Tensor(), pos0[r] + i, c.slidingWindow};
                    if (c.slidingWindow && pos0[r] + i + 1 > *c.slidingWindow) in.keyPositions = cache.positionTensor(l);
                    at::Tensor probs;
                    const at::Tensor o = attend(in, &probs);  // [Hq, 1, D]
                    opt.rowObserver(l, i, LayerCapture{probs, qi, o, ki, vi});
                    rowOutputs.push_back(o);
                }
                outputs[r] = at::cat(rowOutputs, 1).transpose(0, 1).reshape({n, c.numHeads * c.headDim});
                continue;
            }
            AttentionInput in{q, cache.append(l, k, v), at::Tensor(), pos0[r], c.slidingWindow};
            if (!opt.band.empty()) in.band = &opt.band.at(static_cast<size_t>(l));
            if ((c.slidingWindow && pos0[r] + n > *c.slidingWindow) || in.band) in.keyPositions = cache.positionTensor(l);
            at::Tensor probs;
            const bool keep = wantsCapture(opt, l);
            at::Tensor o = attend(in, keep || opt.observer ? &probs : nullptr);  // [Hq, n, D]
            if (keep) results[r].attention[l] = probs;
            if (opt.observer) opt.observer(l, LayerCapture{probs, q, o, k, v});
            outputs[r] = o.transpose(0, 1).reshape({n, c.numHeads * c.headDim});
        }
        x = x + rowLinear(R == 1 ? outputs[0] : at::cat(outputs, 0), lw.wo, lw.bo);

        x = x + mlp(c, lw, x);
    }
    // The head reads only the rows whose logits are wanted (a prompt's last
    // one when lastLogitsOnly: prompts × large vocabularies are big).
    std::vector<int64_t> headRows;
    for (size_t r = 0; r < R; ++r) {
        segments[r].cache->advance(count[r]);
        const int64_t from = segments[r].options->lastLogitsOnly ? first[r] + count[r] - 1 : first[r];
        for (int64_t i = from; i < first[r] + count[r]; ++i) headRows.push_back(i);
    }
    if (static_cast<int64_t>(headRows.size()) < rows)
        x = headRows.size() == 1 ? x.narrow(0, headRows[0], 1) : x.index_select(0, onDevice(headRows));
    x = gpt2 ? at::layer_norm(x, {c.hiddenSize}, w.finalNorm, w.finalNormBias, c.normEps)
             : rmsNorm(x, w.finalNorm, c.normEps);
    const at::Tensor logits = rowLinear(x, w.lmHead).to(at::kFloat);
    int64_t offset = 0;
    for (size_t r = 0; r < R; ++r) {
        const int64_t n = segments[r].options->lastLogitsOnly ? 1 : count[r];
        results[r].logits = R == 1 ? logits : logits.narrow(0, offset, n);
        offset += n;
    }
    return results;
}

}  // namespace kvlens
