// Budgets: parsing, ratios, and PyramidKV's reference schedule with every
// edge case POLICIES.md lists.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"

using namespace kvlens;

TEST(PyramidBudgets, ReferenceExample) {
    // B=128, W=8, N=32, long prompt: b=120, lo=⌊120/20⌋=6, hi=240-6=234,
    // step=⌊228/31⌋=7, budget_l = 234 - 7l + 8.
    const LayerBudgets lb = pyramidBudgets(128, 8, 4096, 32, 20);
    ASSERT_EQ(lb.perLayer.size(), 32u);
    EXPECT_TRUE(lb.compress);
    EXPECT_EQ(lb.perLayer.front(), 242);
    EXPECT_EQ(lb.perLayer.back(), 25);
    for (int64_t l = 0; l < 32; ++l) EXPECT_EQ(lb.perLayer[l], 242 - 7 * l) << "layer " << l;
    int64_t total = 0;
    for (int64_t b : lb.perLayer) total += b;
    EXPECT_EQ(total, 32 * 242 - 7 * (31 * 32 / 2));  // the floors do not preserve 32 × 128
}

TEST(PyramidBudgets, EdgeCases) {
    // L < B: no compression.
    LayerBudgets lb = pyramidBudgets(128, 8, 100, 32, 20);
    EXPECT_FALSE(lb.compress);
    EXPECT_EQ(lb.perLayer, std::vector<int64_t>(32, 128));
    EXPECT_FALSE(lb.note.empty());
    // L < 2b = 240: uniform SnapKV budget.
    lb = pyramidBudgets(128, 8, 239, 32, 20);
    EXPECT_TRUE(lb.compress);
    EXPECT_EQ(lb.perLayer, std::vector<int64_t>(32, 128));
    // hi = 234 >= L - W = 232 (L = 240): hi = 232, lo = 240 - 232 = 8, step = ⌊224/31⌋ = 7.
    lb = pyramidBudgets(128, 8, 240, 32, 20);
    EXPECT_EQ(lb.perLayer.front(), 232 + 8);
    EXPECT_EQ(lb.perLayer.back(), 232 - 31 * 7 + 8);
    for (int64_t l = 0; l < 32; ++l) EXPECT_EQ(lb.perLayer[l], 240 - 7 * l);
    // N == 1: uniform.
    lb = pyramidBudgets(128, 8, 4096, 1, 20);
    EXPECT_EQ(lb.perLayer, std::vector<int64_t>{128});
    // A window that eats the whole budget: nothing to schedule.
    lb = pyramidBudgets(8, 8, 4096, 4, 20);
    EXPECT_EQ(lb.perLayer, std::vector<int64_t>(4, 8));
}

TEST(PyramidBudgets, SmallModel) {
    // B=64, W=8, N=4, beta=20: b=56, lo=2, hi=110, step=36 -> 118, 82, 46, 10.
    EXPECT_EQ(pyramidBudgets(64, 8, 1000, 4, 20).perLayer, (std::vector<int64_t>{118, 82, 46, 10}));
}

