// kvlens-cli import llama2c (core/model/llama2c.h) on a real pretrained
// model: stories260K from llama2.c's tinyllamas and llama2.c's 32k
// tokenizer, read in place from ../shared/data (never copied). The imported
// directory must encode as llama2.c's encoder does (the READMEs' goldens),
// compute what run.c's forward computes on the original file (a plain-loop
// port of it below, interleaved RoPE and all), greedily tell the published
// story from BOS, and run every policy. Bad or truncated files give one
// error naming the file and leave no folder behind.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "core/safe_file.h"
#include "core/model/llama2c.h"
#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/generate.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(KVLENS_SHARED_DATA);
const fs::path kModel = kData / "stories260K" / "stories260K.bin", kTok512 = kData / "stories260K" / "tok512.bin",
               kTok32k = kData / "llama2c" / "tokenizer.bin";

#define REQUIRE_SHARED_DATA()                                                                       \
    if (!fs::exists(kModel) || !fs::exists(kTok32k)) GTEST_SKIP() << "no test data at " << kData;

std::vector<int64_t> encode(const Tokenizer& t, const std::string& text) {
    std::vector<int64_t> out;
    for (int32_t id : t.encode(text)) out.push_back(id);
    return out;
}

// The imported stories260K, made once for the tests that only read it.
const fs::path& imported() {
    static test::ScratchDir dir("llama2c_import");
    static const fs::path out = [] {
        importLlama2c(kModel, kTok512, dir / "stories260K");
        return dir / "stories260K";
    }();
    return out;
}

// run.c's forward over the llama2.c file itself, plain loops.
struct RunC {
    Llama2cHeader h;
    std::vector<float> w;
    const float *emb, *rmsAtt, *wq, *wk, *wv, *wo, *rmsFfn, *w1, *w2, *w3, *rmsFinal;
    std::vector<float> keyCache, valueCache;
    explicit RunC(const fs::path& file) : h(readLlama2cHeader(file)) {
        std::ifstream in(file, std::ios::binary);
        in.seekg(0, std::ios::end);
        w.resize((static_cast<size_t>(in.tellg()) - 28) / 4);
        in.seekg(28);
        in.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(w.size() * 4));
        const size_t E = h.dim, F = h.hiddenDim, L = h.layers, kv = E / h.heads * h.kvHeads;
        const float* p = w.data();
        auto take = [&](size_t n) { const float* q = p; p += n; return q; };
        emb = take(size_t(h.vocabSize) * E); rmsAtt = take(L * E); wq = take(L * E * E); wk = take(L * kv * E);
        wv = take(L * kv * E); wo = take(L * E * E); rmsFfn = take(L * E); w1 = take(L * F * E); w2 = take(L * E * F);
        w3 = take(L * F * E); rmsFinal = take(E);
        keyCache.assign(L * size_t(h.seqLen) * kv, 0);
        valueCache = keyCache;
    }
    static void rmsnorm(float* o, const float* x, const float* g, size_t n) {
        float ss = 0;
        for (size_t j = 0; j < n; ++j) ss += x[j] * x[j];
        ss = 1.0f / std::sqrt(ss / n + 1e-5f);
        for (size_t j = 0; j < n; ++j) o[j] = g[j] * (ss * x[j]);
    }
    static void matmul(float* o, const float* x, const float* m, size_t n, size_t d) {
        for (size_t i = 0; i < d; ++i) {
            float v = 0;
            for (size_t j = 0; j < n; ++j) v += m[i * n + j] * x[j];
            o[i] = v;
        }
    }
    std::vector<float> forward(int token, int pos) {
        const size_t E = h.dim, F = h.hiddenDim, hs = E / h.heads, kv = hs * h.kvHeads, G = h.heads / h.kvHeads;
        std::vector<float> x(emb + token * E, emb + (token + 1) * E), xb(E), xb2(E), hb(F), hb2(F), q(E), att(pos + 1);
        for (size_t l = 0; l < size_t(h.layers); ++l) {
            rmsnorm(xb.data(), x.data(), rmsAtt + l * E, E);
            float* k = &keyCache[(l * h.seqLen + pos) * kv];
            float* v = &valueCache[(l * h.seqLen + pos) * kv];
            matmul(q.data(), xb.data(), wq + l * E * E, E, E);
            matmul(k, xb.data(), wk + l * kv * E, E, kv);
            matmul(v, xb.data(), wv + l * kv * E, E, kv);
            for (size_t i = 0; i < E; i += 2) {
                const float freq = 1.0f / std::pow(10000.0f, float(i % hs) / float(hs)), val = pos * freq;
                const float fcr = std::cos(val), fci = std::sin(val);
                for (int which = 0; which < (i < kv ? 2 : 1); ++which) {
                    float* vec = which == 0 ? q.data() : k;
                    const float v0 = vec[i], v1 = vec[i + 1];
                    vec[i] = v0 * fcr - v1 * fci;
                    vec[i + 1] = v0 * fci + v1 * fcr;
                }
            }
            for (size_t hh = 0; hh < size_t(h.heads); ++hh) {
                const float* qh = &q[hh * hs];
                for (int t = 0; t <= pos; ++t) {
                    const float* kt = &keyCache[(l * h.seqLen + t) * kv + (hh / G) * hs];
                    float s = 0;
                    for (size_t i = 0; i < hs; ++i) s += qh[i] * kt[i];
                    att[t] = s / std::sqrt(float(hs));
                }
                float mx = att[0], sum = 0;
                for (int t = 1; t <= pos; ++t) mx = std::max(mx, att[t]);
                for (int t = 0; t <= pos; ++t) sum += (att[t] = std::exp(att[t] - mx));
                float* o = &xb[hh * hs];
                std::fill(o, o + hs, 0.0f);
                for (int t = 0; t <= pos; ++t) {
                    const float* vt = &valueCache[(l * h.seqLen + t) * kv + (hh / G) * hs];
                    for (size_t i = 0; i < hs; ++i) o[i] += att[t] / sum * vt[i];
                }
            }
            matmul(xb2.data(), xb.data(), wo + l * E * E, E, E);
            for (size_t i = 0; i < E; ++i) x[i] += xb2[i];
            rmsnorm(xb.data(), x.data(), rmsFfn + l * E, E);
            matmul(hb.data(), xb.data(), w1 + l * F * E, E, F);
            matmul(hb2.data(), xb.data(), w3 + l * F * E, E, F);
            for (size_t i = 0; i < F; ++i) hb[i] = hb[i] / (1.0f + std::exp(-hb[i])) * hb2[i];
            matmul(xb.data(), hb.data(), w2 + l * E * F, F, E);
            for (size_t i = 0; i < E; ++i) x[i] += xb[i];
        }
        rmsnorm(x.data(), x.data(), rmsFinal, E);
        std::vector<float> logits(h.vocabSize);
        matmul(logits.data(), x.data(), emb, E, h.vocabSize);
        return logits;
    }
};

}  // namespace

