// core/bench: the reports `kvlens-cli bench` prints, on the bundled model
// (small contexts and few steps: these test what the numbers mean, not
// how fast the machine is).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/bench/bench.h"
#include "core/error.h"
#include "core/model/model.h"
#include "core/paths.h"

namespace kvlens::bench {
namespace {

const BenchModel& bundled() {
    static const BenchModel model = BenchModel::load(bundledModelDir(), RunSettings{"cpu", "f32", 1});
    return model;
}

TEST(Bench, TheCReferenceComputesTheEnginesLogitsOnOneAndTwoThreads) {
    const auto tokens = randomTokens(bundled().get(), 1, 48);
    const int engineThreads = at::get_num_threads();
    for (int threads : {1, 2}) {
        const ReferenceRace race = raceReference(bundled(), tokens, 48, threads, 2);
        ASSERT_TRUE(race.ran) << race.why;
        EXPECT_EQ(race.threads, threads);
        EXPECT_EQ(race.tokens, 47);
        EXPECT_GT(race.engineTokS, 0);
        EXPECT_GT(race.referenceTokS, 0);
        EXPECT_LE(race.ratioLow, race.ratio);
        EXPECT_LE(race.ratio, race.ratioHigh);
        // Two independent forwards of the same weights: f32 rounding apart.
        EXPECT_LT(race.maxLogitDiff, 1e-3);
        EXPECT_EQ(at::get_num_threads(), engineThreads) << "the race gives the engine its threads back";
    }
}

TEST(Bench, APairedRowTimesBothAndStatesItsBudget) {
    const int64_t context = 96, steps = 4;
    const auto tokens = randomTokens(bundled().get(), 2, context + steps + 2);
    const auto rows = policyRows(bundled().get(), {parsePolicySpec("streaming"), parsePolicySpec("snapkv")},
                                 {atContext(context), {"25%", parseBudget("25%")}}, tokens, context, steps);
    ASSERT_EQ(rows.size(), 4u);
    // streaming at budget = context: evicts one per step, the overhead target applies.
    EXPECT_EQ(rows[0].budget, "= context");
    EXPECT_EQ(rows[0].schedule, "every_step");
    EXPECT_TRUE(rows[0].target.rfind("PASS <= 1.10x", 0) == 0 || rows[0].target.rfind("FAIL > 1.10x", 0) == 0)
        << rows[0].target;
    EXPECT_NEAR(rows[0].timed.budgetShare, 1.0, 1e-9);
    // snapkv (prefill_once) has nothing to do at budget = context: its row runs at 50 %.
    EXPECT_EQ(rows[2].budget, "50%");
    EXPECT_NEAR(rows[2].timed.budgetShare, 0.5, 0.02);
    EXPECT_NE(rows[2].target.find("prompt work"), std::string::npos) << rows[2].target;
    // At 25 % the cache holds about a quarter of the full cache's bytes (plus the steps since).
    for (size_t i : {1u, 3u}) {
        EXPECT_EQ(rows[i].budget, "25%");
        EXPECT_NEAR(rows[i].timed.budgetShare, 0.25, 0.02);
        EXPECT_LT(rows[i].timed.kvShare, 0.35);
        EXPECT_GT(rows[i].timed.kvShare, 0.2);
    }
    for (const auto& r : rows) {
        EXPECT_GT(r.full.stepMs, 0);
        EXPECT_GT(r.timed.stepMs, 0);
        EXPECT_GT(r.full.promptMs, 0);
        EXPECT_LE(r.timed.ratioLow, r.timed.ratio);
        EXPECT_LE(r.timed.ratio, r.timed.ratioHigh);
        EXPECT_EQ(r.failed, r.target.rfind("FAIL", 0) == 0);
    }
}

// The KV column is the bytes the policy's cache holds, whatever decided them:
// CAKE's per-layer budgets add up to the budget; DuoAttention keeps by its
// heads' roles, so what it holds does not move with the budget; a threshold
// run holds what its scores earn, which the budget does not fix either.
TEST(Bench, TheKvShareIsWhatTheCacheHolds) {
    const int64_t context = 96, steps = 2;
    const auto tokens = randomTokens(bundled().get(), 4, context + steps + 2);
    const std::vector<BudgetCase> budgets{{"25%", parseBudget("25%")}, {"50%", parseBudget("50%")}};
    const auto rows = policyRows(bundled().get(),
                                 {parsePolicySpec("cake"), parsePolicySpec("duo:sinks=4,recent=16"),
                                  parsePolicySpec("knorm:select=threshold,threshold=-4")},
                                 budgets, tokens, context, steps);
    ASSERT_EQ(rows.size(), 6u);
    EXPECT_NEAR(rows[0].timed.kvShare, 0.25, 0.06) << "cake at 25%";
    EXPECT_NEAR(rows[1].timed.kvShare, 0.50, 0.06) << "cake at 50%";
    EXPECT_LT(rows[2].timed.kvShare, 1.0);
    EXPECT_DOUBLE_EQ(rows[2].timed.kvShare, rows[3].timed.kvShare) << "duo holds by its heads' roles";
    EXPECT_LT(rows[4].timed.kvShare, 1.0);
    EXPECT_GT(rows[4].timed.kvShare, 0.0);
    EXPECT_DOUBLE_EQ(rows[4].timed.kvShare, rows[5].timed.kvShare) << "a threshold run holds what its scores earn";
}

TEST(Bench, TheLockstepReportSaysWhatEachEditReused) {
    const auto tokens = randomTokens(bundled().get(), 3, 64 + 4 * kEdits);
    const std::vector<int64_t> prompt(tokens.begin(), tokens.begin() + 64), sentence(tokens.begin() + 64, tokens.begin() + 68);
    const LockstepReport r = lockstep(bundled().get(), prompt, sentence, 2);
    EXPECT_GT(r.refreshMs, 0);
    EXPECT_GT(r.fullStepMs, 0);
    EXPECT_NEAR(r.ratio, r.lockstepStepMs / r.fullStepMs, 1e-12);
    EXPECT_TRUE(std::isfinite(r.faultsPerStep));
    // A budget edit keeps the full cache's run; the prefill policies compress
    // its prompt read again; streaming reads past the prefix.
    EXPECT_EQ(r.budgetEdit.reuse.rfind("kept 1 run", 0), 0u) << r.budgetEdit.reuse;
    EXPECT_NE(r.budgetEdit.reuse.find("shared the full cache's prompt read"), std::string::npos) << r.budgetEdit.reuse;
    // A parameter edit of one policy keeps the other five runs.
    EXPECT_EQ(r.parameterEdit.reuse.rfind("kept 5 runs", 0), 0u) << r.parameterEdit.reuse;
    EXPECT_EQ(r.append.reuse.rfind("kept", 0), 0u) << r.append.reuse;
    for (const Refresh* f : {&r.budgetEdit, &r.parameterEdit, &r.append}) {
        EXPECT_GT(f->firstMs, 0);
        EXPECT_GE(f->ms, f->firstMs);
    }
}

TEST(Bench, SyntheticShapesAreNamedAndAnUnknownOneIsAnError) {
    const auto shapes = syntheticShapes();
    EXPECT_EQ(shapes.front(), "kvlens-tiny");
    EXPECT_NE(std::find(shapes.begin(), shapes.end(), "smollm2-135m"), shapes.end());
    try {
        BenchModel::synthetic("gpt-5", 0);
        FAIL() << "an unknown shape was accepted";
    } catch (const ArgumentError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'gpt-5'"), std::string::npos) << what;
        EXPECT_NE(what.find("smollm2-135m"), std::string::npos) << what;
    }
    // The bundled shape with random weights: the bundled model's layout, long positions.
    const BenchModel tiny = BenchModel::synthetic("kvlens-tiny", 7);
    EXPECT_EQ(tiny.get().config().numLayers, bundled().get().config().numLayers);
    EXPECT_EQ(tiny.get().config().hiddenSize, bundled().get().config().hiddenSize);
    EXPECT_GE(tiny.get().config().maxPositions, 8192);
    EXPECT_NE(tiny.name().find("random weights"), std::string::npos);
}

TEST(Bench, QuantilesAreNearestRank) {
    EXPECT_EQ(median({3, 1, 2}), 2);
    EXPECT_EQ(quantile({4, 1, 3, 2}, 0.25), 2);
    EXPECT_EQ(quantile({4, 1, 3, 2}, 0.75), 4);
    EXPECT_EQ(median({}), 0);
}

}  // namespace
}  // namespace kvlens::bench
