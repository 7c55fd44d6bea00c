// Soak (label slow): 2,000 decode steps with every registered policy at once
// on the bundled model. At every step each policy holds no more entries than
// its budget allows (tests/robustness/held_bound.h: prefill_once policies
// append generated tokens by definition), its KV bytes match the entries
// held, and the process's resident memory
// after a warm-up does not grow beyond what the full cache's own growth and
// the trace's per-token vectors explain.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "core/paths.h"
#include "core/policy/policy_info.h"
#include "core/run/model_handle.h"
#include "core/run/session.h"
#include "tests/core/test_models.h"
#include "tests/robustness/held_bound.h"

using namespace kvlens;

namespace {

// Resident set size in bytes (/proc/self/statm: pages).
int64_t residentBytes() {
    std::ifstream in("/proc/self/statm");
    int64_t size = 0, resident = 0;
    in >> size >> resident;
    return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

constexpr int kSteps = 2000;
constexpr int kWarmup = 200;
constexpr int64_t kPrompt = 64;
constexpr int64_t kBudget = 32;

}  // namespace

TEST(Soak, TwoThousandStepsEveryPolicyStayWithinBudgetAndRss) {
    auto model = loadModel(bundledModelDir(), RunSettings{});
    const ModelSummary summary = summarizeModel(*model);
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, summary.vocabSize, 5);
    for (const auto& info : policyRegistry())
        if (info.id != "full") so.policies.push_back(parsePolicySpec(info.id));
    so.budget = parseBudget(std::to_string(kBudget));
    Session s(model, so);
    auto t = s.start();
    const uint64_t perEntry = summary.kvBytesPerToken / static_cast<uint64_t>(summary.layers * summary.kvHeads);

    int64_t rssWarm = 0;
    uint64_t maxHeldBytes = 0;
    for (int step = 1; step <= kSteps; ++step) {
        t = s.step();
        for (size_t p = 1; p < t->policies.size(); ++p) {
            const PolicyTrace& pt = t->policies[p];
            uint64_t held = 0;
            for (size_t l = 0; l < pt.layers.size(); ++l)
                for (const auto& h : pt.layers[l].heads) {
                    ASSERT_LE(h.held, test::heldBound(pt, pt.layers[l], step))
                        << pt.label << " layer " << l << " step " << step;
                    held += static_cast<uint64_t>(h.held);
                }
            // Bytes held are the entries held, and the tensors allocated are no more.
            ASSERT_EQ(pt.bytesHeld, held * perEntry) << pt.label << " step " << step;
            ASSERT_LE(pt.bytesHeld, pt.bytesAllocated) << pt.label << " step " << step;
            if (pt.schedule == "every_step") maxHeldBytes = std::max(maxHeldBytes, pt.bytesHeld);
        }
        if (step == kWarmup) rssWarm = residentBytes();
    }
    const int64_t rssEnd = residentBytes();
    // What may legitimately grow from step 200 to 2000: the full cache (every
    // token's K and V), and per step one trace of statuses/scores/ranks per
    // policy, layer and head (the latest trace only is alive). 8 MiB of slack
    // for the allocator.
    const int64_t tokens = kPrompt + kSteps, grownTokens = kSteps - kWarmup;
    const int64_t fullGrowth = grownTokens * static_cast<int64_t>(summary.kvBytesPerToken);
    const int64_t traceBytes =
        static_cast<int64_t>(t->policies.size()) * summary.layers * summary.kvHeads * tokens * (1 + 4 + 4);
    const int64_t allowed = fullGrowth + 2 * traceBytes + (8 << 20);
    std::printf("[ soak     ] %zu policies, %d steps: RSS %.1f MiB after %d steps, %.1f MiB at the end "
                "(growth %.1f MiB, allowed %.1f MiB); most KV held by an every_step policy %.1f KiB\n",
                t->policies.size() - 1, kSteps, rssWarm / 1048576.0, kWarmup, rssEnd / 1048576.0,
                (rssEnd - rssWarm) / 1048576.0, allowed / 1048576.0, maxHeldBytes / 1024.0);
    EXPECT_LE(rssEnd - rssWarm, allowed);
}
