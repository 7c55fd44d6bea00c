// The shared selection pieces on hand-computed cases.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/policy/select.h"

using namespace kvlens;

namespace {

at::Tensor row(std::vector<float> v) { return at::tensor(v, at::kFloat); }

void expectRow(const at::Tensor& t, const std::vector<float>& expected) {
    ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(t[i].item<float>(), expected[i], 1e-6) << "at " << i;
}

std::vector<int64_t> indices(const std::vector<Candidate>& c) {
    std::vector<int64_t> out;
    for (const auto& x : c) out.push_back(x.index);
    return out;
}

}  // namespace

TEST(Pooling, MaxIgnoresPadding) {
    const at::Tensor x = row({1, 5, 2, 0, 3});
    expectRow(pool1d(x, {}, 3, PoolKind::Max), {5, 5, 5, 3, 3});
    expectRow(pool1d(x, {}, 1, PoolKind::Max), {1, 5, 2, 0, 3});
    expectRow(pool1d(x, {}, 7, PoolKind::Max), {5, 5, 5, 5, 5});  // kernel wider than the keys
    // Negative scores: padding must not read as 0.
    expectRow(pool1d(row({-1, -2, -3}), {}, 3, PoolKind::Max), {-1, -1, -2});
}

TEST(Pooling, AvgCountsOnlyRealNeighbours) {
    const at::Tensor x = row({1, 5, 2, 0, 3});
    // Ends average 2 entries, not 3 (PyTorch's count_include_pad would give 2 and 1).
    expectRow(pool1d(x, {}, 3, PoolKind::Avg), {3, 8.f / 3, 7.f / 3, 5.f / 3, 1.5f});
    expectRow(pool1d(x, {}, 5, PoolKind::Avg), {8.f / 3, 2, 11.f / 5, 2.5f, 5.f / 3});
}

TEST(Pooling, MaskedEntriesNeitherGiveNorTake) {
    const at::Tensor x = row({1, 5, 2, 0, 3});
    const at::Tensor mask = at::tensor({1, 1, 1, 1, 0}, at::kByte).to(at::kBool);
    expectRow(pool1d(x, mask, 3, PoolKind::Max), {5, 5, 5, 2, 0});
    expectRow(pool1d(x, mask, 3, PoolKind::Avg), {3, 8.f / 3, 7.f / 3, 1, 0});
    // Batched rows with a broadcast mask.
    const at::Tensor two = at::stack({x, x * 2});
    const at::Tensor out = pool1d(two, mask.unsqueeze(0), 3, PoolKind::Max);
    expectRow(out[1], {10, 10, 10, 4, 0});
}

TEST(Pooling, RandomRowsMatchTheDefinition) {
    // The CPU path (doubling spans for max, shifted sums for mean) against
    // the definition written out: every kernel up to past the row length,
    // masks broadcast over rows, negative and tied values.
    at::manual_seed(3);
    for (int64_t L : {1, 2, 7, 40}) {
        const at::Tensor x = at::randint(-4, 5, {2, 3, L}).to(at::kFloat) / 2;  // ties on purpose
        const at::Tensor mask = at::rand({2, 1, L}) > 0.3;
        for (int64_t k = 1; k <= L + 3; ++k)
            for (PoolKind kind : {PoolKind::Max, PoolKind::Avg}) {
                const at::Tensor out = pool1d(x, mask, k, kind);
                const int64_t left = k / 2;
                for (int64_t a = 0; a < 2; ++a)
                    for (int64_t b = 0; b < 3; ++b)
                        for (int64_t j = 0; j < L; ++j) {
                            float want = 0, sum = 0;
                            int count = 0;
                            if (mask[a][0][j].item<bool>()) {
                                float best = -INFINITY;
                                for (int64_t i = j - left; i < j - left + k; ++i)
                                    if (i >= 0 && i < L && mask[a][0][i].item<bool>()) {
                                        best = std::max(best, x[a][b][i].item<float>());
                                        sum += x[a][b][i].item<float>();
                                        ++count;
                                    }
                                want = kind == PoolKind::Max ? best : sum / static_cast<float>(count);
                            }
                            EXPECT_FLOAT_EQ(out[a][b][j].item<float>(), want) << "L " << L << " k " << k << " j " << j;
                        }
            }
    }
}

