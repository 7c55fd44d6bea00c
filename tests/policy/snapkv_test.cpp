// The SnapKV family (SnapKV, PyramidKV, Ada-KV, AnDPro) on layers small
// enough to compute by hand. Keys are ln(w) with queries of 1 (D = 1), so
// the attention on entry j is w_j / Σ w over the entries the query sees.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;

namespace {

float score(const Plan& p, int64_t h, int64_t i) { return p.scores[h][i].item<float>(); }

std::vector<int64_t> upTo(int64_t n) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(i);
    return v;
}

// Runs `spec` on one head with weights w (the whole prompt observed in one
// batch, as prefill_once does).
Plan snapPlan(const std::string& spec, const std::vector<double>& w, int64_t budget) {
    auto p = policy(spec);
    const at::Tensor k = keysFromWeights({w});
    const LayerState s = makeState(k, k.clone(), 1, budget);
    p->observe(s, onesQueries(1, upTo(k.size(1))));
    return p->plan(s);
}

// w over 8 entries, window 2: queries 6 and 7 see 0..6 (Σ 14) and 0..7
// (Σ 15); before the window s_j = w_j (1/14 + 1/15) ∝ [1 6 1 2 2 1].
const std::vector<double> kW = {1, 6, 1, 2, 2, 1, 1, 1};
const double kC = 1.0 / 14 + 1.0 / 15;

}  // namespace

TEST(SnapKV, WindowQueriesScoreThePrefix) {
    const Plan plan = snapPlan("snapkv:window=2,kernel=1", kW, 4);
    for (int64_t j = 0; j < 6; ++j) EXPECT_NEAR(score(plan, 0, j), kW[j] * kC, 1e-6) << j;
    EXPECT_TRUE(std::isnan(score(plan, 0, 6)));
    EXPECT_TRUE(std::isnan(score(plan, 0, 7)));
    // Top 2 of [1 6 1 2 2 1]: 6, then 2 vs 2 -> the more recent, entry 4.
    EXPECT_EQ(plan.keep[0], ids({1, 4, 6, 7}));
    EXPECT_EQ(plan.reasons[0][6], TokenStatus::Window);
}

TEST(SnapKV, PoolingChangesTheChoice) {
    // Max, kernel 3: [6 6 6 2 2 2] -> 2 and 1 (ties to the recent).
    Plan plan = snapPlan("snapkv:window=2,kernel=3", kW, 4);
    EXPECT_EQ(plan.keep[0], ids({1, 2, 6, 7}));
    EXPECT_NEAR(score(plan, 0, 0), 6 * kC, 1e-6);
    EXPECT_NEAR(score(plan, 0, 5), 2 * kC, 1e-6);  // pools over 4..5 only: the window is not a neighbour
    // Avg, kernel 3, padding ignored: [7/2 8/3 9/3 5/3 5/3 3/2] -> 0 and 2.
    plan = snapPlan("snapkv:window=2,kernel=3,pool=avg", kW, 4);
    EXPECT_EQ(plan.keep[0], ids({0, 2, 6, 7}));
    EXPECT_NEAR(score(plan, 0, 0), 3.5 * kC, 1e-6);
    EXPECT_NEAR(score(plan, 0, 5), 1.5 * kC, 1e-6);
}

TEST(SnapKV, OnlineWindowIsTheLastQueriesSeen) {
    // Feeding the prompt one token at a time keeps the same window queries.
    auto p = policy("snapkv:window=2,kernel=1");
    const at::Tensor k = keysFromWeights({kW});
    for (int64_t t = 0; t < 8; ++t) {
        const LayerState s = makeState(k.narrow(1, 0, t + 1), k.narrow(1, 0, t + 1), 1, 8);
        p->observe(s, onesQueries(1, {t}));
    }
    const Plan plan = p->plan(makeState(k, k, 1, 4));
    EXPECT_EQ(plan.keep[0], ids({1, 4, 6, 7}));
    EXPECT_NEAR(score(plan, 0, 1), 6 * kC, 1e-6);
}

TEST(SnapKV, BudgetBelowTheWindowKeepsTheMostRecent) {
    const Plan plan = snapPlan("snapkv:window=4,kernel=1", kW, 3);
    EXPECT_EQ(plan.keep[0], ids({5, 6, 7}));
}

