// Rule-based and attention-free policies: window, streaming, random, knorm, full.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
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
    EXPECT_EQ(plan.reasons[0][5], TokenStatus::Window);
    EXPECT_EQ(plan.reasons[0][2], TokenStatus::Evicted);
    EXPECT_EQ(policy("window")->plan(layerOf(2, 3)).keep[0], ids({0, 1}));  // fits: keep all
}

TEST(Streaming, SinksPlusTheMostRecent) {
    Plan plan = policy("streaming:sinks=2")->plan(layerOf(8, 4));
    EXPECT_EQ(plan.keep[0], ids({0, 1, 6, 7}));
    EXPECT_EQ(plan.reasons[0][1], TokenStatus::Sink);
    EXPECT_EQ(plan.reasons[0][6], TokenStatus::Window);
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

TEST(KeyDiff, KeepsTheKeysLeastLikeTheHeadsMeanDirection) {
    // Plain loops: anchor = mean over the held keys of k / |k|, score = -cos(k, anchor).
    auto reference = [](const at::Tensor& k, const std::vector<bool>& held) {
        const int64_t L = k.size(0), D = k.size(1);
        auto kk = k.accessor<float, 2>();
        std::vector<double> anchor(static_cast<size_t>(D), 0.0), score(static_cast<size_t>(L));
        int n = 0;
        for (int64_t i = 0; i < L; ++i) {
            if (!held[static_cast<size_t>(i)]) continue;
            double norm = 0;
            for (int64_t d = 0; d < D; ++d) norm += double(kk[i][d]) * kk[i][d];
            for (int64_t d = 0; d < D; ++d) anchor[static_cast<size_t>(d)] += kk[i][d] / std::sqrt(norm);
            ++n;
        }
        double anorm = 0;
        for (double& a : anchor) anorm += (a /= n) * a;
        for (int64_t i = 0; i < L; ++i) {
            double dot = 0, norm = 0;
            for (int64_t d = 0; d < D; ++d) {
                dot += kk[i][d] * anchor[static_cast<size_t>(d)];
                norm += double(kk[i][d]) * kk[i][d];
            }
            score[static_cast<size_t>(i)] = -dot / std::sqrt(norm * anorm);
        }
        return score;
    };
    at::manual_seed(5);
    const at::Tensor k = at::randn({2, 9, 4});
    const Plan plan = policy("keydiff")->plan(makeState(k, k.clone(), 2, 3));
    for (int64_t h = 0; h < 2; ++h) {
        const std::vector<double> want = reference(k[h].contiguous(), std::vector<bool>(9, true));
        std::vector<int64_t> order(9);
        for (int64_t i = 0; i < 9; ++i) {
            order[static_cast<size_t>(i)] = i;
            EXPECT_NEAR(plan.scores[h][i].item<float>(), want[static_cast<size_t>(i)], 1e-5) << "head " << h << " key " << i;
        }
        std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return want[a] > want[b]; });
        std::vector<int64_t> top(order.begin(), order.begin() + 3);
        std::sort(top.begin(), top.end());
        EXPECT_EQ(plan.keep[h], top) << "head " << h;
    }
    // A freed slot (an earlier eviction) is not part of the anchor.
    LayerState s = makeState(k, k.clone(), 2, 3);
    s.valid = at::ones({2, 9}, at::kBool);
    s.valid[0][4] = false;
    const Plan masked = policy("keydiff")->plan(s);
    std::vector<bool> held(9, true);
    held[4] = false;
    const std::vector<double> want = reference(k[0].contiguous(), held);
    for (int64_t i = 0; i < 9; ++i)
        if (i != 4) EXPECT_NEAR(masked.scores[0][i].item<float>(), want[static_cast<size_t>(i)], 1e-5) << "key " << i;
    EXPECT_EQ(std::count(masked.keep[0].begin(), masked.keep[0].end(), 4), 0);
}

TEST(Full, KeepsEverything) {
    const Plan plan = policy("full")->plan(layerOf(10, 2, 0, 2));
    EXPECT_EQ(plan.keep[0].size(), 10u);
    EXPECT_EQ(plan.keep[1].size(), 10u);
}
