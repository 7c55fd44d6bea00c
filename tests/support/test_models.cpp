#include "tests/support/test_models.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "core/model/safetensors.h"

namespace kvlens::test {
namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------- 16-bit floats

uint16_t floatToHalfBits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mant = x & 0x7fffffu;
    const int exp = static_cast<int>((x >> 23) & 0xffu);
    if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    const int e = exp - 127 + 15;
    if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to infinity
    if (e <= 0) {                                                  // half subnormal (or zero)
        if (e < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000u;
        const int shift = 14 - e;
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1u))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry correctly bumps the exponent
    return static_cast<uint16_t>(sign | h);
}

float halfBitsToFloat(uint16_t h) {
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    double v;
    if (exp == 0)
        v = std::ldexp(double(mant), -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = std::ldexp(double(mant + 1024), exp - 25);
    return static_cast<float>((h & 0x8000) ? -v : v);
}

uint16_t floatToBf16Bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

float bf16BitsToFloat(uint16_t b) {
    const uint32_t x = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// ---------------------------------------------------------------- scratch dirs

std::vector<int64_t> randomTokens(int64_t count, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
    std::vector<int64_t> out(count);
    for (auto& t : out) t = dist(rng);
    return out;
}

// ---------------------------------------------------------------- comparisons

Rows tensorRows(const at::Tensor& t) {
    if (t.dim() != 2) throw std::invalid_argument("tensorRows: expected a 2-D tensor");
    at::Tensor d = t.detach().to(at::kCPU, at::kDouble).contiguous();
    const double* p = d.data_ptr<double>();
    Rows out(static_cast<size_t>(d.size(0)), std::vector<double>(static_cast<size_t>(d.size(1))));
    for (int64_t i = 0; i < d.size(0); ++i)
        for (int64_t j = 0; j < d.size(1); ++j) out[i][j] = p[i * d.size(1) + j];
    return out;
}

double tolFor(const Rows& reference) { return kRelTol * std::max(1.0, maxAbs(reference)); }

ErrorTable& ErrorTable::add(std::string title) {
    auto* table = new ErrorTable(std::move(title));
    ::testing::AddGlobalTestEnvironment(table);
    return *table;
}

void ErrorTable::note(const std::string& variant, double relative) {
    double& worst = m_worst[variant];
    worst = std::max(worst, relative);
}

void ErrorTable::TearDown() {
    if (m_worst.empty()) return;
    std::printf("[ max err  ] %s (tolerance %.0e):\n", m_title.c_str(), kRelTol);
    for (const auto& [name, e] : m_worst) std::printf("[ max err  ]   %-22s %.3e\n", name.c_str(), e);
}

double maxAbs(const Rows& a) {
    double m = 0;
    for (const auto& r : a)
        for (double v : r) m = std::max(m, std::abs(v));
    return m;
}

double maxAbsDiff(const Rows& a, const Rows& b) {
    if (a.size() != b.size()) throw std::invalid_argument("maxAbsDiff: row counts differ");
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].size() != b[i].size()) throw std::invalid_argument("maxAbsDiff: row lengths differ");
        for (size_t j = 0; j < a[i].size(); ++j) {
            const double d = std::abs(a[i][j] - b[i][j]);
            if (std::isnan(d)) return d;  // a NaN anywhere fails every tolerance
            m = std::max(m, d);
        }
    }
    return m;
}

Rows rowsOf(const Rows& a, size_t begin, size_t count) {
    if (begin + count > a.size()) throw std::invalid_argument("rowsOf: out of range");
    return Rows(a.begin() + static_cast<std::ptrdiff_t>(begin), a.begin() + static_cast<std::ptrdiff_t>(begin + count));
}

double attentionMaxDiff(const at::Tensor& probs, const KvCache& cache, int64_t layer,
                        const std::vector<std::vector<std::vector<double>>>& refLayer, int64_t firstQuery) {
    std::vector<std::vector<int64_t>> cols, pos;
    for (int64_t h = 0; h < cache.kvHeads(); ++h) {
        cols.push_back(cache.columns(layer, h));
        pos.push_back(cache.positions(layer, h));
    }
    return attentionMaxDiff(probs, cols, pos, refLayer, firstQuery);
}