TEST(Budgets, ParseAndResolve) {
    BudgetSpec s = parseBudget("64");
    EXPECT_EQ(s.kind, BudgetSpec::Kind::Tokens);
    EXPECT_EQ(resolveBudget(s, 1000), 64);
    EXPECT_EQ(s.text(), "64");
    s = parseBudget("25%");
    EXPECT_EQ(s.kind, BudgetSpec::Kind::Ratio);
    EXPECT_EQ(resolveBudget(s, 512), 128);
    EXPECT_EQ(resolveBudget(parseBudget("29%"), 100), 29);  // not 28 from 0.29 × 100
    EXPECT_EQ(resolveBudget(parseBudget("1%"), 10), 1);     // at least 1
    EXPECT_EQ(s.text(), "25%");
    s = parseLayerBudgets("64,48,32");
    EXPECT_EQ(s.perLayer, (std::vector<int64_t>{64, 48, 32}));
    EXPECT_EQ(s.text(), "64,48,32");
    for (const std::string bad : {"", "abc", "12.5", "x%", "%", "1e999%"}) {
        try {
            parseBudget(bad);
            ADD_FAILURE() << "'" << bad << "' accepted";
        } catch (const ArgumentError& e) {
            EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(parseLayerBudgets("64,,32"), ArgumentError);
    EXPECT_TRUE(parseBudget("64").note.empty());
}

// Budgets outside [1, T] are clamped with a note the CLI and GUI show
// (PolicyTrace::budgetNote), not refused (SPEC "Reliability").
TEST(Budgets, OutOfRangeNumbersAreClampedWithANote) {
    for (const std::string low : {"0", "-5", "0%", "-3%"}) {
        const BudgetSpec s = parseBudget(low);
        EXPECT_EQ(s.kind, BudgetSpec::Kind::Tokens) << low;
        EXPECT_EQ(resolveBudget(s, 100), 1) << low;
        EXPECT_NE(s.note.find("budget " + low + " raised to 1"), std::string::npos) << s.note;
    }
    BudgetSpec s = parseBudget("150%");
    EXPECT_EQ(resolveBudget(s, 200), 200);
    EXPECT_NE(s.note.find("clamped to 100%"), std::string::npos) << s.note;
    s = parseLayerBudgets("64,0,-2");
    EXPECT_EQ(s.perLayer, (std::vector<int64_t>{64, 1, 1}));
    EXPECT_NE(s.note.find("below 1 raised to 1"), std::string::npos) << s.note;

    // The note reaches the budgets a policy runs with, before the allocator's own.
    const PolicyConfig h2o = parsePolicySpec("h2o");
    LayerBudgets lb = policyBudgets(h2o, parseBudget("0"), 100, 2);
    EXPECT_EQ(lb.perLayer, (std::vector<int64_t>{1, 1}));
    EXPECT_TRUE(lb.compress);
    EXPECT_EQ(lb.note.rfind("budget 0 raised to 1", 0), 0u) << lb.note;
    lb = policyBudgets(h2o, parseBudget("900"), 512, 2);  // above the length: nothing evicted, and said so
    EXPECT_FALSE(lb.compress);
    EXPECT_NE(lb.note.find("covers the prompt length 512"), std::string::npos) << lb.note;
    lb = policyBudgets(h2o, parseBudget("-1000000000000"), 512, 2);
    EXPECT_EQ(lb.perLayer, (std::vector<int64_t>{1, 1}));
}

TEST(Budgets, AllocatorsAndPolicyDefaults) {
    EXPECT_EQ(allocateBudgets(Allocator::Uniform, 64, 8, 1000, 3, 20).perLayer, (std::vector<int64_t>{64, 64, 64}));
    EXPECT_FALSE(allocateBudgets(Allocator::Uniform, 64, 8, 50, 3, 20).compress);
    EXPECT_EQ(allocateBudgets(Allocator::Custom, 64, 8, 1000, 3, 20, {10, 20, 30}).perLayer,
              (std::vector<int64_t>{10, 20, 30}));
    EXPECT_THROW(allocateBudgets(Allocator::Custom, 64, 8, 1000, 3, 20, {10, 20}), ArgumentError);
    // pyramidkv's alloc=pyramid uses its own window (32 by default).
    const BudgetSpec spec = parseBudget("128");
    EXPECT_EQ(policyBudgets(parsePolicySpec("pyramidkv"), spec, 4096, 32).perLayer,
              pyramidBudgets(128, 32, 4096, 32, 20).perLayer);
    EXPECT_EQ(policyBudgets(parsePolicySpec("pyramidkv:window=8"), spec, 4096, 32).perLayer.front(), 242);
    EXPECT_EQ(policyBudgets(parsePolicySpec("snapkv"), spec, 4096, 32).perLayer, std::vector<int64_t>(32, 128));
    // Any scorer composes with the pyramid allocator.
    EXPECT_EQ(policyBudgets(parsePolicySpec("h2o:alloc=pyramid"), spec, 4096, 32).perLayer,
              pyramidBudgets(128, 0, 4096, 32, 20).perLayer);
}