TEST(SnapKV, GqaReductionDecides) {
    // Two query heads on one KV head, D = 2, scale 1/√2: keys √2·(ln a, ln b)
    // and queries (1,0), (0,1) give head 0 attention ∝ a, head 1 ∝ b.
    const std::vector<double> a = {14, 1, 8, 1}, b = {1, 4, 8, 7};  // Σ 24 and 20
    at::Tensor k = at::zeros({1, 4, 2});
    for (int64_t j = 0; j < 4; ++j) {
        k[0][j][0] = std::sqrt(2.0) * std::log(a[j]);
        k[0][j][1] = std::sqrt(2.0) * std::log(b[j]);
    }
    const LayerState s = makeState(k, k.clone(), 2, 2);
    Observation obs;
    obs.queries = at::tensor({1.f, 0.f, 0.f, 1.f}).view({2, 1, 2});
    obs.queryPositions = {3};
    auto planWith = [&](const std::string& gqa) {
        auto p = policy("snapkv:window=1,kernel=1,gqa=" + gqa);
        p->observe(s, obs);
        return p->plan(s);
    };
    // Per head [14/24 1/24 8/24] and [1/20 4/20 8/20]:
    // mean [.317 .121 .367] -> 2; max [.583 .2 .4] -> 0; sum = 2 × mean -> 2.
    Plan plan = planWith("mean");
    EXPECT_EQ(plan.keep[0], ids({2, 3}));
    EXPECT_NEAR(score(plan, 0, 2), (8.0 / 24 + 8.0 / 20) / 2, 1e-6);
    plan = planWith("max");
    EXPECT_EQ(plan.keep[0], ids({0, 3}));
    EXPECT_NEAR(score(plan, 0, 0), 14.0 / 24, 1e-6);
    plan = planWith("sum");
    EXPECT_EQ(plan.keep[0], ids({2, 3}));
    EXPECT_NEAR(score(plan, 0, 2), 8.0 / 24 + 8.0 / 20, 1e-6);
}

TEST(PyramidKV, ScoresLikeSnapKV) {
    const Plan snap = snapPlan("snapkv:window=2,kernel=3", kW, 4);
    const Plan pyramid = snapPlan("pyramidkv:window=2,kernel=3", kW, 4);
    EXPECT_EQ(snap.keep, pyramid.keep);
    EXPECT_TRUE(at::allclose(snap.scores.nan_to_num(-1), pyramid.scores.nan_to_num(-1)));
}

TEST(AdaKV, HeadBudgetsFromALayerWideTopK) {
    // Two KV heads of 12 entries, window 1. Head 0 is flat (1/12 each);
    // head 1 peaks on entries 1..10 (8/82 each).
    const std::vector<double> flat(12, 1.0);
    const std::vector<double> peaked = {1, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 1};
    const at::Tensor k = keysFromWeights({flat, peaked});
    auto planWith = [&](const std::string& spec, int64_t budget) {
        const LayerState s = makeState(k, k.clone(), 2, budget);
        auto p = policy(spec);
        p->observe(s, onesQueries(2, upTo(12)));
        return p->plan(s);
    };
    // B = 5: 2·(5-1) = 8 scored slots. alpha 0: all go to head 1 (ties to the recent: 10 down to 3).
    Plan plan = planWith("adakv:window=1,kernel=1,alpha=0", 5);
    EXPECT_EQ(plan.keep[0], ids({11}));
    EXPECT_EQ(plan.keep[1], ids({3, 4, 5, 6, 7, 8, 9, 10, 11}));
    EXPECT_NEAR(score(plan, 1, 4), 8.0 / 82, 1e-6);
    // alpha 0.5: the floor ⌊0.5·4⌋ = 2 per head first, then 4 layer-wide slots.
    plan = planWith("adakv:window=1,kernel=1,alpha=0.5", 5);
    EXPECT_EQ(plan.keep[0], ids({9, 10, 11}));
    EXPECT_EQ(plan.keep[1], ids({5, 6, 7, 8, 9, 10, 11}));
    EXPECT_EQ(plan.keep[0].size() + plan.keep[1].size(), 10u);  // exact layer total
    // The default alpha 0.2 at B = 6: floor ⌊0.2·5⌋ = 1 saves one entry of the flat head.
    plan = planWith("adakv:window=1,kernel=1", 6);
    EXPECT_EQ(plan.keep[0], ids({10, 11}));
    EXPECT_EQ(plan.keep[1].size(), 10u);
    plan = planWith("adakv:window=1,kernel=1,alpha=0", 6);
    EXPECT_EQ(plan.keep[0], ids({11}));
}

TEST(AdaKV, RaggedHeadsKeepTheLayerTotal) {
    // After an adaptive trim the heads differ in length; the next plan
    // still fills exactly Hkv × B.
    const at::Tensor k = keysFromWeights({{1, 2, 3, 4, 5, 6, 7, 8}, {8, 7, 6, 5, 4, 3, 2, 1}});
    const LayerState s = makeState(k, k.clone(), 2, 4, {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 3, 6, 7}});
    auto p = policy("adakv:window=1,kernel=1,alpha=0");
    p->observe(s, onesQueries(2, {7}));
    const Plan plan = p->plan(s);
    // Head 0: [1..7]/36 before its window; head 1 (w 8 7 6 5): [8 7 6]/26.
    // The 6 slots: head 1's three (.31 .27 .23), then head 0's 7/36, 6/36, 5/36.
    EXPECT_EQ(plan.keep[0], ids({4, 5, 6, 7}));
    EXPECT_EQ(plan.keep[1], ids({0, 1, 2, 3}));
    EXPECT_EQ(plan.reasons[1].size(), 4u);
    EXPECT_TRUE(std::isnan(score(plan, 1, 5)));  // padding
}