double attentionMaxDiff(const at::Tensor& probs, const std::vector<std::vector<int64_t>>& columns,
                        const std::vector<std::vector<int64_t>>& positions,
                        const std::vector<std::vector<std::vector<double>>>& refLayer, int64_t firstQuery) {
    if (probs.dim() != 3) throw std::invalid_argument("attentionMaxDiff: expected [Hq, n, S]");
    at::Tensor p = probs.detach().to(at::kCPU, at::kDouble).contiguous();
    const int64_t Hq = p.size(0), n = p.size(1), S = p.size(2);
    const int64_t Hkv = static_cast<int64_t>(columns.size()), G = Hq / Hkv;
    if (static_cast<int64_t>(refLayer.size()) != Hq) throw std::invalid_argument("attentionMaxDiff: head count");
    const double* d = p.data_ptr<double>();
    double worst = 0;
    for (int64_t h = 0; h < Hq; ++h) {
        const auto& cols = columns.at(h / G);
        const auto& pos = positions.at(h / G);
        if (cols.size() != pos.size()) throw std::invalid_argument("attentionMaxDiff: columns vs positions");
        std::vector<int64_t> colPos(static_cast<size_t>(S), -1);
        for (size_t i = 0; i < cols.size(); ++i) {
            if (cols[i] < 0 || cols[i] >= S) throw std::invalid_argument("attentionMaxDiff: column out of range");
            colPos[cols[i]] = pos[i];
        }
        for (int64_t r = 0; r < n; ++r)
            for (int64_t c = 0; c < S; ++c) {
                const double expected = colPos[c] < 0 ? 0.0 : refLayer[h].at(firstQuery + r).at(colPos[c]);
                const double diff = std::abs(d[(h * n + r) * S + c] - expected);
                if (std::isnan(diff)) return diff;
                worst = std::max(worst, diff);
            }
    }
    return worst;
}

double rowSumMaxDeviation(const at::Tensor& probs) {
    at::Tensor sums = probs.detach().to(at::kCPU, at::kDouble).sum(-1);
    return (sums - 1.0).abs().max().item<double>();
}

std::unique_ptr<Model> loadOnCpu(const TestModel& m, const std::string& dtype) {
    RunSettings s;
    s.device = "cpu";
    s.dtype = dtype;
    return Model::load(m.dir, s);
}

const BuiltVariant& builtVariant(const std::string& name) {
    static ScratchDir scratch("variants");
    static std::map<std::string, std::unique_ptr<BuiltVariant>> built;
    if (auto it = built.find(name); it != built.end()) return *it->second;
    uint64_t seed = 2000;
    for (char c : name) seed = seed * 31 + static_cast<unsigned char>(c);
    const Variant& v = variantByName(name);
    auto b = std::make_unique<BuiltVariant>();
    b->tm = makeRandomModel(v.family, v.options, seed, scratch / name);
    b->model = loadOnCpu(b->tm);
    return *(built[name] = std::move(b));
}

std::shared_ptr<const Model> sharedRandomModel(const std::string& name, Family family, const ModelOptions& options,
                                               uint64_t seed) {
    struct Shared {
        std::unique_ptr<ScratchDir> dir;
        std::shared_ptr<const Model> model;
    };
    static std::map<std::string, Shared> shared;
    Shared& s = shared[name];
    if (!s.model) {
        s.dir = std::make_unique<ScratchDir>(name);
        makeRandomModel(family, options, seed, s.dir->path());
        s.model = std::shared_ptr<const Model>(Model::load(s.dir->path()));
    }
    return s.model;
}

std::shared_ptr<const Model> variantModel(const std::string& name, const RunSettings& settings) {
    static std::map<std::string, std::shared_ptr<const Model>> loaded;
    const std::string key = name + "/" + settings.device + "/" + settings.dtype;
    if (auto it = loaded.find(key); it != loaded.end()) return it->second;
    return loaded[key] = std::shared_ptr<const Model>(Model::load(builtVariant(name).tm.dir, settings));
}

// ---------------------------------------------------------------- generator

namespace {

class Writer {
public:
    Writer(uint64_t seed, WeightDType dtype, float scale) : m_rng(seed), m_dtype(dtype), m_scale(scale) {}

