// Policies that learn from every step's attention (H2O, TOVA, LRU, LFU), on
// hand-computed cases: the probabilities are given, the statistics checked.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;

namespace {

LayerState blank(int64_t Hq, int64_t Hkv, int64_t budget, std::vector<std::vector<int64_t>> positions) {
    const auto L = static_cast<int64_t>(positions[0].size());
    return makeState(at::zeros({Hkv, L, 1}), at::zeros({Hkv, L, 1}), Hq, budget, std::move(positions));
}

float score(const Plan& p, int64_t h, int64_t i) { return p.scores[h][i].item<float>(); }

}  // namespace

TEST(H2O, RunningSumsFollowTheCache) {
    auto p = policy("h2o");
    // The prompt's first two tokens in one batch: row 0 sees only entry 0.
    p->observe(blank(1, 1, 2, {{0, 1}}), onesQueries(1, {0, 1}, probsFrom({{{1.f, 0.f}, {0.4f, 0.6f}}})));
    // Token 2: its key starts with its own query's weight, 0.3.
    LayerState s = blank(1, 1, 2, {{0, 1, 2}});
    p->observe(s, onesQueries(1, {2}, probsFrom({{{0.5f, 0.2f, 0.3f}}})));
    Plan plan = p->plan(s);
    // recent = ⌊2/2⌋ = 1 keeps entry 2; of 0 (1 + .4 + .5) and 1 (.6 + .2) the heavier stays.
    EXPECT_EQ(plan.keep[0], ids({0, 2}));
    EXPECT_NEAR(score(plan, 0, 0), 1.9, 1e-6);
    EXPECT_NEAR(score(plan, 0, 1), 0.8, 1e-6);
    EXPECT_TRUE(std::isnan(score(plan, 0, 2)));
    EXPECT_EQ(plan.reasons[0], (std::vector<TokenStatus>{TokenStatus::Score, TokenStatus::Evicted, TokenStatus::Window}));
    p->applied(0, plan.keep);

    // Entries now hold positions 0 and 2; token 3 arrives.
    s = blank(1, 1, 2, {{0, 2, 3}});
    p->observe(s, onesQueries(1, {3}, probsFrom({{{0.1f, 0.6f, 0.3f}}})));
    plan = p->plan(s);
    // Position 2 carries its own 0.3 plus 0.6; position 1's 0.8 left with it.
    EXPECT_NEAR(score(plan, 0, 0), 2.0, 1e-6);
    EXPECT_NEAR(score(plan, 0, 1), 0.9, 1e-6);
    EXPECT_EQ(plan.keep[0], ids({0, 2}));
}

TEST(H2O, RecentWindowDefaultsToHalfTheBudget) {
    auto windowOf = [](const std::string& spec, int64_t budget) {
        auto p = policy(spec);
        LayerState s = blank(1, 1, budget, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
        std::vector<float> row(10, 0.1f);
        p->observe(s, onesQueries(1, {9}, probsFrom({{row}})));
        const Plan plan = p->plan(s);
        int64_t w = 0;
        for (auto r : plan.reasons[0]) w += r == TokenStatus::Window;
        EXPECT_EQ(static_cast<int64_t>(plan.keep[0].size()), budget);
        return w;
    };
    EXPECT_EQ(windowOf("h2o", 5), 2);
    EXPECT_EQ(windowOf("h2o", 6), 3);
    EXPECT_EQ(windowOf("h2o:recent=1", 6), 1);
    EXPECT_EQ(windowOf("h2o:recent=0", 6), 0);
}

TEST(H2O, GqaReductionDecides) {
    // Two query heads share one KV head; one query at position 3.
    const at::Tensor probs = probsFrom({{{0.5f, 0.0f, 0.3f, 0.2f}}, {{0.0f, 0.45f, 0.3f, 0.25f}}});
    auto keptWith = [&](const std::string& gqa, float* top) {
        auto p = policy("h2o:recent=0,gqa=" + gqa);
        LayerState s = blank(2, 1, 2, {{0, 1, 2, 3}});
        p->observe(s, onesQueries(2, {3}, probs));
        const Plan plan = p->plan(s);
        *top = score(plan, 0, 2);
        return plan.keep[0];
    };
    float top = 0;
    // mean [.25 .225 .3 .225], max [.5 .45 .3 .25], sum = 2 × mean.
    EXPECT_EQ(keptWith("mean", &top), ids({0, 2}));
    EXPECT_NEAR(top, 0.3, 1e-6);
    EXPECT_EQ(keptWith("max", &top), ids({0, 1}));
    EXPECT_NEAR(top, 0.3, 1e-6);
    EXPECT_EQ(keptWith("sum", &top), ids({0, 2}));
    EXPECT_NEAR(top, 0.6, 1e-6);
}

TEST(H2O, AdaptiveHeadsWithRaggedLengths) {
    // h2o composes with Ada-KV's allocation: head 0 holds 8 entries, head 1
    // only 6 (padded). recent=1 per head, B=5: 2·5 - 2 = 8 scored slots,
    // floor ⌊0.5·(5-1)⌋ = 2 per head.
    auto p = policy("h2o:recent=1,heads=adaptive,alpha=0.5");
    LayerState s = blank(2, 2, 5, {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 2, 3, 5, 6, 7}});
    const at::Tensor probs = probsFrom({{{.09f, .08f, .07f, .06f, .05f, .04f, .03f, .5f}},
                                        {{.005f, .004f, .003f, .002f, .001f, .5f, 0.f, 0.f}}});
    p->observe(s, onesQueries(2, {7}, probs));
    const Plan plan = p->plan(s);
    // Floors: head 0 {0,1}, head 1 {0,1}; the 4 slots left all go to head 0.
    EXPECT_EQ(plan.keep[0], ids({0, 1, 2, 3, 4, 5, 7}));
    EXPECT_EQ(plan.keep[1], ids({0, 1, 5}));
    EXPECT_EQ(plan.keep[0].size() + plan.keep[1].size(), 10u);  // the layer total is exact
    EXPECT_EQ(plan.reasons[1].size(), 6u);
    EXPECT_TRUE(std::isnan(score(plan, 1, 7)));  // padding
    p->applied(0, plan.keep);
}

