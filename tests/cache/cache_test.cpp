// KvCache bookkeeping on its own (no model): storage, masks and memory.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/cache/kv_cache.h"
#include "core/error.h"

using namespace kvlens;

namespace {

// Entry e of every head holds the value e (so gathers are visible).
void appendTokens(KvCache& c, int64_t layer, int64_t n, float base) {
    at::Tensor k = (at::arange(n, at::kFloat) + base).view({1, n, 1}).expand({c.kvHeads(), n, c.headDim()}).contiguous();
    c.append(layer, k, k.clone());
}

}  // namespace

TEST(KvCache, AppendTracksPositionsAndMemory) {
    KvCache c(/*layers=*/1, /*kvHeads=*/2, /*headDim=*/4, at::kFloat, at::kCPU, nullptr);
    appendTokens(c, 0, 5, 0);
    c.advance(5);
    appendTokens(c, 0, 1, 5);
    c.advance(1);
    EXPECT_EQ(c.seqLen(), 6);
    EXPECT_EQ(c.length(0, 1), 6);
    EXPECT_EQ(c.positions(0, 1), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(c.bytesHeld(), 2u * 6 * 2 * 4 * sizeof(float));  // heads × entries × (K+V) × D × 4
    EXPECT_GE(c.bytesAllocated(), c.bytesHeld());
}

TEST(KvCache, RaggedApplyPadsMasksAndKeepsOrder) {
    // 40 entries, 37 and 39 evicted: beyond the freed-column bound, so the
    // kept entries are gathered into contiguous, padded storage.
    KvCache c(1, 2, 4, at::kFloat, at::kCPU, nullptr);
    appendTokens(c, 0, 40, 0);
    c.advance(40);
    c.apply(0, std::vector<std::vector<int64_t>>{{0, 3, 7}, {6}});
    EXPECT_EQ(c.positions(0, 0), (std::vector<int64_t>{0, 3, 7}));
    EXPECT_EQ(c.positions(0, 1), (std::vector<int64_t>{6}));
    EXPECT_EQ(c.bytesHeld(), 4u * 2 * 4 * sizeof(float));
    // A new token lands in the same column for both heads; head 1's padding stays masked.
    appendTokens(c, 0, 1, 100);
    c.advance(1);
    at::Tensor pos = c.positionTensor(0);
    EXPECT_TRUE(at::equal(pos, at::tensor({0, 3, 7, 40, 6, -1, -1, 40}, at::kLong).view({2, 4})));
    auto view = c.append(0, at::zeros({2, 1, 4}), at::zeros({2, 1, 4}));
    ASSERT_TRUE(view.valid.defined());
    EXPECT_TRUE(at::equal(view.valid, at::tensor({1, 1, 1, 1, 1, 1, 0, 0, 1, 1}, at::kLong).view({2, 5}).to(at::kBool)));
    // Values follow their entries through the gather.
    EXPECT_FLOAT_EQ(view.k[0][2][0].item<float>(), 7.f);
    EXPECT_FLOAT_EQ(view.k[1][0][0].item<float>(), 6.f);
    EXPECT_FLOAT_EQ(view.k[1][3][0].item<float>(), 100.f);
}

TEST(KvCache, FewEvictionsFreeColumnsThatNewTokensReuse) {
    // The every-step pattern: evict one entry per head (a different one per
    // head), append one token. No data moves and no storage grows.
    KvCache c(1, 2, 4, at::kFloat, at::kCPU, nullptr);
    appendTokens(c, 0, 32, 0);
    c.advance(32);
    const uint64_t allocated = c.bytesAllocated();
    for (int64_t step = 0; step < 100; ++step) {
        std::vector<std::vector<int64_t>> keep(2);
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < c.length(0, h); ++i)
                if (i != (h == 0 ? 0 : c.length(0, h) - 5)) keep[h].push_back(i);
        c.apply(0, keep);
        auto view = c.append(0, at::full({2, 1, 4}, 1000.f + step), at::full({2, 1, 4}, 1000.f + step));
        c.advance(1);
        EXPECT_EQ(view.k.size(1), 32) << "the new token reuses a freed column";
        EXPECT_FALSE(view.valid.defined()) << "every column is in use again";
    }
    EXPECT_EQ(c.bytesAllocated(), allocated);
    EXPECT_EQ(c.bytesHeld(), 2u * 32 * 2 * 4 * sizeof(float));
    // Entry order is position order whatever the columns: head 0 dropped its
    // oldest entry each step, so it holds positions 100..131.
    ASSERT_EQ(c.positions(0, 0).size(), 32u);
    EXPECT_EQ(c.positions(0, 0).front(), 100);
    EXPECT_EQ(c.positions(0, 0).back(), 131);
    auto e = c.entries(0);
    for (int64_t i = 0; i < 32; ++i) {
        const int64_t p = c.positions(0, 0)[i];
        EXPECT_FLOAT_EQ(e.k[0][i][0].item<float>(), p < 32 ? float(p) : 1000.f + float(p - 32)) << i;
    }
}

TEST(KvCache, EvictionShrinksTheAllocation) {
    KvCache c(2, 1, 16, at::kFloat, at::kCPU, nullptr);
    for (int64_t l = 0; l < 2; ++l) appendTokens(c, l, 1000, 0);
    c.advance(1000);
    const uint64_t before = c.bytesAllocated();
    for (int64_t l = 0; l < 2; ++l) c.apply(l, std::vector<int64_t>{0, 1, 2, 3, 998, 999});
    EXPECT_EQ(c.bytesHeld(), 2u * 6 * 2 * 16 * sizeof(float));
    EXPECT_LT(c.bytesAllocated() * 20, before) << "apply must free what it evicts";
    EXPECT_EQ(c.positions(1, 0), (std::vector<int64_t>{0, 1, 2, 3, 998, 999}));
}

TEST(KvCache, RejectsInvalidKeepLists) {
    KvCache c(1, 2, 4, at::kFloat, at::kCPU, nullptr);
    appendTokens(c, 0, 4, 0);
    c.advance(4);
    using Keep = std::vector<std::vector<int64_t>>;
    EXPECT_THROW(c.apply(0, Keep{{1, 0}, {0}}), Error);     // unsorted
    EXPECT_THROW(c.apply(0, Keep{{1, 1}, {0}}), Error);     // duplicate
    EXPECT_THROW(c.apply(0, Keep{{0, 4}, {0}}), Error);     // out of range
    EXPECT_THROW(c.apply(0, Keep{{0}}), Error);             // one list for two heads
    EXPECT_THROW(c.apply(3, Keep{{0}, {0}}), Error);        // no such layer
    EXPECT_EQ(c.length(0, 0), 4) << "a rejected plan must leave the cache untouched";
}

TEST(KvCache, RerotateNeedsRope) {
    EXPECT_THROW(KvCache(1, 1, 4, at::kFloat, at::kCPU, nullptr, CacheOptions{true}), ArgumentError);
}