namespace {

// AnDPro by explicit arithmetic: one head, D = 2, query (1, 0) at the last
// position, kernel 1 (Ã = A on the keys before the window).
struct AnDProCase {
    std::vector<double> w;                      // attention ∝ w
    std::vector<std::array<double, 2>> v;      // values
    int64_t sinks, window;
};

std::vector<double> andproByHand(const AnDProCase& c) {
    const size_t L = c.w.size();
    double z = 0;
    for (double x : c.w) z += x;
    std::vector<double> a(L);
    for (size_t j = 0; j < L; ++j) a[j] = j + c.window < L ? c.w[j] / z : 0.0;  // Ã: keys before the window
    double y0 = 0, y1 = 0;  // the anchor, over evictable entries
    for (size_t j = c.sinks; j + c.window < L; ++j) y0 += a[j] * c.v[j][0], y1 += a[j] * c.v[j][1];
    std::vector<double> s(L);
    for (size_t j = 0; j < L; ++j) s[j] = a[j] * (c.v[j][0] * y0 + c.v[j][1] * y1);
    return s;
}

Plan andproPlan(const std::string& spec, const AnDProCase& c, int64_t budget) {
    const auto L = static_cast<int64_t>(c.w.size());
    at::Tensor k = at::zeros({1, L, 2}), v = at::zeros({1, L, 2});
    for (int64_t j = 0; j < L; ++j) {
        k[0][j][0] = std::sqrt(2.0) * std::log(c.w[j]);  // · (1,0) / √2 = ln w_j
        v[0][j][0] = c.v[j][0];
        v[0][j][1] = c.v[j][1];
    }
    const LayerState s = makeState(k, v, 1, budget);
    Observation obs;
    obs.queries = at::tensor({1.f, 0.f}).view({1, 1, 2});
    obs.queryPositions = {L - 1};
    auto p = policy(spec);
    p->observe(s, obs);
    return p->plan(s);
}

}  // namespace

TEST(AnDPro, ProjectsContributionsOnTheAnchor) {
    // A = [1 2 1 3 1]/8; evictable 1..3; v1 points away from the anchor
    // y = 2/8(0,-1) + 1/8(0,1) + 3/8(1,1) = (3/8, 2/8):
    // s1 = 2/8·(-2/8), s2 = 1/8·(2/8), s3 = 3/8·(5/8).
    const AnDProCase c{{1, 2, 1, 3, 1}, {{5, 5}, {0, -1}, {0, 1}, {1, 1}, {9, 9}}, 1, 1};
    const std::vector<double> s = andproByHand(c);
    EXPECT_NEAR(s[1], -4.0 / 64, 1e-12);  // the hand formula itself
    EXPECT_NEAR(s[3], 15.0 / 64, 1e-12);
    const std::string spec = "andpro:sinks=1,window=1,kernel=1";
    Plan plan = andproPlan(spec, c, 4);
    for (int64_t j = 1; j <= 3; ++j) EXPECT_NEAR(score(plan, 0, j), s[j], 1e-6) << j;
    EXPECT_TRUE(std::isnan(score(plan, 0, 0)));  // the sink
    // Entry 1 draws twice entry 2's attention but is dropped: its value cancels the output.
    EXPECT_EQ(plan.keep[0], ids({0, 2, 3, 4}));
    EXPECT_EQ(plan.reasons[0][0], TokenStatus::Sink);
    plan = andproPlan(spec, c, 3);
    EXPECT_EQ(plan.keep[0], ids({0, 3, 4}));
}

TEST(AnDPro, ChunksSumTheirTokens) {
    // Evictable 1..4 in chunks {1,2} and {3,4}; A = [1 2 2 1 3 1]/10,
    // y = (.2 + .2 + .3, 0): s = [., .14, .14, 0, .21, .].
    const AnDProCase c{{1, 2, 2, 1, 3, 1}, {{0, 0}, {1, 0}, {1, 0}, {0, 0}, {1, 0}, {0, 0}}, 1, 1};
    const std::vector<double> s = andproByHand(c);
    Plan plan = andproPlan("andpro:sinks=1,window=1,kernel=1", c, 4);
    EXPECT_EQ(plan.keep[0], ids({0, 2, 4, 5}));  // per token: .21, then .14 vs .14 -> the recent
    plan = andproPlan("andpro:sinks=1,window=1,kernel=1,chunk=2", c, 4);
    EXPECT_NEAR(score(plan, 0, 1), s[1] + s[2], 1e-6);
    EXPECT_NEAR(score(plan, 0, 2), s[1] + s[2], 1e-6);
    EXPECT_NEAR(score(plan, 0, 3), s[3] + s[4], 1e-6);
    EXPECT_NEAR(score(plan, 0, 4), s[3] + s[4], 1e-6);
    EXPECT_EQ(plan.keep[0], ids({0, 1, 2, 5}));  // chunk {1,2} (.28) beats {3,4} (.21)
}
