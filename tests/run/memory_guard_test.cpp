// The memory guard (issue 50): a Session estimates what it will hold before
// it starts; past its budget the attention map keeps the latest queries
// only, and a run that cannot fit at all is refused in one sentence. A
// 38,000-token prompt under an address-space limit runs and says what it
// dropped.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <unistd.h>

#include "core/error.h"
#include "core/model/model.h"
#include "core/eval/kv_memory.h"
#include "core/run/memory_guard.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

std::shared_ptr<const Model> smallModel(int64_t positions) {
    test::ModelOptions o;
    o.hiddenSize = 16;
    o.intermediateSize = 16;
    o.numLayers = 1;
    o.numHeads = 2;
    o.numKvHeads = 1;
    o.maxPositions = positions;
    return test::sharedRandomModel("memory-guard-" + std::to_string(positions), Family::Llama, o, 47);
}

SessionOptions options(int64_t promptTokens, int64_t steps) {
    SessionOptions so;
    so.prompt = test::randomTokens(promptTokens, 64, 9);
    so.policies = {parsePolicySpec("snapkv")};
    so.budget = parseBudget("25%");
    so.attention = {true, 0, 1};
    so.refreshable = true;  // as the GUI runs it: every Trace and the prompt record kept
    so.plannedSteps = steps;
    return so;
}

uint64_t addressSpaceInUse() {
    uint64_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST(MemoryGuard, TheEstimateCountsEachPart) {
    const ModelConfig& c = smallModel(256)->config();
    RunShape s;
    s.tokens = 100;
    s.steps = 4;
    s.runs = 3;
    s.capture = true;
    const RunMemory m = estimateRunMemory(c, s);
    EXPECT_EQ(m.kv, 3u * 100u * c.kvBytesPerToken(4));
    EXPECT_EQ(m.attention, 3u * (2u * 100u * 101u + 64u * 100u));  // rows of 1..100 floats
    EXPECT_EQ(m.traces, 2u * 3u * 1u * 100u * 9u);                  // the last Trace and the one before
    EXPECT_EQ(m.record, 0u);
    s.captureFrom = 90;
    EXPECT_EQ(estimateRunMemory(c, s).attention, 3u * (2u * (100u * 101u - 90u * 91u) + 64u * 10u));
    EXPECT_GT(defaultMemoryBudget(), 0u);
}

TEST(MemoryGuard, PastTheBudgetTheMapKeepsTheLatestQueriesAndSaysSo) {
    SessionOptions so = options(200, 4);
    RunShape shape;
    shape.tokens = 204;
    shape.steps = 4;
    shape.runs = 2;
    shape.capture = true;
    shape.keepTraces = true;
    RunShape bare = shape;
    bare.capture = false;
    const ModelConfig& c = smallModel(256)->config();
    // Room for the run and about a quarter of the map.
    so.memoryBudget = estimateRunMemory(c, bare).total() + estimateRunMemory(c, shape).attention / 4;
    Session s(smallModel(256), so);
    EXPECT_NE(s.memoryNote().find("attention captured for the last"), std::string::npos) << s.memoryNote();
    auto t = s.start();
    for (int i = 0; i < 4; ++i) t = s.step();
    ASSERT_EQ(t->attention.size(), 2u);
    const AttentionMap& map = t->attention[1];
    ASSERT_EQ(map.size, 204);
    EXPECT_FALSE(map.rows[0]);               // the oldest queries were not kept
    EXPECT_TRUE(map.rows[203]);              // the latest were
    EXPECT_TRUE(std::isfinite(map.at(203, 203)));
    int64_t kept = 0;
    for (const auto& r : map.rows) kept += r ? 1 : 0;
    EXPECT_GT(kept, 20);  // a quarter of the map is its latest ~13 % of rows
    EXPECT_LT(kept, 204);
    EXPECT_NE(s.memoryNote().find("the last " + std::to_string(kept) + " of 204"), std::string::npos) << s.memoryNote();

    so.memoryBudget = 0;  // the default budget: everything fits, nothing is said
    EXPECT_TRUE(Session(smallModel(256), so).memoryNote().empty());
}

TEST(MemoryGuard, ARunThatCannotFitIsRefusedInOneSentence) {
    SessionOptions so = options(200, 4);
    so.memoryBudget = 1000;
    try {
        Session s(smallModel(256), so);
        FAIL() << "a run past its memory budget started";
    } catch (const MemoryError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("memory budget is 1000 B"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
}

// The budget as a user types it (compare/export --memory-budget, Run ▸
// Memory budget): units of 1024, or bytes; nonsense and tiny or absurd sizes
// are refused naming what was typed.
TEST(MemoryGuard, SizesReadAsUsersTypeThem) {
    EXPECT_EQ(parseMemorySize("8G"), 8ull << 30);
    EXPECT_EQ(parseMemorySize(" 512m "), 512ull << 20);
    EXPECT_EQ(parseMemorySize("1.5GiB"), 3ull << 29);
    EXPECT_EQ(parseMemorySize("2TB"), 2ull << 40);
    EXPECT_EQ(parseMemorySize("1073741824"), 1ull << 30);
    for (const char* bad : {"", "lots", "-4G", "8X", "1e9", "nan", "inf", "1K", "2000T", "8 G B"}) {
        try {
            parseMemorySize(bad, "--memory-budget");
            ADD_FAILURE() << "'" << bad << "' was read as a size";
        } catch (const ArgumentError& e) {
            EXPECT_NE(std::string(e.what()).find("--memory-budget: '" + std::string(bad) + "' is not a memory size"),
                      std::string::npos)
                << e.what();
        }
    }
}

// The case: a 38,000-token prompt, under an address-space limit of
// what the process has mapped plus 3 GiB. The whole attention map of the
// full cache and one policy would be 5.8 GB; the guard keeps the latest
// queries, and the run finishes.
TEST(MemoryGuard, ALongPromptUnderAnAddressSpaceLimitRunsAndSaysWhatItDropped) {
    constexpr int64_t kTokens = 38000;
    const auto model = smallModel(kTokens + 64);
    SessionOptions so = options(kTokens, 2);
    rlimit before{};
    ASSERT_EQ(getrlimit(RLIMIT_AS, &before), 0);
    rlimit limited = before;
    limited.rlim_cur = addressSpaceInUse() + (3ull << 30);
    ASSERT_EQ(setrlimit(RLIMIT_AS, &limited), 0);
    std::string note;
    std::shared_ptr<const Trace> t;
    try {
        Session s(model, so);
        note = s.memoryNote();
        t = s.start();
        for (int i = 0; i < 2; ++i) t = s.step();
    } catch (const std::exception& e) {
        setrlimit(RLIMIT_AS, &before);
        FAIL() << e.what();
    }
    setrlimit(RLIMIT_AS, &before);
    EXPECT_NE(note.find("attention captured for the last"), std::string::npos) << note;
    ASSERT_TRUE(t);
    EXPECT_EQ(t->tokens.size(), static_cast<size_t>(kTokens + 2));
    EXPECT_TRUE(t->attention[0].rows.back());
    EXPECT_FALSE(t->attention[0].rows.front());
    std::cout << "[ guard ] " << note << "\n";
}
