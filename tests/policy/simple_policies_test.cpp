// Rule-based and attention-free policies: window, streaming, random, knorm, full.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;

namespace {

LayerState layerOf(int64_t length, int64_t budget, int64_t layer = 0, int64_t kvHeads = 1) {
    const at::Tensor k = at::randn({kvHeads, length, 4});
    std::vector<std::vector<int64_t>> pos(static_cast<size_t>(kvHeads));
    for (auto& p : pos)
        for (int64_t i = 0; i < length; ++i) p.push_back(i);
    return makeState(k, k.clone(), kvHeads, budget, pos, layer);
}

}  // namespace

TEST(Window, KeepsTheLastB) {
    const Plan plan = policy("window")->plan(layerOf(6, 3));
    EXPECT_EQ(plan.keep[0], ids({3, 4, 5}));
    EXPECT_EQ(plan.reasons[0][5], KeepReason::Window);
    EXPECT_EQ(plan.reasons[0][2], KeepReason::Evicted);
    EXPECT_EQ(policy("window")->plan(layerOf(2, 3)).keep[0], ids({0, 1}));  // fits: keep all
}

TEST(Streaming, SinksPlusTheMostRecent) {
    Plan plan = policy("streaming:sinks=2")->plan(layerOf(8, 4));
    EXPECT_EQ(plan.keep[0], ids({0, 1, 6, 7}));
    EXPECT_EQ(plan.reasons[0][1], KeepReason::Sink);
    EXPECT_EQ(plan.reasons[0][6], KeepReason::Window);
    EXPECT_TRUE(std::isnan(plan.scores[0][0].item<float>()));
    // B < S: the earliest sinks only.
    plan = policy("streaming")->plan(layerOf(8, 3));
    EXPECT_EQ(plan.keep[0], ids({0, 1, 2}));
    // rerotate changes the cache's rotation, not the plan.
    EXPECT_EQ(policy("streaming:rerotate=true")->plan(layerOf(10, 6)).keep[0], ids({0, 1, 2, 3, 8, 9}));
}

TEST(Random, SeededAndUniform) {
    auto keep = [](const std::string& spec, int64_t layer, int64_t seqLen) {
        LayerState s = layerOf(64, 8, layer);
        s.seqLen = seqLen;
        return policy(spec)->plan(s).keep[0];
    };
    EXPECT_EQ(keep("random:seed=7", 0, 64), keep("random:seed=7", 0, 64));
    EXPECT_NE(keep("random:seed=7", 0, 64), keep("random:seed=8", 0, 64));
    EXPECT_NE(keep("random:seed=7", 0, 64), keep("random:seed=7", 1, 64));
    EXPECT_NE(keep("random:seed=7", 0, 64), keep("random:seed=7", 0, 65));
    // The window option keeps the last W.
    const auto w = keep("random:seed=7,window=3", 0, 64);
    EXPECT_EQ(w.size(), 8u);
    EXPECT_EQ(std::vector<int64_t>(w.end() - 3, w.end()), ids({61, 62, 63}));
    // Uniform: over many draws every entry is kept about B/L of the time.
    std::vector<int> hits(64, 0);
    for (int64_t seed = 0; seed < 400; ++seed)
        for (int64_t i : keep("random:seed=" + std::to_string(seed), 0, 64)) ++hits[i];
    for (int h : hits) {
        EXPECT_GT(h, 20);  // expected 50; 20 and 85 are > 4 standard deviations away
        EXPECT_LT(h, 85);
    }
}

TEST(Knorm, KeepsTheLowestNormsAndSkipsEarlyLayers) {
    // Norms 5, 1, 2, 10.
    const at::Tensor k = at::tensor({3.f, 4.f, 1.f, 0.f, 0.f, 2.f, 6.f, 8.f}).view({1, 4, 2});
    auto plan = [&](const std::string& spec, int64_t layer) {
        return policy(spec)->plan(makeState(k, k.clone(), 1, 2, {}, layer));
    };
    const Plan p2 = plan("knorm", 2);
    EXPECT_EQ(p2.keep[0], ids({1, 2}));
    EXPECT_NEAR(p2.scores[0][0].item<float>(), -5.f, 1e-6);
    EXPECT_EQ(plan("knorm", 0).keep[0], ids({0, 1, 2, 3}));
    EXPECT_EQ(plan("knorm", 1).keep[0], ids({0, 1, 2, 3}));
    EXPECT_EQ(plan("knorm:skip_layers=1", 0).keep[0], ids({1, 2}));
    EXPECT_EQ(plan("knorm:skip_layers=", 1).keep[0], ids({1, 2}));
}

TEST(Full, KeepsEverything) {
    const Plan plan = policy("full")->plan(layerOf(10, 2, 0, 2));
    EXPECT_EQ(plan.keep[0].size(), 10u);
    EXPECT_EQ(plan.keep[1].size(), 10u);
}