    // N(mean, std * scale), rounded to the storage dtype.
    void random(const std::string& name, std::vector<int64_t> shape, float std, float mean = 0.0f) {
        HostTensor t;
        t.shape = std::move(shape);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        t.data.resize(static_cast<size_t>(t.numel()));
        for (float& v : t.data) v = mean + std * m_scale * dist(m_rng);
        add(name, std::move(t));
    }
    // Unit norm weights: 1 + N(0, 0.1).
    void norm(const std::string& name, int64_t n) { random(name, {n}, 0.1f, 1.0f); }

    // Stored only (never read by the reference): legacy buffers.
    void extraF32(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
        m_extra.push_back({name, std::move(shape), std::move(data)});
    }

    HostWeights& weights() { return m_weights; }

    void save(const fs::path& file) {
        std::vector<TensorBlob> blobs;
        std::vector<std::vector<uint16_t>> halves;
        halves.reserve(m_order.size());
        for (const std::string& name : m_order) {
            const HostTensor& t = m_weights.at(name);
            TensorBlob b;
            b.name = name;
            b.shape = t.shape;
            if (m_dtype == WeightDType::F32) {
                b.dtype = DType::F32;
                b.data = t.data.data();
            } else {
                std::vector<uint16_t> bits(t.data.size());
                for (size_t i = 0; i < bits.size(); ++i)
                    bits[i] = m_dtype == WeightDType::F16 ? floatToHalfBits(t.data[i]) : floatToBf16Bits(t.data[i]);
                halves.push_back(std::move(bits));
                b.dtype = m_dtype == WeightDType::F16 ? DType::F16 : DType::BF16;
                b.data = halves.back().data();
            }
            blobs.push_back(b);
        }
        for (const auto& e : m_extra) blobs.push_back({e.name, DType::F32, e.shape, e.data.data()});
        writeSafetensors(file, blobs, {{"format", "pt"}});
    }

private:
    void add(const std::string& name, HostTensor t) {
        // What the reference reads is what the file holds: round through the storage format.
        if (m_dtype == WeightDType::F16)
            for (float& v : t.data) v = halfBitsToFloat(floatToHalfBits(v));
        else if (m_dtype == WeightDType::BF16)
            for (float& v : t.data) v = bf16BitsToFloat(floatToBf16Bits(v));
        if (m_weights.count(name)) throw std::logic_error("duplicate tensor " + name);
        m_weights[name] = std::move(t);
        m_order.push_back(name);
    }

