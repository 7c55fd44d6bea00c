// KV memory held over a run (mean and peak), the comparison at matched
// memory (core/study/match_memory.h) and the ranking that flags runs held at
// unequal memory (core/study/ranking.h).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "core/study/match_memory.h"
#include "core/study/ranking.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

constexpr int64_t kPrompt = 40, kSteps = 6;

std::shared_ptr<const Model> tinyModel() {
    test::ModelOptions o;
    o.maxPositions = 256;
    o.scale = 2.0f;
    return test::sharedRandomModel("memory-match", Family::Llama, o, 43);
}

SessionOptions options(const std::vector<std::string>& policies, const std::string& budget) {
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, tinyModel()->config().vocabSize, 5);
    for (const auto& p : policies) so.policies.push_back(parsePolicySpec(p));
    so.budget = parseBudget(budget);
    return so;
}

std::shared_ptr<const Trace> run(const SessionOptions& so) {
    Session s(tinyModel(), so);
    auto t = s.start();
    for (int64_t i = 0; i < kSteps; ++i) t = s.step();
    return t;
}

// KV bytes of one token held in every layer and KV head.
double bytesPerToken(const Trace& t) {
    return static_cast<double>(t.policies[0].metrics.front().bytesHeld) / static_cast<double>(t.promptLength);
}

}  // namespace

TEST(MemoryHeld, MeanAndPeakFollowEachSchedule) {
    const auto t = run(options({"window", "snapkv:window=4", "h2o:schedule=every_step"}, "8"));
    const double perToken = bytesPerToken(*t);
    const PolicyTrace &full = t->policies[0], &window = t->policies[1], &snapkv = t->policies[2], &h2o = t->policies[3];
    ASSERT_EQ(window.metrics.size(), static_cast<size_t>(kSteps + 1));
    // The held bytes agree with the per-head counts the Trace shows.
    const double perEntry = perToken / static_cast<double>(t->numLayers * t->numKvHeads);
    for (const PolicyTrace& p : t->policies) {
        int64_t entries = 0;
        for (const auto& l : p.layers)
            for (const auto& h : l.heads) entries += h.held;
        EXPECT_DOUBLE_EQ(static_cast<double>(p.bytesHeld), static_cast<double>(entries) * perEntry) << p.label;
    }
    // The full cache grows by a token a step: mean prompt + 3, peak prompt + 6.
    EXPECT_DOUBLE_EQ(full.meanBytesHeld(), (kPrompt + kSteps / 2.0) * perToken);
    EXPECT_DOUBLE_EQ(static_cast<double>(full.peakBytesHeld()), (kPrompt + kSteps) * perToken);
    // every_step holds its budget after every step.
    for (const PolicyTrace* p : {&window, &h2o}) {
        for (const auto& m : p->metrics) EXPECT_DOUBLE_EQ(static_cast<double>(m.bytesHeld), 8 * perToken) << p->label;
        EXPECT_DOUBLE_EQ(p->meanBytesHeld(), 8 * perToken) << p->label;
    }
    // An every_step scorer reads the prompt token by token, evicting as it
    // goes: at its peak it holds the token it has just read. A positional
    // rule (the window) reads the prompt in one forward and then trims.
    EXPECT_DOUBLE_EQ(static_cast<double>(h2o.peakBytesHeld()), 9 * perToken);
    EXPECT_DOUBLE_EQ(static_cast<double>(window.peakBytesHeld()), kPrompt * perToken);
    // prefill_once holds the whole prompt before it compresses, then grows: 8, 9, ..., 14 entries.
    EXPECT_DOUBLE_EQ(static_cast<double>(snapkv.peakBytesHeld()), kPrompt * perToken);
    EXPECT_DOUBLE_EQ(snapkv.meanBytesHeld(), (8 + kSteps / 2.0) * perToken);
}

TEST(MemoryHeld, MatchingSolvesEachPolicysBudgetAndTheRankingFlagsUnequalMemory) {
    const SessionOptions so = options({"window", "snapkv:window=4", "h2o"}, "8");
    // At one budget the schedules hold different memory: the ranking says so.
    const Ranking unmatched = rankRuns(*run(so));
    EXPECT_FALSE(unmatched.matched);
    EXPECT_GT(unmatched.unequal, 0) << unmatched.note;
    EXPECT_NE(unmatched.note.find("not a comparison at matched memory"), std::string::npos) << unmatched.note;

    const MemoryMatching m = matchMemory(tinyModel(), so, kSteps);
    ASSERT_EQ(m.policies.size(), 3u);
    EXPECT_EQ(m.targetTokens, 8);
    // every_step keeps 8; prefill_once grows by a step, so 5 + mean(0..6) = 8.
    EXPECT_EQ(m.policies[0].budget.text(), "8");
    EXPECT_EQ(m.policies[1].budget.text(), "5");
    EXPECT_EQ(m.policies[2].budget.text(), "8");
    for (const MemoryMatch& p : m.policies) {
        EXPECT_DOUBLE_EQ(p.meanBytes, m.targetBytes) << p.label;
        EXPECT_TRUE(p.note.empty()) << p.label << ": " << p.note;
        EXPECT_GT(p.runs, 0);
        EXPECT_LE(p.runs, 8) << p.label;  // a bisection over 1..40
    }
    const auto t = run(withMatchedBudgets(so, m));
    const Ranking matched = rankRuns(*t, m.targetBytes);
    EXPECT_TRUE(matched.matched);
    EXPECT_EQ(matched.unequal, 0) << matched.note;
    ASSERT_EQ(matched.rows.size(), 4u);
    EXPECT_EQ(matched.rows[0].run, 0u);
    EXPECT_EQ(matched.rows[0].rank, 0);
    for (size_t i = 1; i < matched.rows.size(); ++i) {
        EXPECT_EQ(matched.rows[i].rank, static_cast<int>(i));
        EXPECT_DOUBLE_EQ(matched.rows[i].memoryShare, 1.0);
        EXPECT_DOUBLE_EQ(matched.rows[i].meanKl, t->policies[matched.rows[i].run].meanKl());
        if (i > 1) EXPECT_LE(matched.rows[i - 1].meanKl, matched.rows[i].meanKl);
    }
}

TEST(MemoryHeld, BadMatchingRequestsAreRefused) {
    SessionOptions so = options({"window", "h2o"}, "8");
    so.budgets = {parseBudget("8")};
    EXPECT_THROW(Session(tinyModel(), so), ArgumentError);  // one budget for two policies
    so.budgets.clear();
    so.budget = parseLayerBudgets("8,8");
    EXPECT_THROW(matchMemory(tinyModel(), so, kSteps), ArgumentError);
}
