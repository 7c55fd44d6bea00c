// Numerical correctness of Model::forward against the independent naive
// reference (tests/support/naive_forward.cpp), for every family variant.
#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <map>
#include <random>

#include "core/error.h"
#include "core/model/model.h"
#include "tests/support/naive_forward.h"
#include "tests/support/test_models.h"

namespace kvlens::test {
namespace {

// Captured attention probabilities are in [0, 1]: absolute.
constexpr double kProbTol = 1e-5;
constexpr int64_t kPromptLen = 12;

using Built = BuiltVariant;
const Built& built(const std::string& name) { return builtVariant(name); }

ErrorTable& errors = ErrorTable::add("relative error vs naive reference");

class ForwardFamily : public ::testing::TestWithParam<std::string> {
protected:
    void LoadedConfigMatchesWhatWasWritten();
    void PrefillMatchesNaive();
    void DecodeAndSplitPrefillMatchPrefill();
    void LongDecodeMatchesNaive();
    void CapturedAttentionMatchesNaive();
    void BatchedSegmentsMatchOneRunAtATime();
    const Built& b() const { return built(GetParam()); }
    const Model& model() const { return *b().model; }
    const TestModel& tm() const { return b().tm; }
    std::vector<int64_t> tokens(int64_t n, uint64_t seed = 7) const {
        return randomTokens(n, tm().naive.vocab, seed);
    }
    // Compares and records; returns the relative error.
    double expectClose(const Rows& ours, const Rows& ref, const std::string& what) {
        const double diff = maxAbsDiff(ours, ref);
        const double tol = tolFor(ref);
        EXPECT_LE(diff, tol) << GetParam() << ": " << what << " (max |ref| " << maxAbs(ref) << ")";
        const double rel = diff / std::max(1.0, maxAbs(ref));
        errors.note(GetParam(), rel);
        return rel;
    }
};

void ForwardFamily::LoadedConfigMatchesWhatWasWritten() {
    const ModelConfig& c = model().config();
    const NaiveConfig& n = tm().naive;
    EXPECT_EQ(c.numHeads, n.heads);
    EXPECT_EQ(c.numKvHeads, n.kvHeads);
    EXPECT_EQ(c.headDim, n.headDim);
    EXPECT_EQ(c.intermediateSize, n.intermediate);
    EXPECT_EQ(model().tiedEmbeddings(), n.tied);
    EXPECT_EQ(c.slidingWindow.has_value(), n.slidingWindow.has_value());
    EXPECT_EQ(model().dtype(), at::kFloat);
}

// (1) Prefill of 12 tokens: every position's logits equal the reference.
void ForwardFamily::PrefillMatchesNaive() {
    const auto toks = tokens(kPromptLen);
    KvCache cache = model().newCache();
    ForwardResult r = model().forward(toks, cache);
    ASSERT_EQ(r.logits.dim(), 2);
    ASSERT_EQ(r.logits.size(0), kPromptLen);
    ASSERT_EQ(r.logits.size(1), tm().naive.vocab);
    EXPECT_EQ(r.logits.scalar_type(), at::kFloat);
    const NaiveResult ref = naiveForward(tm().naive, tm().weights, toks);
    expectClose(tensorRows(r.logits), ref.logits, "prefill logits");
    EXPECT_EQ(cache.seqLen(), kPromptLen);
    for (int64_t l = 0; l < cache.layers(); ++l)
        for (int64_t h = 0; h < cache.kvHeads(); ++h) EXPECT_EQ(cache.length(l, h), kPromptLen);
}

// (2) Prefill == one-token decode steps == a split prefill (5 + 7), and each
// equals the reference; lastLogitsOnly returns the last row.
void ForwardFamily::DecodeAndSplitPrefillMatchPrefill() {
    const auto toks = tokens(kPromptLen, 11);
    KvCache full = model().newCache();
    const Rows prefill = tensorRows(model().forward(toks, full).logits);

    KvCache step = model().newCache();
    Rows decoded;
    for (int64_t t : toks) {
        ForwardResult r = model().forward({t}, step);
        ASSERT_EQ(r.logits.size(0), 1);
        decoded.push_back(tensorRows(r.logits)[0]);
    }
    expectClose(decoded, prefill, "one-token decode vs prefill");

    KvCache split = model().newCache();
    Rows parts = tensorRows(model().forward(std::vector<int64_t>(toks.begin(), toks.begin() + 5), split).logits);
    Rows rest = tensorRows(model().forward(std::vector<int64_t>(toks.begin() + 5, toks.end()), split).logits);
    parts.insert(parts.end(), rest.begin(), rest.end());
    expectClose(parts, prefill, "split prefill 5+7 vs prefill");
    expectClose(parts, decoded, "split prefill vs decode");
    EXPECT_EQ(split.seqLen(), kPromptLen);

    const NaiveResult ref = naiveForward(tm().naive, tm().weights, toks);
    expectClose(decoded, ref.logits, "decode vs naive");

    KvCache last = model().newCache();
    ForwardOptions o;
    o.lastLogitsOnly = true;
    ForwardResult r = model().forward(toks, last, o);
    ASSERT_EQ(r.logits.size(0), 1);
    expectClose(tensorRows(r.logits), rowsOf(ref.logits, kPromptLen - 1, 1), "lastLogitsOnly");
}

// A short prompt, then a long decode (well past mistral's window of 6 and
// across the wavelengths of the rope-scaled variants).
void ForwardFamily::LongDecodeMatchesNaive() {
    const int64_t total = std::min<int64_t>(28, tm().naive.maxPositions);
    const auto toks = tokens(total, 23);
    KvCache cache = model().newCache();
    Rows ours = tensorRows(model().forward(std::vector<int64_t>(toks.begin(), toks.begin() + 6), cache).logits);
    for (int64_t i = 6; i < total; ++i) ours.push_back(tensorRows(model().forward({toks[i]}, cache).logits)[0]);
    const NaiveResult ref = naiveForward(tm().naive, tm().weights, toks);
    expectClose(ours, ref.logits, "6-token prefill + decode to " + std::to_string(total));
}

// (3) Captured attention: rows sum to 1 and equal the reference
// probabilities, for a prefill (every layer) and for a decode step (one
// requested layer only).
void ForwardFamily::CapturedAttentionMatchesNaive() {
    const auto toks = tokens(kPromptLen, 31);
    const int64_t L = tm().naive.layers, Hq = tm().naive.heads;
    NaiveHooks hooks;
    for (int64_t l = 0; l < L; ++l) hooks.captureLayers.push_back(l);
    const NaiveResult ref = naiveForward(tm().naive, tm().weights, toks, hooks);

    KvCache cache = model().newCache();
    ForwardOptions o;
    o.captureAttention = true;
    ForwardResult r = model().forward(std::vector<int64_t>(toks.begin(), toks.end() - 1), cache, o);
    ASSERT_EQ(static_cast<int64_t>(r.attention.size()), L);
    for (int64_t l = 0; l < L; ++l) {
        const at::Tensor& a = r.attention[l];
        ASSERT_TRUE(a.defined()) << "layer " << l;
        ASSERT_EQ(a.dim(), 3);
        EXPECT_EQ(a.size(0), Hq);
        EXPECT_EQ(a.size(1), kPromptLen - 1);
        EXPECT_EQ(a.scalar_type(), at::kFloat);
        EXPECT_LE(rowSumMaxDeviation(a), kProbTol) << "layer " << l;
        EXPECT_LE(attentionMaxDiff(a, cache, l, ref.attention[l], 0), kProbTol) << "layer " << l;
    }
    // Decode step, capturing the last layer only.
    o.captureLayers = {L - 1};
    ForwardResult d = model().forward({toks.back()}, cache, o);
    for (int64_t l = 0; l + 1 < L; ++l) EXPECT_FALSE(d.attention[l].defined()) << "layer " << l << " not requested";
    const at::Tensor& a = d.attention[L - 1];
    ASSERT_TRUE(a.defined());
    EXPECT_EQ(a.size(1), 1);
    EXPECT_LE(rowSumMaxDeviation(a), kProbTol);
    EXPECT_LE(attentionMaxDiff(a, cache, L - 1, ref.attention[L - 1], kPromptLen - 1), kProbTol);
    expectClose(tensorRows(d.logits), rowsOf(ref.logits, kPromptLen - 1, 1), "decode logits after capture");
    // One query head of one layer, spelled out (the brief's minimum).
    at::Tensor row = a[0][0].to(at::kDouble);
    for (int64_t k = 0; k < kPromptLen; ++k)
        EXPECT_NEAR(row[k].item<double>(), ref.attention[L - 1][0][kPromptLen - 1][k], kProbTol) << "key " << k;
}

// (6) The lockstep Session's batched forward: four runs at different
// lengths (one re-rotated), one token each but one of three tokens, in one
// call, give each run's own forward() logits (within 1e-5 relative; bit
// for bit on the CPU, where the few-row products are the same kernel), and
// leave caches from which the next steps agree too.
void ForwardFamily::BatchedSegmentsMatchOneRunAtATime() {
    const std::vector<int64_t> lengths{12, 5, 9, 1};
    auto caches = [&] {
        std::vector<KvCache> out;
        for (size_t r = 0; r < lengths.size(); ++r) {
            out.push_back(model().newCache(CacheOptions{/*rerotate=*/r == 2 && model().config().usesRope()}));
            model().forward(tokens(lengths[r], 30 + r), out.back());
        }
        return out;
    };
    std::vector<KvCache> alone = caches(), batched = caches();
    for (int step = 0; step < 2; ++step) {
        std::vector<std::vector<int64_t>> next{{3}, {5}, tokens(3, 40 + step), {7}};
        std::vector<ForwardOptions> opts(4);
        opts[0].lastLogitsOnly = opts[1].lastLogitsOnly = true;  // run 2 asks for all three rows
        std::vector<Model::Segment> segments;
        for (size_t r = 0; r < next.size(); ++r) segments.push_back({&next[r], &batched[r], &opts[r]});
        const std::vector<ForwardResult> together = model().forward(segments);
        ASSERT_EQ(together.size(), next.size());
        for (size_t r = 0; r < next.size(); ++r) {
            const at::Tensor own = model().forward(next[r], alone[r], opts[r]).logits;
            ASSERT_EQ(together[r].logits.sizes(), own.sizes()) << "run " << r;
            const double scale = std::max(1.0, own.abs().max().item<double>());
            EXPECT_LE((together[r].logits - own).abs().max().item<double>(), 1e-5 * scale) << "run " << r << " step " << step;
            EXPECT_TRUE(at::equal(together[r].logits.argmax(-1), own.argmax(-1))) << "run " << r;
            EXPECT_EQ(batched[r].seqLen(), alone[r].seqLen());
        }
    }
}

std::vector<std::string> variantNames() {
    std::vector<std::string> out;
    for (const auto& v : standardVariants()) out.push_back(v.name);
    return out;
}

// One ctest entry per family variant (each test process pays LibTorch's
// start-up, ~0.5 s): every check above, each under its own trace label.
TEST_P(ForwardFamily, MatchesNaiveReference) {
    {
        SCOPED_TRACE("LoadedConfigMatchesWhatWasWritten");
        LoadedConfigMatchesWhatWasWritten();
    }
    {
        SCOPED_TRACE("PrefillMatchesNaive");
        PrefillMatchesNaive();
    }
    {
        SCOPED_TRACE("DecodeAndSplitPrefillMatchPrefill");
        DecodeAndSplitPrefillMatchPrefill();
    }
    {
        SCOPED_TRACE("LongDecodeMatchesNaive");
        LongDecodeMatchesNaive();
    }
    {
        SCOPED_TRACE("CapturedAttentionMatchesNaive");
        CapturedAttentionMatchesNaive();
    }
    {
        SCOPED_TRACE("BatchedSegmentsMatchOneRunAtATime");
        BatchedSegmentsMatchOneRunAtATime();
    }
}

INSTANTIATE_TEST_SUITE_P(Families, ForwardFamily, ::testing::ValuesIn(variantNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---------------------------------------------------------------- the features make a difference
// Guards against tests that pass because the sequence is too short or the
// weights too small for a feature to matter.

double naiveDiff(const TestModel& tm, const NaiveConfig& altered, const std::vector<int64_t>& toks) {
    return maxAbsDiff(naiveForward(tm.naive, tm.weights, toks).logits, naiveForward(altered, tm.weights, toks).logits);
}

TEST(ForwardFeatures, EachFeatureChangesTheLogits) {
    const auto toks = randomTokens(kPromptLen, 64, 5);
    {
        const TestModel& tm = built("mistral_window").tm;
        NaiveConfig c = tm.naive;
        c.slidingWindow.reset();
        EXPECT_GT(naiveDiff(tm, c, toks), 100 * tolFor({{1.0}})) << "sliding window";
    }
    {
        const TestModel& tm = built("qwen2_bias").tm;  // its sliding_window (use_sliding_window=false) is ignored
        NaiveConfig c = tm.naive;
        c.slidingWindow = 4;
        EXPECT_GT(naiveDiff(tm, c, toks), 100 * tolFor({{1.0}})) << "qwen2 window would matter if applied";
    }
    for (const char* name : {"llama3_rope", "llama_linear_rope"}) {
        const TestModel& tm = built(name).tm;
        NaiveConfig c = tm.naive;
        c.ropeType = "default";
        EXPECT_GT(naiveDiff(tm, c, toks), 100 * tolFor({{1.0}})) << name << " scaling";
    }
    {
        // llama3: each of the three frequency bands matters.
        const TestModel& tm = built("llama3_rope").tm;
        const auto inv = naiveInverseFrequencies(tm.naive);
        NaiveConfig d = tm.naive;
        d.ropeType = "default";
        const auto plain = naiveInverseFrequencies(d);
        ASSERT_EQ(inv.size(), 4u);
        EXPECT_DOUBLE_EQ(inv[0], plain[0]);                         // high frequency: kept
        EXPECT_GT(inv[1], plain[1] / 8.0 * 1.01);                   // medium: blended
        EXPECT_LT(inv[1], plain[1] * 0.99);
        EXPECT_NEAR(inv[2], plain[2] / 8.0, 1e-12);                 // low: divided by factor
        EXPECT_NEAR(inv[3], plain[3] / 8.0, 1e-12);
    }
    {
        const TestModel& tm = built("llama_gqa").tm;
        NaiveConfig r = tm.naive;
        r.ropeTheta = 20000.0;  // RoPE itself matters at these scales
        EXPECT_GT(naiveDiff(tm, r, toks), 100 * tolFor({{1.0}})) << "rope theta";
    }
}

// ---------------------------------------------------------------- errors

// (4) GPT-2 has learned positions for n_positions tokens: one more is an
// ArgumentError, and the cache is left as it was.
TEST(ForwardErrors, Gpt2BeyondLearnedPositionsThrows) {
    const Built& b = built("gpt2");
    const int64_t P = b.tm.naive.maxPositions;
    const auto toks = randomTokens(P + 1, b.tm.naive.vocab, 3);
    KvCache cache = b.model->newCache();
    ASSERT_NO_THROW(b.model->forward(std::vector<int64_t>(toks.begin(), toks.begin() + P - 2), cache));
    ASSERT_NO_THROW(b.model->forward({toks[P - 2]}, cache));
    ASSERT_NO_THROW(b.model->forward({toks[P - 1]}, cache));
    EXPECT_EQ(cache.seqLen(), P);
    EXPECT_THROW(b.model->forward({toks[P]}, cache), ArgumentError);
    EXPECT_EQ(cache.seqLen(), P);
    EXPECT_EQ(cache.length(0, 0), P);

    KvCache fresh = b.model->newCache();
    EXPECT_THROW(b.model->forward(toks, fresh), ArgumentError);  // a prefill of P + 1
    EXPECT_EQ(fresh.seqLen(), 0);
    KvCache part = b.model->newCache();
    ASSERT_NO_THROW(b.model->forward(std::vector<int64_t>(toks.begin(), toks.begin() + 20), part));
    EXPECT_THROW(b.model->forward(std::vector<int64_t>(toks.begin() + 20, toks.end()), part), ArgumentError);
    EXPECT_EQ(part.seqLen(), 20);
    // The rejected calls left a usable cache: the next token still matches the reference.
    const NaiveResult ref = naiveForward(b.tm.naive, b.tm.weights, std::vector<int64_t>(toks.begin(), toks.begin() + 21));
    const Rows r = tensorRows(b.model->forward({toks[20]}, part).logits);
    EXPECT_LE(maxAbsDiff(r, rowsOf(ref.logits, 20, 1)), tolFor(ref.logits));
}

TEST(ForwardErrors, TokenOutsideVocabularyThrows) {
    for (const char* name : {"llama_gqa", "gpt2", "qwen3_qknorm"}) {
        const Built& b = built(name);
        const int64_t V = b.tm.naive.vocab;
        KvCache cache = b.model->newCache();
        EXPECT_THROW(b.model->forward({-1}, cache), ArgumentError) << name;
        EXPECT_THROW(b.model->forward({V}, cache), ArgumentError) << name;
        EXPECT_THROW(b.model->forward({1, 2, V + 100}, cache), ArgumentError) << name;
        EXPECT_THROW(b.model->forward({std::numeric_limits<int64_t>::max()}, cache), ArgumentError) << name;
        EXPECT_THROW(b.model->forward({std::numeric_limits<int64_t>::min()}, cache), ArgumentError) << name;
        EXPECT_THROW(b.model->forward({}, cache), ArgumentError) << name << ": no tokens";
        EXPECT_EQ(cache.seqLen(), 0) << name;
        EXPECT_EQ(cache.length(0, 0), 0) << name;
        // The edges of the vocabulary are fine.
        EXPECT_NO_THROW(b.model->forward({0, V - 1}, cache)) << name;
        EXPECT_EQ(cache.seqLen(), 2) << name;
    }
}

// ---------------------------------------------------------------- precision

// Our F16/BF16 writers round like torch (the stored-dtype variants rely on it).
TEST(HalfPrecision, ConvertersRoundLikeC10) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int i = 0; i < 20000; ++i) {
        const float scale = std::ldexp(1.0f, (i % 40) - 30);  // subnormal halves included
        const float f = dist(rng) * scale;
        EXPECT_EQ(halfBitsToFloat(floatToHalfBits(f)), static_cast<float>(c10::Half(f))) << f;
        EXPECT_EQ(bf16BitsToFloat(floatToBf16Bits(f)), static_cast<float>(c10::BFloat16(f))) << f;
    }
}

// A bf16 run follows the f32 reference within bf16 precision (8 mantissa bits).
TEST(ForwardPrecision, Bf16RunIsClose) {
    const Built& b = built("llama_gqa");
    auto model = loadOnCpu(b.tm, "bf16");
    ASSERT_EQ(model->dtype(), at::kBFloat16);
    const auto toks = randomTokens(kPromptLen, b.tm.naive.vocab, 9);
    KvCache cache = model->newCache();
    const Rows ours = tensorRows(model->forward(toks, cache).logits);
    const NaiveResult ref = naiveForward(b.tm.naive, b.tm.weights, toks);
    const double rel = maxAbsDiff(ours, ref.logits) / std::max(1.0, maxAbs(ref.logits));
    std::printf("[ bf16     ] llama_gqa bf16 run: relative error %.3e\n", rel);
    EXPECT_LE(rel, 5e-2);
    EXPECT_GT(rel, 0.0);  // it really ran in bf16
}

// f16 on the CPU: either it runs (within f16 precision) or it is refused with
// a kvlens error; a raw c10::Error escaping from forward() is a bug.
TEST(ForwardPrecision, F16RunOnCpuRunsOrIsRefused) {
    const Built& b = built("llama_gqa");
    std::unique_ptr<Model> model;
    try {
        model = loadOnCpu(b.tm, "f16");
    } catch (const Error& e) {
        std::printf("[ f16      ] refused at load: %s\n", e.what());
        return;
    }
    const auto toks = randomTokens(kPromptLen, b.tm.naive.vocab, 9);
    KvCache cache = model->newCache();
    Rows ours;
    try {
        ours = tensorRows(model->forward(toks, cache).logits);
    } catch (const Error& e) {
        std::printf("[ f16      ] refused at forward: %s\n", e.what());
        return;
    } catch (const std::exception& e) {
        FAIL() << "f16 forward on the CPU escaped as a non-kvlens exception: " << e.what();
    }
    const NaiveResult ref = naiveForward(b.tm.naive, b.tm.weights, toks);
    const double rel = maxAbsDiff(ours, ref.logits) / std::max(1.0, maxAbs(ref.logits));
    std::printf("[ f16      ] llama_gqa f16 run: relative error %.3e\n", rel);
    EXPECT_LE(rel, 1e-2);
}

}  // namespace
}  // namespace kvlens::test
