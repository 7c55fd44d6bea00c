// RoPE frequencies (hand-computed), rotation algebra (what re-rotation relies
// on), and the sampler's determinism.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/model/rope.h"
#include "core/run/sampler.h"

using namespace kvlens;

namespace {

ModelConfig ropeConfig(int64_t headDim, double theta) {
    ModelConfig c;
    c.headDim = headDim;
    c.ropeTheta = theta;
    return c;
}

}  // namespace

TEST(Rope, PlainFrequencies) {
    auto f = Rope::inverseFrequencies(ropeConfig(8, 10000.0));
    ASSERT_EQ(f.size(), 4u);
    EXPECT_NEAR(f[0], 1.0, 1e-7);
    EXPECT_NEAR(f[1], 0.1, 1e-7);
    EXPECT_NEAR(f[2], 0.01, 1e-8);
    EXPECT_NEAR(f[3], 0.001, 1e-9);
}

TEST(Rope, LinearScalingDividesEveryFrequency) {
    ModelConfig c = ropeConfig(8, 10000.0);
    c.ropeScaling.type = RopeScaling::Type::Linear;
    c.ropeScaling.factor = 4.0;
    auto f = Rope::inverseFrequencies(c);
    EXPECT_NEAR(f[0], 0.25, 1e-7);
    EXPECT_NEAR(f[3], 0.00025, 1e-9);
}

TEST(Rope, Llama3ScalingKeepsHighSmoothsMiddleDividesLow) {
    // original context 64, low 1, high 4, factor 8: wavelengths 2π/f are
    // 6.28 (< 16: kept), 62.8 (between 16 and 64: smoothed), 628 and 6283 (> 64: /8).
    ModelConfig c = ropeConfig(8, 10000.0);
    c.ropeScaling = {RopeScaling::Type::Llama3, 8.0, 1.0, 4.0, 64};
    auto f = Rope::inverseFrequencies(c);
    EXPECT_NEAR(f[0], 1.0, 1e-7);
    const double smooth = (64.0 / (2 * M_PI / 0.1) - 1.0) / (4.0 - 1.0);
    EXPECT_NEAR(f[1], (1 - smooth) * 0.1 / 8 + smooth * 0.1, 1e-8);
    EXPECT_NEAR(f[2], 0.01 / 8, 1e-9);
    EXPECT_NEAR(f[3], 0.001 / 8, 1e-10);
}

TEST(Rope, RotateHalfLayoutAndComposition) {
    ModelConfig c = ropeConfig(4, 10000.0);
    Rope rope(c, at::kCPU);
    // x = e0 (first element of the first pair); the pair of index 0 is (0, 2)
    // in the rotate-half layout, so a rotation by θ=pos*1 moves mass to index 2.
    at::Tensor x = at::zeros({1, 1, 4});
    x[0][0][0] = 1.0;
    at::Tensor r = rope.apply(x, at::tensor({1}, at::kLong));
    EXPECT_NEAR(r[0][0][0].item<float>(), std::cos(1.0), 1e-6);
    EXPECT_NEAR(r[0][0][2].item<float>(), std::sin(1.0), 1e-6);
    EXPECT_NEAR(r[0][0][1].item<float>(), 0.0, 1e-6);

    // Rotating by a then by b equals rotating by a+b (re-rotation relies on it).
    at::manual_seed(0);
    at::Tensor y = at::randn({2, 3, 4});
    at::Tensor ab = rope.apply(rope.apply(y, at::tensor({5, 6, 7}, at::kLong)), at::tensor({-3, 2, 10}, at::kLong));
    at::Tensor direct = rope.apply(y, at::tensor({2, 8, 17}, at::kLong));
    EXPECT_TRUE(at::allclose(ab, direct, 1e-5, 1e-5));
}

TEST(Sampler, GreedyTakesFirstMaximum) {
    Sampler s({});
    EXPECT_EQ(s.next(at::tensor({0.5f, 2.0f, 2.0f, -1.0f})), 1);
}

TEST(Sampler, SeededSamplingReproducesAndFollowsProbabilities) {
    SamplingOptions o;
    o.greedy = false;
    o.seed = 42;
    at::Tensor logits = at::tensor({0.0f, static_cast<float>(std::log(3.0))});  // p = 0.25, 0.75
    Sampler a(o), b(o);
    int ones = 0;
    for (int i = 0; i < 4000; ++i) {
        int64_t x = a.next(logits);
        ASSERT_EQ(x, b.next(logits));
        ones += static_cast<int>(x);
    }
    EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
    SamplingOptions o;
    o.greedy = false;
    o.topP = 0.5;  // the most likely token alone already holds 0.6
    Sampler s(o);
    at::Tensor logits = at::log(at::tensor({0.1f, 0.6f, 0.3f}));
    for (int i = 0; i < 200; ++i) ASSERT_EQ(s.next(logits), 1);
}

TEST(Sampler, RejectsBadSettings) {
    SamplingOptions o;
    o.greedy = false;
    o.temperature = 0;
    EXPECT_THROW(Sampler{o}, ArgumentError);
    o.temperature = 1;
    o.topP = 1.5;
    EXPECT_THROW(Sampler{o}, ArgumentError);
}