TEST(Llama2cImport, TokenizerEncodesAsLlama2cDoes) {
    REQUIRE_SHARED_DATA();
    const Tokenizer small = Tokenizer::fromFile(imported() / "tokenizer.json");
    EXPECT_EQ(encode(small, "Lily and Tom went to the park."),
              (std::vector<int64_t>{1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433, 426}));
    EXPECT_EQ(encode(small, "The sun was hot, so they ate ice cream!"),
              (std::vector<int64_t>{1, 291, 262, 379, 286, 270, 309, 432, 384, 366, 261, 413, 411, 410, 417, 331, 280, 276,
                                    314, 443}));
    EXPECT_EQ(encode(small, "A cat named Max liked to jump."),
              (std::vector<int64_t>{1, 410, 447, 280, 294, 395, 392, 412, 444, 397, 355, 267, 410, 449, 425, 423, 427, 426}));

    const Tokenizer big = Tokenizer::fromJson(llama2cTokenizerJson(readLlama2cTokenizer(kTok32k, 32000), kTok32k),
                                              kTok32k.string());
    EXPECT_EQ(encode(big, "Once upon a time, there was a little girl named Lily."),
              (std::vector<int64_t>{1, 9038, 2501, 263, 931, 29892, 727, 471, 263, 2217, 7826, 4257, 365, 2354, 29889}));
    EXPECT_EQ(encode(big, "Hello world! 123 \xC3\xBCn\xC3\xAF" "c\xC3\xB8" "d\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"),
              (std::vector<int64_t>{1, 15043, 3186, 29991, 29871, 29896, 29906, 29941, 2505, 29876, 30085, 29883, 30077,
                                    29881, 29948, 29871, 30325, 30346, 30968}));
    EXPECT_EQ(encode(big, "  two  spaces and a tab\there"),
              (std::vector<int64_t>{1, 259, 1023, 29871, 8162, 322, 263, 4434, 12, 4150}));
    // Decoding gives the text back (the dummy-prefix space stripped).
    const std::vector<int32_t> ids = big.encode("Hello world! 123");
    EXPECT_EQ(big.decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), "Hello world! 123");
}

TEST(Llama2cImport, ComputesWhatRunCComputesOnTheOriginalFile) {
    REQUIRE_SHARED_DATA();
    const auto model = Model::load(imported());
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.numLayers, 5);
    EXPECT_EQ(c.numHeads, 8);
    EXPECT_EQ(c.numKvHeads, 4);
    EXPECT_EQ(c.vocabSize, 512);
    const Tokenizer tok = Tokenizer::fromFile(imported() / "tokenizer.json");
    const std::vector<int64_t> prompt = encode(tok, "Once upon a time, there was a little girl named Lily. She loved");
    KvCache cache = model->newCache();
    ForwardOptions o;
    const at::Tensor logits = model->forward(prompt, cache, o).logits;  // [n, V]
    RunC ref(kModel);
    double worst = 0;
    for (size_t t = 0; t < prompt.size(); ++t) {
        const std::vector<float> want = ref.forward(static_cast<int>(prompt[t]), static_cast<int>(t));
        const at::Tensor row = logits[static_cast<int64_t>(t)].contiguous();
        for (size_t v = 0; v < want.size(); ++v)
            worst = std::max(worst, std::abs(double(row[static_cast<int64_t>(v)].item<float>()) - want[v]) /
                                        (1.0 + std::abs(double(want[v]))));
    }
    EXPECT_LT(worst, 1e-4) << "largest relative logit difference against run.c's forward";

    // Token by token through the cache, as decode steps: the same logits.
    KvCache stepCache = model->newCache();
    for (size_t t = 0; t < prompt.size(); ++t) {
        const at::Tensor one = model->forward({prompt[t]}, stepCache, o).logits[0];
        EXPECT_LT((one - logits[static_cast<int64_t>(t)]).abs().max().item<double>(), 1e-4) << "position " << t;
    }
}

