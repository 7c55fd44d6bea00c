// KV bytes under the KV-sharing designs (core/eval/kv_memory.h), each number
// worked out by hand in the comment beside it.
#include <gtest/gtest.h>

#include "core/eval/kv_memory.h"

using namespace kvlens;

namespace {
const KvDesign& design(const std::vector<KvDesign>& ds, const std::string& id) {
    for (const KvDesign& d : ds)
        if (d.id == id) return d;
    throw std::runtime_error("no design " + id);
}
}  // namespace

TEST(KvMemory, SmolLM2ShapeByHand) {
    // SmolLM2-135M: 30 layers, 9 query heads, 3 KV heads of 64, bf16.
    const KvShape s{30, 9, 3, 64, 2};
    const std::vector<KvDesign> ds = kvDesigns(s);
    ASSERT_EQ(ds.size(), 6u);
    EXPECT_EQ(design(ds, "mha").bytesPerToken(s), 69120u);   // 2 * 30 * 9 * 64 * 2
    EXPECT_EQ(design(ds, "gqa").bytesPerToken(s), 23040u);   // 2 * 30 * 3 * 64 * 2
    EXPECT_TRUE(design(ds, "gqa").isModel);
    EXPECT_FALSE(design(ds, "mha").isModel);
    EXPECT_EQ(design(ds, "mqa").bytesPerToken(s), 7680u);    // 2 * 30 * 1 * 64 * 2
    EXPECT_EQ(design(ds, "cla2").bytesPerToken(s), 11520u);  // 15 layers store K/V
    EXPECT_EQ(design(ds, "cla3").bytesPerToken(s), 7680u);   // 10 layers
    EXPECT_EQ(design(ds, "yoco").bytesPerToken(s), 11520u);  // the first 15 layers
    // 25 % of 2048 tokens: 512 held; GQA 23040 * 2048 = 47185920 in full, 23040 * 512 = 11796480 held.
    const auto rows = kvMemoryTable(s, {2048, 100}, true, parseBudget("25%"));
    EXPECT_EQ(rows[1].design.id, "gqa");
    EXPECT_EQ(rows[1].fullBytes[0], 47185920u);
    EXPECT_EQ(rows[1].budgetBytes[0], 11796480u);
    EXPECT_EQ(rows[1].budgetBytes[1], 23040u * 25u);  // 25 % of 100
    // A budget above the context holds the context.
    const auto big = kvMemoryTable(s, {100}, true, parseBudget("512"));
    EXPECT_EQ(big[1].budgetBytes[0], big[1].fullBytes[0]);
    EXPECT_TRUE(kvMemoryTable(s, {100}, false, {})[0].budgetBytes.empty());
}

TEST(KvMemory, OddLayerCountsAndTheModelsOwnDesign) {
    // 16 layers (Llama-3.2-1B): CLA k=3 stores ceil(16 / 3) = 6 layers: 2 * 6 * 8 * 64 * 4 = 24576 B (f32).
    const KvShape llama{16, 32, 8, 64, 4};
    EXPECT_EQ(design(kvDesigns(llama), "cla3").bytesPerToken(llama), 24576u);
    // An MHA model is listed once, as MHA, and marked as its own.
    const KvShape mha{3, 4, 4, 16, 4};
    const auto ds = kvDesigns(mha);
    EXPECT_TRUE(design(ds, "mha").isModel);
    for (const KvDesign& d : ds) EXPECT_NE(d.id, "gqa");
    // An MQA model: MQA is its own; one layer cannot share across layers.
    const KvShape mqa{1, 4, 1, 16, 2};
    const auto qs = kvDesigns(mqa);
    EXPECT_TRUE(design(qs, "mqa").isModel);
    for (const KvDesign& d : qs) EXPECT_TRUE(d.id != "cla2" && d.id != "yoco") << d.id;
}

TEST(KvMemory, FormatsBytes) {
    EXPECT_EQ(formatBytes(512), "512 B");
    EXPECT_EQ(formatBytes(1536), "1.5 KiB");
    EXPECT_EQ(formatBytes(3ull << 30), "3.0 GiB");
}