TEST(GqaReduce, MeanMaxSumOverEachGroup) {
    // 4 query heads, 2 KV heads: heads 0,1 -> KV 0; heads 2,3 -> KV 1.
    const at::Tensor x = at::tensor({1.f, 3.f, 10.f, 20.f}).view({4, 1});
    expectRow(reduceGroups(x, 2, GqaReduce::Mean).view({-1}), {2, 15});
    expectRow(reduceGroups(x, 2, GqaReduce::Max).view({-1}), {3, 20});
    expectRow(reduceGroups(x, 2, GqaReduce::Sum).view({-1}), {4, 30});
}

TEST(TopK, TiesGoToTheMoreRecentPosition) {
    std::vector<Candidate> c = {{0.5f, 10, 0, 0}, {0.9f, 11, 0, 1}, {0.5f, 30, 0, 2}, {0.5f, 20, 0, 3}};
    EXPECT_EQ(indices(topK(c, 2)), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(indices(topK(c, 3)), (std::vector<int64_t>{1, 2, 3}));
    EXPECT_EQ(indices(topK(c, 9)).size(), 4u);
    // A NaN score ranks below everything.
    c.push_back({std::nanf(""), 99, 0, 4});
    EXPECT_EQ(indices(topK(c, 4)), (std::vector<int64_t>{1, 2, 3, 0}));
}

TEST(ProtectedSets, SinksFirstWhenTheBudgetIsShort) {
    Protected p = protectedSet(100, 4, 8, 64);
    EXPECT_EQ(p.sinks, 4);
    EXPECT_EQ(p.window, 8);
    p = protectedSet(100, 4, 8, 10);  // B < S + W: sinks, then the most recent for the rest
    EXPECT_EQ(p.sinks, 4);
    EXPECT_EQ(p.window, 6);
    p = protectedSet(100, 4, 8, 3);
    EXPECT_EQ(p.sinks, 3);
    EXPECT_EQ(p.window, 0);
    p = protectedSet(5, 4, 8, 64);  // a short head: the sets never overlap
    EXPECT_EQ(p.sinks + p.window, 5);
}

TEST(AdaptiveAllocation, FloorThenGlobalTopK) {
    // Head 0 has high scores, head 1 low ones; 6 slots, floor 2 per head.
    std::vector<std::vector<Candidate>> c(2);
    for (int64_t i = 0; i < 5; ++i) c[0].push_back({10.f - i, i, 0, i});
    for (int64_t i = 0; i < 4; ++i) c[1].push_back({1.f - 0.1f * i, i, 1, i});
    auto chosen = allocateAdaptive(c, 2, 6);
    EXPECT_EQ(chosen[0].size(), 4u);  // its floor 2 + the 2 global slots left
    EXPECT_EQ(chosen[1].size(), 2u);  // only its floor
    std::vector<int64_t> winners = indices(chosen[1]);  // a set: no order is promised
    std::sort(winners.begin(), winners.end());
    EXPECT_EQ(winners, (std::vector<int64_t>{0, 1}));
    // Without the floor head 1 gets nothing.
    chosen = allocateAdaptive(c, 0, 6);
    EXPECT_EQ(chosen[0].size(), 5u);
    EXPECT_EQ(chosen[1].size(), 1u);
    // A head with fewer candidates than the floor gives the rest away.
    c[1].resize(1);
    chosen = allocateAdaptive(c, 2, 6);
    EXPECT_EQ(chosen[0].size(), 5u);
    EXPECT_EQ(chosen[1].size(), 1u);
}
