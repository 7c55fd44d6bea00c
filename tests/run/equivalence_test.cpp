// Window and StreamingLLM on the real, compacted cache against an
// independent computation: the naive reference over the whole sequence with
// the equivalent attention mask, for 200+ decode steps.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/policy_run.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

constexpr int64_t kPrompt = 16, kBudget = 12, kSteps = 210;

struct Decoded {
    std::vector<int64_t> tokens;                // prompt + generated
    std::vector<std::vector<float>> logits;     // prediction after tokens[kPrompt-1+i]
};

Decoded decodeGreedy(const Model& model, const std::string& policy, const std::vector<int64_t>& prompt) {
    PolicyRun run(model, parsePolicySpec(policy), parseBudget(std::to_string(kBudget)), kPrompt, CaptureTarget{});
    Decoded d{prompt, {}};
    run.readPrompt(prompt, {});
    for (int64_t s = 0; s <= kSteps; ++s) {
        at::Tensor l = run.logits().contiguous();
        d.logits.emplace_back(l.data_ptr<float>(), l.data_ptr<float>() + l.numel());
        if (s == kSteps) break;
        const int64_t next = l.argmax().item<int64_t>();
        d.tokens.push_back(next);
        run.readToken(next);
        // The cache really is compacted: never more than the budget between steps.
        for (int64_t h = 0; h < model.config().numKvHeads; ++h) EXPECT_LE(run.cache().length(0, h), kBudget);
    }
    return d;
}

void expectMatchesMaskedReference(const std::string& policy,
                                  std::function<bool(int64_t, int64_t, int64_t, int64_t)> visible) {
    test::ScratchDir dir("equivalence");
    test::ModelOptions o;
    o.maxPositions = 512;
    o.scale = 2.0f;  // sharper distributions: fewer near-ties in the greedy choice
    auto tm = test::makeRandomModel(Family::Llama, o, 33, dir.path());
    auto model = Model::load(dir.path());
    const auto prompt = test::randomTokens(kPrompt, o.vocabSize, 9);
    Decoded d = decodeGreedy(*model, policy, prompt);
    ASSERT_EQ(d.tokens.size(), static_cast<size_t>(kPrompt + kSteps));

    test::NaiveHooks hooks;
    hooks.visible = std::move(visible);
    auto ref = test::naiveForward(tm.naive, tm.weights, d.tokens, hooks).logits;
    double maxErr = 0;
    int64_t decided = 0;
    for (int64_t s = 0; s < kSteps; ++s) {
        const auto& want = ref[kPrompt - 1 + s];
        const auto& got = d.logits[s];
        double scale = 1;
        for (double v : want) scale = std::max(scale, std::abs(v));
        for (size_t v = 0; v < want.size(); ++v) maxErr = std::max(maxErr, std::abs(want[v] - got[v]) / scale);
        // Greedy token: the reference's argmax, wherever its margin is not a tie at float precision.
        std::vector<double> sorted = want;
        std::sort(sorted.rbegin(), sorted.rend());
        if (sorted[0] - sorted[1] > 1e-3 * scale) {
            ++decided;
            const int64_t refArg = std::max_element(want.begin(), want.end()) - want.begin();
            EXPECT_EQ(refArg, d.tokens[kPrompt + s]) << "greedy token differs at decode step " << s;
        }
    }
    EXPECT_LT(maxErr, 1e-4) << "logits differ from the masked full-cache reference";
    EXPECT_GT(decided, kSteps * 9 / 10);
    std::printf("[%s] %lld decode steps, max relative logit error %.2e, %lld greedy choices checked\n", policy.c_str(),
                static_cast<long long>(kSteps), maxErr, static_cast<long long>(decided));
}

}  // namespace

TEST(Equivalence, WindowEqualsBandMask) {
    // Between steps the cache holds the last B tokens; a query also sees itself.
    expectMatchesMaskedReference("window", [](int64_t, int64_t, int64_t q, int64_t k) { return k >= q - kBudget; });
}

TEST(Equivalence, StreamingEqualsSinksPlusBandMask) {
    const int64_t sinks = 4;
    expectMatchesMaskedReference("streaming:sinks=4", [=](int64_t, int64_t, int64_t q, int64_t k) {
        return k < sinks || k >= q - (kBudget - sinks);
    });
}

namespace {

// A prompt read in chunks of queries (what long prompts get, to bound the
// attention matrix) gives the run one batch gives: the same logits, the same
// tokens held and evicted with the same scores, the same captured attention.
TEST(Equivalence, ChunkedPromptEqualsOneBatch) {
    test::ScratchDir dir("chunked");
    test::ModelOptions o;
    o.maxPositions = 512;
    o.scale = 2.0f;
    test::makeRandomModel(Family::Llama, o, 35, dir.path());
    auto model = Model::load(dir.path());
    const auto prompt = test::randomTokens(90, o.vocabSize, 12);
    for (const std::string policy : {"full", "snapkv:window=8", "pyramidkv:window=8", "adakv:window=8", "streaming",
                                     "h2o", "tova", "knorm"}) {
        PolicyTrace traces[2];
        std::vector<float> logits[2];
        std::vector<float> maps[2];
        for (int chunked = 0; chunked < 2; ++chunked) {
            PolicyRun run(*model, parsePolicySpec(policy), parseBudget("40"), int64_t(prompt.size()),
                          CaptureTarget{true, 1, 3});
            run.setPrefillChunk(chunked ? 7 : int64_t(prompt.size()));
            run.readPrompt(prompt, {});
            for (int64_t t : {5, 9, 11}) run.readToken(t);
            at::Tensor l = run.logits().contiguous();
            logits[chunked].assign(l.data_ptr<float>(), l.data_ptr<float>() + l.numel());
            run.fillTrace(traces[chunked]);
            maps[chunked] = run.attentionMap().dense();
        }
        for (size_t i = 0; i < logits[0].size(); ++i)
            ASSERT_NEAR(logits[0][i], logits[1][i], 1e-4) << policy << " logit " << i;
        for (size_t l = 0; l < traces[0].layers.size(); ++l)
            for (size_t h = 0; h < traces[0].layers[l].heads.size(); ++h) {
                const auto &a = traces[0].layers[l].heads[h], &b = traces[1].layers[l].heads[h];
                EXPECT_EQ(a.status, b.status) << policy << " L" << l << " H" << h;
                ASSERT_EQ(a.score.size(), b.score.size());
                for (size_t i = 0; i < a.score.size(); ++i)
                    if (!std::isnan(a.score[i])) EXPECT_NEAR(a.score[i], b.score[i], 1e-4 * (1 + std::abs(a.score[i]))) << policy;
            }
        ASSERT_EQ(maps[0].size(), maps[1].size()) << policy;
        for (size_t i = 0; i < maps[0].size(); ++i) {
            ASSERT_EQ(std::isnan(maps[0][i]), std::isnan(maps[1][i])) << policy << " cell " << i;
            if (!std::isnan(maps[0][i])) EXPECT_NEAR(maps[0][i], maps[1][i], 1e-5) << policy;
        }
    }
}

}  // namespace
