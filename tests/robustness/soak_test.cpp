// Soak (label slow): 2,000 decode steps with every registered policy at once
// on the bundled model. At every step each policy holds no more entries than
// its budget allows (tests/robustness/held_bound.h: prefill_once policies
// append generated tokens by definition), its KV bytes match the entries
// held, and the process's resident memory
// after a warm-up does not grow beyond what the caches that grow by
// definition and the trace's per-token vectors explain.
#include <algorithm>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "core/paths.h"
#include "core/policy/policy_info.h"
#include "core/run/model_handle.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"
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

// KV tensor bytes allocated by every run, the full cache included.
int64_t kvAllocated(const Trace& t) {
    int64_t n = 0;
    for (const auto& p : t.policies) n += static_cast<int64_t>(p.bytesAllocated);
    return n;
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
    // Every policy with its defaults, except that knorm evicts in every layer:
    // the layers it skips by default keep everything (their trace still
    // names the budget, which this test could not tell from a leak).
    for (const auto& info : policyRegistry())
        if (!info.fullCache) so.policies.push_back(parsePolicySpec(info.id == "knorm" ? "knorm:skip_layers=99" : info.id));
    so.budget = parseBudget(std::to_string(kBudget));
    Session s(model, so);
    auto t = s.start();
    const uint64_t perEntry = summary.kvBytesPerToken / static_cast<uint64_t>(summary.layers * summary.kvHeads);

    int64_t rssWarm = 0, kvWarm = 0;
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
        if (step == kWarmup) {
            rssWarm = residentBytes();
            kvWarm = kvAllocated(*t);
        }
    }
    const int64_t rssEnd = residentBytes(), kvEnd = kvAllocated(*t);
    // What may legitimately grow from step 200 to 2000: the KV tensors of the
    // caches that grow by definition (the full cache, prefill_once policies'
    // generated tokens), measured; the latest trace's per-token statuses,
    // scores and ranks for every policy, layer and head (9 bytes a token);
    // 16 MiB of slack per 12 runs for the allocator and the per-step vectors
    // (metrics, labels, generated ids): with 12 policies 12.8 MiB were
    // unexplained over 1,800 steps (about 7 KiB a step); it grows with the
    // runs (2026-12-05: 13 policies 14-16 MiB, 19 policies 21-25 MiB, two
    // runs each). A leak of one KV entry per policy and step would add
    // policies × 1800 × 2 KiB (19 policies: 67 MiB).
    const int64_t tokens = kPrompt + kSteps;
    const int64_t traceBytes =
        static_cast<int64_t>(t->policies.size()) * summary.layers * summary.kvHeads * tokens * (1 + 4 + 4);
    const int64_t slack = (int64_t{16} << 20) * static_cast<int64_t>(t->policies.size() - 1) / 12;
    const int64_t allowed = (kvEnd - kvWarm) + 2 * traceBytes + std::max<int64_t>(slack, int64_t{16} << 20);
    std::printf("[ soak     ] %zu policies, %d steps: RSS %.1f MiB after %d steps, %.1f MiB at the end "
                "(growth %.1f MiB; KV tensors grew %.1f MiB; allowed %.1f MiB); most KV held by an every_step "
                "policy %.1f KiB\n",
                t->policies.size() - 1, kSteps, rssWarm / 1048576.0, kWarmup, rssEnd / 1048576.0,
                (rssEnd - rssWarm) / 1048576.0, (kvEnd - kvWarm) / 1048576.0, allowed / 1048576.0,
                maxHeldBytes / 1024.0);
    EXPECT_LE(rssEnd - rssWarm, allowed);
}