    struct Extra {
        std::string name;
        std::vector<int64_t> shape;
        std::vector<float> data;
    };
    std::mt19937_64 m_rng;
    WeightDType m_dtype;
    float m_scale;
    HostWeights m_weights;
    std::vector<std::string> m_order;
    std::vector<Extra> m_extra;
};

const char* torchDtype(WeightDType d) {
    switch (d) {
        case WeightDType::F32: return "float32";
        case WeightDType::F16: return "float16";
        case WeightDType::BF16: return "bfloat16";
    }
    return "float32";
}

json llamaLikeConfig(Family family, const ModelOptions& o, const NaiveConfig& n) {
    json j;
    switch (family) {
        case Family::Llama: j["architectures"] = {"LlamaForCausalLM"}; j["model_type"] = "llama"; break;
        case Family::Mistral: j["architectures"] = {"MistralForCausalLM"}; j["model_type"] = "mistral"; break;
        case Family::Qwen2: j["architectures"] = {"Qwen2ForCausalLM"}; j["model_type"] = "qwen2"; break;
        case Family::Qwen3: j["architectures"] = {"Qwen3ForCausalLM"}; j["model_type"] = "qwen3"; break;
        default: throw std::logic_error("not a llama-like family");
    }
    j["vocab_size"] = o.vocabSize;
    j["hidden_size"] = o.hiddenSize;
    j["intermediate_size"] = o.intermediateSize;
    j["num_hidden_layers"] = o.numLayers;
    j["num_attention_heads"] = o.numHeads;
    j["num_key_value_heads"] = o.numKvHeads;
    j["max_position_embeddings"] = o.maxPositions;
    j["rms_norm_eps"] = o.normEps;
    j["rope_theta"] = o.ropeTheta;
    j["hidden_act"] = "silu";
    j["initializer_range"] = 0.02;
    j["attention_dropout"] = 0.0;
    j["tie_word_embeddings"] = o.tieEmbeddings;
    j["use_cache"] = true;
    j["bos_token_id"] = 1;
    j["eos_token_id"] = 2;
    j["torch_dtype"] = torchDtype(o.weightDType);
    j["transformers_version"] = "4.51.0";
    if (family == Family::Qwen3 || o.headDim != 0) j["head_dim"] = n.headDim;
    if (family == Family::Llama) {
        j["attention_bias"] = o.attentionBias;
        j["mlp_bias"] = false;
        j["pretraining_tp"] = 1;
    }
    if (family == Family::Qwen3) j["attention_bias"] = false;
    if (family == Family::Mistral) j["sliding_window"] = o.slidingWindow ? json(*o.slidingWindow) : json(nullptr);
    if (family == Family::Qwen2 || family == Family::Qwen3) {
        j["use_sliding_window"] = false;
        j["sliding_window"] = o.slidingWindow ? json(*o.slidingWindow) : json(nullptr);
        j["max_window_layers"] = o.numLayers;
    }
    if (o.ropeScaling.type == "default") {
        j["rope_scaling"] = nullptr;
    } else {
        json rs;
        rs[o.ropeScaling.legacyTypeKey ? "type" : "rope_type"] = o.ropeScaling.type;
        rs["factor"] = o.ropeScaling.factor;
        if (o.ropeScaling.type == "llama3") {
            rs["low_freq_factor"] = o.ropeScaling.lowFreqFactor;
            rs["high_freq_factor"] = o.ropeScaling.highFreqFactor;
            rs["original_max_position_embeddings"] = o.ropeScaling.originalMaxPositions;
        }
        j["rope_scaling"] = rs;
    }
    return j;
}

json gpt2Config(const ModelOptions& o) {
    json j;
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["vocab_size"] = o.vocabSize;
    j["n_positions"] = o.maxPositions;
    j["n_ctx"] = o.maxPositions;
    j["n_embd"] = o.hiddenSize;
    j["n_layer"] = o.numLayers;
    j["n_head"] = o.numHeads;
    j["n_inner"] = o.intermediateSize > 0 ? json(o.intermediateSize) : json(nullptr);
    j["activation_function"] = "gelu_new";
    j["layer_norm_epsilon"] = o.normEps;
    j["resid_pdrop"] = 0.1;
    j["embd_pdrop"] = 0.1;
    j["attn_pdrop"] = 0.1;
    j["initializer_range"] = 0.02;
    j["scale_attn_weights"] = true;
    j["bos_token_id"] = o.vocabSize - 1;
    j["eos_token_id"] = o.vocabSize - 1;
    j["torch_dtype"] = torchDtype(o.weightDType);
    if (!o.tieEmbeddings) j["tie_word_embeddings"] = false;
    return j;
}

}  // namespace