TEST(Tova, OneSetForTheLayerFromAllQueryHeads) {
    // 4 query heads over 2 KV heads. Batched: only the last row counts.
    auto p = policy("tova");
    LayerState s = blank(4, 2, 2, {{0, 1, 2, 3}, {0, 1, 2, 3}});
    const std::vector<float> first = {1.f, 0.f, 0.f, 0.f};
    const at::Tensor probs = probsFrom({{first, {.7f, .1f, .1f, .1f}},
                                        {first, {.7f, .1f, .1f, .1f}},
                                        {first, {0.f, .5f, .1f, .4f}},
                                        {first, {0.f, .5f, .1f, .4f}}});
    p->observe(s, onesQueries(4, {2, 3}, probs));
    const Plan plan = p->plan(s);
    // Mean over all four heads: [.35 .3 .1 .25] -> entries 0 and 1 for both
    // KV heads, although KV head 1's own group would keep 1 and 3.
    EXPECT_EQ(plan.keep[0], ids({0, 1}));
    EXPECT_EQ(plan.keep[1], ids({0, 1}));
    const std::vector<float> expected = {.35f, .3f, .1f, .25f};
    for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(score(plan, h, i), expected[i], 1e-6);
}

namespace {

// Four steps of one head (τ = 1): per step, the threshold is 1/(keys seen).
//   pos 0: [1]                  used {0}          (own step)
//   pos 1: [.5 .5]              used {0,1}        (≥ .5)
//   pos 2: [.2 .5 .3]           used {1,2}        (≥ 1/3; 2 is its own step)
//   pos 3: [.3 .1 .1 .5]        used {0,3}        (≥ .25)
// uses [3 2 1 1], last use [3 2 2 3].
const std::vector<std::vector<float>> kRows = {{1, 0, 0, 0}, {.5f, .5f, 0, 0}, {.2f, .5f, .3f, 0}, {.3f, .1f, .1f, .5f}};

std::unique_ptr<Policy> fedOneByOne(const std::string& spec) {
    auto p = policy(spec);
    for (int64_t t = 0; t < 4; ++t) {
        std::vector<int64_t> pos;
        for (int64_t i = 0; i <= t; ++i) pos.push_back(i);
        std::vector<float> row(kRows[t].begin(), kRows[t].begin() + t + 1);
        p->observe(blank(1, 1, 2, {pos}), onesQueries(1, {t}, probsFrom({{row}})));
    }
    return p;
}

std::unique_ptr<Policy> fedBatched(const std::string& spec) {
    auto p = policy(spec);
    std::vector<std::vector<float>> prefix;
    for (int t = 0; t < 3; ++t) prefix.emplace_back(kRows[t].begin(), kRows[t].begin() + 3);
    p->observe(blank(1, 1, 2, {{0, 1, 2}}), onesQueries(1, {0, 1, 2}, probsFrom({prefix})));
    p->observe(blank(1, 1, 2, {{0, 1, 2, 3}}), onesQueries(1, {3}, probsFrom({{kRows[3]}})));
    return p;
}

}  // namespace

TEST(LruLfu, CountsUsesAgainstTauOverN) {
    for (auto feed : {fedOneByOne, fedBatched}) {
        for (int64_t budget : {2, 3}) {
            LayerState s = blank(1, 1, budget, {{0, 1, 2, 3}});
            const Plan lfu = feed("lfu")->plan(s);
            const Plan lru = feed("lru")->plan(s);
            const std::vector<float> uses = {3, 2, 1, 1}, last = {3, 2, 2, 3};
            for (int64_t i = 0; i < 4; ++i) {
                EXPECT_FLOAT_EQ(score(lfu, 0, i), uses[i]) << i;
                EXPECT_FLOAT_EQ(score(lru, 0, i), last[i]) << i;
            }
            if (budget == 2) {
                EXPECT_EQ(lfu.keep[0], ids({0, 1}));
                EXPECT_EQ(lru.keep[0], ids({0, 3}));
            } else {
                // Ties go to the more recent position: LFU 2 vs 3 -> 3; LRU 1 vs 2 -> 2.
                EXPECT_EQ(lfu.keep[0], ids({0, 1, 3}));
                EXPECT_EQ(lru.keep[0], ids({0, 2, 3}));
            }
        }
    }
}

TEST(LruLfu, TauScalesTheThreshold) {
    // τ = 2 at pos 3 needs ≥ .5: only the own key and entry 3 (.5).
    auto p = fedOneByOne("lfu:tau=2");
    const Plan plan = p->plan(blank(1, 1, 2, {{0, 1, 2, 3}}));
    // pos 0: 1 ≥ 2? no, but own -> 1. pos 1: .5 ≥ 1? no; own {1}. pos 2: own {2}. pos 3: own {3}.
    for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(score(plan, 0, i), 1.f) << i;
}
