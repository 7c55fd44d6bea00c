// The registry read by several threads while plug-ins are registered
// (torch-free; in the sanitizer build too). An executable of its own: the
// policies it adds have no maker, which the other registry tests would see.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/policy/policy_info.h"

using namespace kvlens;

// Plug-ins are registered while other threads read the registry (the GUI's
// worker runs policies while the user opens a TorchScript scorer): readers
// never see a torn list, and references they hold stay valid. Under TSan a
// race here is reported; without it, torn reads fail the checks below.
TEST(Registry, ReadsWhileRegisteringAreSafe) {
    const size_t before = policyRegistry().size();
    constexpr int kAdded = 2000;
    std::atomic<bool> done{false};
    std::atomic<int64_t> reads{0};
    auto reader = [&] {
        const PolicyInfo& full = policyRegistry().front();
        while (!done.load()) {
            size_t n = 0;
            for (const PolicyInfo& info : policyRegistry()) {
                ASSERT_FALSE(info.id.empty());
                ++n;
            }
            ASSERT_GE(n, before);
            ASSERT_EQ(findPolicy("full").id, full.id);
            ++reads;
        }
    };
    std::vector<std::thread> readers;
    for (int i = 0; i < 3; ++i) readers.emplace_back(reader);
    while (reads.load() < 3) std::this_thread::yield();  // the readers are reading
    for (int i = 0; i < kAdded; ++i)
        registerPolicyInfo(makePolicyInfo("race_" + std::to_string(i), "race", "-", "-", Schedule::PrefillOnce, false,
                                          false));
    done = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(policyRegistry().size(), before + kAdded);
    EXPECT_GT(reads.load(), 0);
    EXPECT_EQ(findPolicy("race_" + std::to_string(kAdded - 1)).name, "race");
}