TestModel makeRandomModel(Family family, const ModelOptions& o, uint64_t seed, const fs::path& dir) {
    TestModel m;
    m.dir = dir;
    m.family = family;
    m.options = o;
    fs::create_directories(dir);

    const bool gpt2 = family == Family::Gpt2;
    NaiveConfig& n = m.naive;
    n.arch = gpt2 ? NaiveConfig::Arch::Gpt2 : NaiveConfig::Arch::LlamaLike;
    n.vocab = o.vocabSize;
    n.hidden = o.hiddenSize;
    n.layers = o.numLayers;
    n.heads = o.numHeads;
    n.kvHeads = gpt2 ? o.numHeads : o.numKvHeads;
    n.headDim = (!gpt2 && o.headDim != 0) ? o.headDim : o.hiddenSize / o.numHeads;
    n.intermediate = (gpt2 && o.intermediateSize <= 0) ? 4 * o.hiddenSize : o.intermediateSize;
    n.maxPositions = o.maxPositions;
    n.eps = o.normEps;
    n.ropeTheta = o.ropeTheta;
    n.ropeType = o.ropeScaling.type;
    n.ropeFactor = o.ropeScaling.factor;
    n.lowFreqFactor = o.ropeScaling.lowFreqFactor;
    n.highFreqFactor = o.ropeScaling.highFreqFactor;
    n.originalMaxPositions = o.ropeScaling.originalMaxPositions;
    n.qkvBias = gpt2 || family == Family::Qwen2 || (family == Family::Llama && o.attentionBias);
    n.oBias = gpt2 || (family == Family::Llama && o.attentionBias);
    n.qkNorm = family == Family::Qwen3;
    if (family == Family::Mistral) n.slidingWindow = o.slidingWindow;  // qwen2 writes use_sliding_window=false
    n.gpt2Prefix = gpt2 && o.gpt2Prefix ? "transformer." : "";
    n.tied = o.tieEmbeddings;

    const int64_t V = n.vocab, E = n.hidden, D = n.headDim, Hq = n.heads, Hkv = n.kvHeads, F = n.intermediate,
                  L = n.layers, P = n.maxPositions;
    Writer w(seed, o.weightDType, o.scale);
    json config;
    if (!gpt2) {
        w.random("model.embed_tokens.weight", {V, E}, 0.5f);
        for (int64_t l = 0; l < L; ++l) {
            const std::string p = "model.layers." + std::to_string(l) + ".";
            w.norm(p + "input_layernorm.weight", E);
            w.random(p + "self_attn.q_proj.weight", {Hq * D, E}, 0.2f);
            w.random(p + "self_attn.k_proj.weight", {Hkv * D, E}, 0.2f);
            w.random(p + "self_attn.v_proj.weight", {Hkv * D, E}, 0.15f);
            w.random(p + "self_attn.o_proj.weight", {E, Hq * D}, 0.15f);
            if (n.qkvBias) {
                w.random(p + "self_attn.q_proj.bias", {Hq * D}, 0.1f);
                w.random(p + "self_attn.k_proj.bias", {Hkv * D}, 0.1f);
                w.random(p + "self_attn.v_proj.bias", {Hkv * D}, 0.1f);
            }
            if (n.oBias) w.random(p + "self_attn.o_proj.bias", {E}, 0.1f);
            if (n.qkNorm) {
                w.norm(p + "self_attn.q_norm.weight", D);
                w.norm(p + "self_attn.k_norm.weight", D);
            }
            w.norm(p + "post_attention_layernorm.weight", E);
            w.random(p + "mlp.gate_proj.weight", {F, E}, 0.15f);
            w.random(p + "mlp.up_proj.weight", {F, E}, 0.15f);
            w.random(p + "mlp.down_proj.weight", {E, F}, 0.15f);
        }
        w.norm("model.norm.weight", E);
        if (!o.tieEmbeddings) w.random("lm_head.weight", {V, E}, 0.2f);
        config = llamaLikeConfig(family, o, n);
    } else {
        const std::string pre = n.gpt2Prefix;
        w.random(pre + "wte.weight", {V, E}, 0.5f);
        w.random(pre + "wpe.weight", {P, E}, 0.3f);
        for (int64_t l = 0; l < L; ++l) {
            const std::string p = pre + "h." + std::to_string(l) + ".";
            w.norm(p + "ln_1.weight", E);
            w.random(p + "ln_1.bias", {E}, 0.1f);
            w.random(p + "attn.c_attn.weight", {E, 3 * E}, 0.2f);  // Conv1D: [in, out]
            w.random(p + "attn.c_attn.bias", {3 * E}, 0.1f);
            w.random(p + "attn.c_proj.weight", {E, E}, 0.15f);
            w.random(p + "attn.c_proj.bias", {E}, 0.05f);
            w.norm(p + "ln_2.weight", E);
            w.random(p + "ln_2.bias", {E}, 0.1f);
            w.random(p + "mlp.c_fc.weight", {E, F}, 0.15f);
            w.random(p + "mlp.c_fc.bias", {F}, 0.1f);
            w.random(p + "mlp.c_proj.weight", {F, E}, 0.15f);
            w.random(p + "mlp.c_proj.bias", {E}, 0.05f);
            if (o.gpt2MaskBuffers) {
                // The causal-mask buffers old GPT-2 checkpoints carry; a loader must ignore them.
                std::vector<float> tril(static_cast<size_t>(P * P), 0.0f);
                for (int64_t i = 0; i < P; ++i)
                    for (int64_t j = 0; j <= i; ++j) tril[i * P + j] = 1.0f;
                w.extraF32(p + "attn.bias", {1, 1, P, P}, std::move(tril));
                w.extraF32(p + "attn.masked_bias", {}, {-10000.0f});
            }
        }
        w.norm(pre + "ln_f.weight", E);
        w.random(pre + "ln_f.bias", {E}, 0.1f);
        if (!o.tieEmbeddings) w.random("lm_head.weight", {V, E}, 0.2f);
        config = gpt2Config(o);
    }

    w.save(dir / "model.safetensors");
    std::ofstream(dir / "config.json") << config.dump(2) << "\n";
    m.weights = std::move(w.weights());
    return m;
}

