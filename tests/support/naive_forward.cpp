// The reference forward: deliberately naive. Every matrix product is a loop,
// every accumulation is in double, every formula is written from the HF
// modeling files' definitions (modeling_llama / mistral / qwen2 / qwen3 /
// gpt2), not from core/model.
#include "tests/support/naive_forward.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kvlens::test {

int64_t HostTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {

using Vec = std::vector<double>;
constexpr double kPi = 3.14159265358979323846;

const HostTensor& weight(const HostWeights& w, const std::string& name, std::vector<int64_t> shape) {
    auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("naive: missing weight " + name);
    if (it->second.shape != shape) throw std::runtime_error("naive: unexpected shape of " + name);
    return it->second;
}
bool hasWeight(const HostWeights& w, const std::string& name) { return w.count(name) != 0; }

// y = W x (+ b), W stored [out, in] (nn.Linear).
Vec linearOutIn(const HostTensor& W, const HostTensor* b, const Vec& x) {
    const int64_t out = W.shape[0], in = W.shape[1];
    Vec y(out, 0.0);
    for (int64_t o = 0; o < out; ++o) {
        double s = b ? double(b->data[o]) : 0.0;
        for (int64_t i = 0; i < in; ++i) s += double(W.data[o * in + i]) * x[i];
        y[o] = s;
    }
    return y;
}

// y = x W + b, W stored [in, out] (GPT-2's Conv1D).
Vec conv1d(const HostTensor& W, const HostTensor& b, const Vec& x) {
    const int64_t in = W.shape[0], out = W.shape[1];
    Vec y(out, 0.0);
    for (int64_t o = 0; o < out; ++o) {
        double s = b.data[o];
        for (int64_t i = 0; i < in; ++i) s += double(W.data[i * out + o]) * x[i];
        y[o] = s;
    }
    return y;
}

Vec rmsNorm(const Vec& x, const float* w, double eps) {
    double ms = 0;
    for (double v : x) ms += v * v;
    ms /= double(x.size());
    const double r = 1.0 / std::sqrt(ms + eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = double(w[i]) * (x[i] * r);
    return y;
}

Vec layerNorm(const Vec& x, const HostTensor& w, const HostTensor& b, double eps) {
    double mean = 0;
    for (double v : x) mean += v;
    mean /= double(x.size());
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean);
    var /= double(x.size());  // biased, as torch.nn.LayerNorm
    const double r = 1.0 / std::sqrt(var + eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * r * double(w.data[i]) + double(b.data[i]);
    return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

double geluNew(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
}

Vec slice(const Vec& x, int64_t begin, int64_t count) { return Vec(x.begin() + begin, x.begin() + begin + count); }

double dot(const Vec& a, const Vec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

struct TokenQKV {
    std::vector<Vec> q;  // [heads][D] before RoPE
    std::vector<Vec> k;  // [kvHeads][D] before RoPE
    std::vector<Vec> v;  // [kvHeads][D]
};

}  // namespace

std::vector<double> naiveInverseFrequencies(const NaiveConfig& c) {
    const int64_t D = c.headDim;
    std::vector<double> inv(D / 2);
    for (int64_t i = 0; i < D / 2; ++i) inv[i] = 1.0 / std::pow(c.ropeTheta, double(2 * i) / double(D));
    if (c.ropeType == "linear") {
        // Linear interpolation: positions divided by the factor.
        for (double& f : inv) f /= c.ropeFactor;
    } else if (c.ropeType == "llama3") {
        // Llama 3.1: wavelengths longer than original/low are divided by the
        // factor, shorter than original/high are kept, and in between the
        // two are blended with weight s = (original/wavelen - low) / (high - low).
        for (double& f : inv) {
            const double wavelen = 2.0 * kPi / f;
            const double lowWavelen = double(c.originalMaxPositions) / c.lowFreqFactor;
            const double highWavelen = double(c.originalMaxPositions) / c.highFreqFactor;
            if (wavelen > lowWavelen) {
                f = f / c.ropeFactor;
            } else if (wavelen >= highWavelen) {
                const double s = (double(c.originalMaxPositions) / wavelen - c.lowFreqFactor) /
                                 (c.highFreqFactor - c.lowFreqFactor);
                f = (1.0 - s) * (f / c.ropeFactor) + s * f;
            }
        }
    } else if (c.ropeType != "default") {
        throw std::runtime_error("naive: unknown rope type " + c.ropeType);
    }
    return inv;
}

std::vector<double> naiveRope(const std::vector<double>& x, double position, const std::vector<double>& inv) {
    // HF rotate_half: pairs are (i, i + D/2);
    // out[i] = x[i] cos - x[i+D/2] sin, out[i+D/2] = x[i+D/2] cos + x[i] sin.
    const size_t half = inv.size();
    std::vector<double> out(x.size());
    for (size_t i = 0; i < half; ++i) {
        const double a = position * inv[i];
        const double c = std::cos(a), s = std::sin(a);
        out[i] = x[i] * c - x[i + half] * s;
        out[i + half] = x[i + half] * c + x[i] * s;
    }
    return out;
}

NaiveResult naiveForward(const NaiveConfig& c, const HostWeights& W, const std::vector<int64_t>& tokens,
                         const NaiveHooks& hooks) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    const int64_t E = c.hidden, D = c.headDim, Hq = c.heads, Hkv = c.kvHeads, F = c.intermediate, V = c.vocab;
    const int64_t G = Hq / Hkv;
    const bool gpt2 = c.arch == NaiveConfig::Arch::Gpt2;
    const std::string P = gpt2 ? c.gpt2Prefix : std::string("model.");
    const std::vector<double> inv = gpt2 ? std::vector<double>() : naiveInverseFrequencies(c);

    NaiveResult result;
    result.attention.resize(c.layers);

    // Embeddings (+ learned positions for GPT-2).
    std::vector<Vec> x(T, Vec(E));
    {
        const HostTensor& emb = weight(W, P + (gpt2 ? "wte.weight" : "embed_tokens.weight"), {V, E});
        const HostTensor* pos = gpt2 ? &weight(W, P + "wpe.weight", {c.maxPositions, E}) : nullptr;
        for (int64_t t = 0; t < T; ++t) {
            if (tokens[t] < 0 || tokens[t] >= V) throw std::runtime_error("naive: token out of range");
            if (pos && t >= c.maxPositions) throw std::runtime_error("naive: beyond gpt2 positions");
            for (int64_t e = 0; e < E; ++e)
                x[t][e] = double(emb.data[tokens[t] * E + e]) + (pos ? double(pos->data[t * E + e]) : 0.0);
        }
    }

    for (int64_t l = 0; l < c.layers; ++l) {
        const std::string p = gpt2 ? P + "h." + std::to_string(l) + "." : P + "layers." + std::to_string(l) + ".";

        // --- q, k, v per token, per head (before RoPE)
        std::vector<TokenQKV> qkv(T);
        for (int64_t t = 0; t < T; ++t) {
            Vec qf, kf, vf;
            if (gpt2) {
                Vec h = layerNorm(x[t], weight(W, p + "ln_1.weight", {E}), weight(W, p + "ln_1.bias", {E}), c.eps);
                Vec all = conv1d(weight(W, p + "attn.c_attn.weight", {E, 3 * E}),
                                 weight(W, p + "attn.c_attn.bias", {3 * E}), h);
                qf = slice(all, 0, E);
                kf = slice(all, E, E);
                vf = slice(all, 2 * E, E);
            } else {
                Vec h = rmsNorm(x[t], weight(W, p + "input_layernorm.weight", {E}).data.data(), c.eps);
                auto proj = [&](const char* name, int64_t out) {
                    const HostTensor& w = weight(W, p + "self_attn." + name + ".weight", {out, E});
                    const HostTensor* b =
                        c.qkvBias ? &weight(W, p + "self_attn." + name + ".bias", {out}) : nullptr;
                    return linearOutIn(w, b, h);
                };
                qf = proj("q_proj", Hq * D);
                kf = proj("k_proj", Hkv * D);
                vf = proj("v_proj", Hkv * D);
            }
            for (int64_t h = 0; h < Hq; ++h) qkv[t].q.push_back(slice(qf, h * D, D));
            for (int64_t h = 0; h < Hkv; ++h) {
                qkv[t].k.push_back(slice(kf, h * D, D));
                qkv[t].v.push_back(slice(vf, h * D, D));
            }
            if (c.qkNorm) {
                const float* qn = weight(W, p + "self_attn.q_norm.weight", {D}).data.data();
                const float* kn = weight(W, p + "self_attn.k_norm.weight", {D}).data.data();
                for (auto& q : qkv[t].q) q = rmsNorm(q, qn, c.eps);
                for (auto& k : qkv[t].k) k = rmsNorm(k, kn, c.eps);
            }
        }

        // --- attention
        const bool capture = std::find(hooks.captureLayers.begin(), hooks.captureLayers.end(), l) !=
                             hooks.captureLayers.end();
        if (capture) result.attention[l].assign(Hq, std::vector<Vec>(T, Vec(T, 0.0)));
        std::vector<Vec> attnOut(T, Vec(Hq * D, 0.0));
        const double scale = 1.0 / std::sqrt(double(D));
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t h = 0; h < Hq; ++h) {
                const int64_t kvh = h / G;  // HF repeat_kv: query head h reads KV head h / G
                Vec q = qkv[t].q[h];
                if (!gpt2) q = naiveRope(q, double(hooks.queryRotary ? hooks.queryRotary(l, t) : t), inv);
                std::vector<int64_t> keys;
                Vec scores;
                for (int64_t j = 0; j <= t; ++j) {
                    if (c.slidingWindow && !(j > t - *c.slidingWindow)) continue;
                    if (hooks.visible && !hooks.visible(l, kvh, t, j)) continue;
                    Vec k = qkv[j].k[kvh];
                    if (!gpt2) k = naiveRope(k, double(hooks.keyRotary ? hooks.keyRotary(l, kvh, t, j) : j), inv);
                    keys.push_back(j);
                    scores.push_back(dot(q, k) * scale);
                }
                if (keys.empty()) throw std::runtime_error("naive: a query sees no key");
                double mx = scores[0];
                for (double s : scores) mx = std::max(mx, s);
                double sum = 0;
                for (double& s : scores) sum += (s = std::exp(s - mx));
                for (size_t i = 0; i < keys.size(); ++i) {
                    const double pr = scores[i] / sum;
                    if (capture) result.attention[l][h][t][keys[i]] = pr;
                    const Vec& v = qkv[keys[i]].v[kvh];
                    for (int64_t d = 0; d < D; ++d) attnOut[t][h * D + d] += pr * v[d];
                }
            }
        }

        // --- output projection, residual, MLP, residual
        for (int64_t t = 0; t < T; ++t) {
            Vec o;
            if (gpt2) {
                o = conv1d(weight(W, p + "attn.c_proj.weight", {E, E}), weight(W, p + "attn.c_proj.bias", {E}),
                           attnOut[t]);
            } else {
                const HostTensor* bo = c.oBias ? &weight(W, p + "self_attn.o_proj.bias", {E}) : nullptr;
                o = linearOutIn(weight(W, p + "self_attn.o_proj.weight", {E, Hq * D}), bo, attnOut[t]);
            }
            for (int64_t e = 0; e < E; ++e) x[t][e] += o[e];

            Vec m;
            if (gpt2) {
                Vec h = layerNorm(x[t], weight(W, p + "ln_2.weight", {E}), weight(W, p + "ln_2.bias", {E}), c.eps);
                Vec a = conv1d(weight(W, p + "mlp.c_fc.weight", {E, F}), weight(W, p + "mlp.c_fc.bias", {F}), h);
                for (double& v : a) v = geluNew(v);
                m = conv1d(weight(W, p + "mlp.c_proj.weight", {F, E}), weight(W, p + "mlp.c_proj.bias", {E}), a);
            } else {
                Vec h = rmsNorm(x[t], weight(W, p + "post_attention_layernorm.weight", {E}).data.data(), c.eps);
                Vec g = linearOutIn(weight(W, p + "mlp.gate_proj.weight", {F, E}), nullptr, h);
                Vec u = linearOutIn(weight(W, p + "mlp.up_proj.weight", {F, E}), nullptr, h);
                for (int64_t i = 0; i < F; ++i) g[i] = silu(g[i]) * u[i];
                m = linearOutIn(weight(W, p + "mlp.down_proj.weight", {E, F}), nullptr, g);
            }
            for (int64_t e = 0; e < E; ++e) x[t][e] += m[e];
        }
    }

    // Final norm and the language-model head.
    const HostTensor& head = c.tied ? weight(W, P + (gpt2 ? "wte.weight" : "embed_tokens.weight"), {V, E})
                                    : weight(W, "lm_head.weight", {V, E});
    if (c.tied && hasWeight(W, "lm_head.weight"))
        throw std::runtime_error("naive: tied model with an lm_head.weight");
    result.logits.assign(T, Vec(V, 0.0));
    for (int64_t t = 0; t < T; ++t) {
        Vec h = gpt2 ? layerNorm(x[t], weight(W, P + "ln_f.weight", {E}), weight(W, P + "ln_f.bias", {E}), c.eps)
                     : rmsNorm(x[t], weight(W, P + "norm.weight", {E}).data.data(), c.eps);
        result.logits[t] = linearOutIn(head, nullptr, h);
    }
    return result;
}

}  // namespace kvlens::test