TEST(Llama2cImport, GreedyDecodingFromBosTellsThePublishedStory) {
    REQUIRE_SHARED_DATA();
    const auto model = Model::load(imported());
    const Tokenizer tok = Tokenizer::fromFile(imported() / "tokenizer.json");
    GenerateOptions o;
    o.steps = 64;
    const GenerateResult r = generate(*model, {1}, o);
    const std::string text = tok.decode(std::vector<int32_t>(r.generatedIds.begin(), r.generatedIds.end()));
    EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
                         "One day, she saw a big, red ball.",
                         0),
              0u)
        << text;
}

TEST(Llama2cImport, EveryPolicyRunsOnTheImportedModel) {
    REQUIRE_SHARED_DATA();
    const std::shared_ptr<const Model> model(Model::load(imported()));
    const Tokenizer tok = Tokenizer::fromFile(imported() / "tokenizer.json");
    SessionOptions o;
    o.prompt = encode(tok, "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
                           "One day, she saw a big, red ball. She wanted to play with it.");
    for (const PolicyInfo& p : policyRegistry())
        if (!p.fullCache) o.policies.push_back(parsePolicySpec(p.id));
    o.budget = parseBudget("50%");
    Session s(model, o);
    s.start();
    std::shared_ptr<const Trace> t;
    for (int i = 0; i < 8; ++i) t = s.step();
    ASSERT_EQ(t->policies.size(), o.policies.size() + 1);
    for (const PolicyTrace& p : t->policies) {
        EXPECT_TRUE(p.failure.empty()) << p.label << ": " << p.failure;
        ASSERT_EQ(p.metrics.size(), 9u) << p.label;
        for (const StepMetrics& m : p.metrics) EXPECT_TRUE(std::isfinite(m.kl) && m.kl >= -1e-9) << p.label;
    }
}

TEST(Llama2cImport, BadFilesSayWhatIsWrongAndLeaveNothingBehind) {
    REQUIRE_SHARED_DATA();
    test::ScratchDir dir("llama2c_bad");
    auto expectFails = [&](const fs::path& model, const fs::path& tok, const std::string& names, const std::string& says) {
        const fs::path out = dir / "out";
        try {
            importLlama2c(model, tok, out);
            ADD_FAILURE() << "no error for " << model << " + " << tok;
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(names), std::string::npos) << what;
            EXPECT_NE(what.find(says), std::string::npos) << what;
        }
        EXPECT_FALSE(fs::exists(out));
        for (const auto& entry : fs::directory_iterator(dir.path()))  // no staging folder left
            EXPECT_EQ(entry.path().filename().string().find(".out.import"), std::string::npos) << entry.path();
    };
    // A truncated model file.
    std::ifstream in(kModel, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    writeFileAtomically(dir / "short.bin", std::string_view(bytes).substr(0, bytes.size() / 2));
    expectFails(dir / "short.bin", kTok512, "short.bin", "truncated");
    // Not a model at all.
    writeFileAtomically(dir / "text.bin", "just some text, not a checkpoint\n");
    expectFails(dir / "text.bin", kTok512, "text.bin", "header field");
    // Another model's tokenizer (32,000 pieces for a 512-token model).
    expectFails(kModel, kTok32k, "tokenizer.bin", "more than the 512 pieces");
    // A truncated tokenizer.
    std::ifstream tin(kTok512, std::ios::binary);
    std::string tbytes((std::istreambuf_iterator<char>(tin)), std::istreambuf_iterator<char>());
    writeFileAtomically(dir / "tok.bin", std::string_view(tbytes).substr(0, tbytes.size() - 10));
    expectFails(kModel, dir / "tok.bin", "tok.bin", "truncated");
    // An output folder in use is refused, and what is in it is untouched.
    fs::create_directories(dir / "mine");
    writeFileAtomically(dir / "mine" / "notes.txt", "keep me");
    EXPECT_THROW(importLlama2c(kModel, kTok512, dir / "mine"), ArgumentError);
    std::ifstream notes(dir / "mine" / "notes.txt");
    std::string kept((std::istreambuf_iterator<char>(notes)), std::istreambuf_iterator<char>());
    EXPECT_EQ(kept, "keep me");
    EXPECT_FALSE(fs::exists(dir / "mine" / "config.json"));
    // An empty folder is fine.
    fs::create_directories(dir / "empty");
    importLlama2c(kModel, kTok512, dir / "empty");
    EXPECT_TRUE(fs::exists(dir / "empty" / "model.safetensors"));
}