// ---------------------------------------------------------------- variants

std::vector<Variant> standardVariants() {
    std::vector<Variant> v;
    auto add = [&](std::string name, Family f, auto tweak) {
        Variant x{std::move(name), f, ModelOptions{}};
        tweak(x.options);
        v.push_back(std::move(x));
    };
    add("llama_gqa", Family::Llama, [](ModelOptions&) {});
    add("llama_mqa_tied", Family::Llama, [](ModelOptions& o) {
        o.numKvHeads = 1;
        o.tieEmbeddings = true;
    });
    add("llama_mha_bias", Family::Llama, [](ModelOptions& o) {
        o.numKvHeads = 4;
        o.attentionBias = true;
    });
    add("llama3_rope", Family::Llama, [](ModelOptions& o) {
        // head_dim 8, theta 1e4: wavelengths 6.3, 63, 628, 6283 against
        // original/high = 16 and original/low = 64 hit all three branches.
        o.ropeScaling.type = "llama3";
        o.ropeScaling.factor = 8.0;
        o.ropeScaling.lowFreqFactor = 1.0;
        o.ropeScaling.highFreqFactor = 4.0;
        o.ropeScaling.originalMaxPositions = 64;
        o.tieEmbeddings = true;
    });
    add("llama_linear_rope", Family::Llama, [](ModelOptions& o) {
        o.ropeScaling.type = "linear";
        o.ropeScaling.factor = 2.5;
        o.ropeScaling.legacyTypeKey = true;
        o.ropeTheta = 500.0;
    });
    add("mistral_window", Family::Mistral, [](ModelOptions& o) { o.slidingWindow = 6; });
    add("qwen2_bias", Family::Qwen2, [](ModelOptions& o) {
        o.tieEmbeddings = true;
        o.slidingWindow = 4;  // written with use_sliding_window=false: must be ignored
        o.ropeTheta = 1000000.0;
    });
    add("qwen3_qknorm", Family::Qwen3, [](ModelOptions& o) {
        o.headDim = 16;  // explicit, != hidden / heads = 8
        o.tieEmbeddings = true;
        o.intermediateSize = 40;
    });
    add("gpt2", Family::Gpt2, [](ModelOptions& o) {
        o.numKvHeads = 4;
        o.maxPositions = 32;
        o.intermediateSize = 0;  // n_inner: null
        o.normEps = 1e-5;
        o.tieEmbeddings = true;
        o.gpt2Prefix = true;
    });
    add("gpt2_noprefix_untied", Family::Gpt2, [](ModelOptions& o) {
        o.numKvHeads = 4;
        o.maxPositions = 32;
        o.intermediateSize = 48;
        o.normEps = 1e-5;
        o.tieEmbeddings = false;
        o.gpt2Prefix = false;
        o.gpt2MaskBuffers = true;
    });
    add("llama_f16", Family::Llama, [](ModelOptions& o) { o.weightDType = WeightDType::F16; });
    add("qwen2_bf16", Family::Qwen2, [](ModelOptions& o) {
        o.weightDType = WeightDType::BF16;
        o.tieEmbeddings = false;
    });
    return v;
}

const Variant& variantByName(const std::string& name) {
    static const std::vector<Variant> all = standardVariants();
    for (const auto& v : all)
        if (v.name == name) return v;
    throw std::invalid_argument("no test model variant " + name);
}

}  // namespace kvlens::test
