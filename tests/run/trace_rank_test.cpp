// The rank a trace gives each scored token: the position of its score in
// the deciding plan's order (higher score first, ties to the more recent
// token). Two regimes are built differently and checked here: a prompt's
// compression (many evictions in one plan, ranked by one sort) and every_step
// eviction (one entry per head per step, ranked by counting).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/policy_run.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

// The trace of `policy` at `budget` after reading a random T-token prompt on
// a small random model.
struct PromptTrace {
    PolicyTrace trace;
    int64_t layers = 0, kvHeads = 0;
};

PromptTrace traceAfterPrompt(const std::string& policy, const std::string& budget, int64_t T, uint64_t seed) {
    test::ScratchDir dir("trace-rank");
    test::ModelOptions o;
    o.maxPositions = 256;
    test::makeRandomModel(Family::Llama, o, 21, dir.path());
    auto model = Model::load(dir.path());
    PolicyRun run(*model, parsePolicySpec(policy), parseBudget(budget), T, CaptureTarget{});
    run.readPrompt(test::randomTokens(T, o.vocabSize, seed), {});
    PromptTrace out;
    run.fillTrace(out.trace);
    out.layers = model->config().numLayers;
    out.kvHeads = model->config().numKvHeads;
    return out;
}

}  // namespace

TEST(TraceRanks, OnePromptPlanRanksEveryScoredTokenInScoreOrder) {
    const int64_t T = 96;
    const PromptTrace r = traceAfterPrompt("snapkv:window=8", "40", T, 5);
    int64_t evicted = 0;
    for (const auto& layer : r.trace.layers)
        for (const auto& head : layer.heads) {
            // Every token with a score was ranked by the one plan (kept or evicted).
            std::vector<std::tuple<float, int64_t, int32_t>> scored;  // score, position, rank
            for (int64_t p = 0; p < T; ++p) {
                if (std::isnan(head.score[p])) {
                    EXPECT_EQ(head.rank[p], -1) << "position " << p;
                    continue;
                }
                scored.emplace_back(head.score[p], p, head.rank[p]);
                evicted += head.status[p] == TokenStatus::Evicted;
            }
            std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
                const float sa = std::get<0>(a), sb = std::get<0>(b);
                return sa != sb ? sa > sb : std::get<1>(a) > std::get<1>(b);
            });
            ASSERT_EQ(scored.size(), static_cast<size_t>(T - 8)) << "all but the window are scored";
            for (size_t r = 0; r < scored.size(); ++r)
                EXPECT_EQ(std::get<2>(scored[r]), static_cast<int32_t>(r)) << "position " << std::get<1>(scored[r]);
        }
    EXPECT_GT(evicted, 0);
}

TEST(TraceRanks, EveryStepEvictionRanksTheWorstCandidateLast) {
    // H2O with B = 16 (recent = B/2 = 8) reads the prompt token by token: each
    // trim sees 17 entries, 8 protected by recency, 9 ranked; the evicted one
    // is their worst, so exactly 8 scored entries ranked above it.
    const int64_t T = 60;
    const PromptTrace r = traceAfterPrompt("h2o:schedule=every_step", "16", T, 6);
    int64_t evicted = 0;
    for (const auto& layer : r.trace.layers)
        for (const auto& head : layer.heads) {
            EXPECT_EQ(head.held, 16);
            for (int64_t p = 0; p < T; ++p) {
                if (head.status[p] != TokenStatus::Evicted) continue;
                ++evicted;
                EXPECT_FALSE(std::isnan(head.score[p])) << "position " << p;
                EXPECT_EQ(head.rank[p], 8) << "position " << p;
            }
        }
    EXPECT_EQ(evicted, (T - 16) * r.layers * r.kvHeads);
}
