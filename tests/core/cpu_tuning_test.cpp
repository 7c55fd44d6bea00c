// core/cpu_tuning and the thread settings that reach OpenBLAS. Every test
// binary runs through restartWithTunedBlas (test main), so this process is
// the restarted one: OpenMP's threads wait passively unless the user chose a
// policy, and OpenBLAS runs this CPU's kernels rather than its pre-AVX
// fallback.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_tuning.h"
#include "core/model/device_internal.h"
#include "core/run/parallel_runs.h"

TEST(CpuTuning, TestsRunWithPassiveOpenMpWaiting) {
    const char* tuned = std::getenv("KVLENS_TUNED");
    if (!tuned) GTEST_SKIP() << "no restart: OPENBLAS_CORETYPE and OMP_WAIT_POLICY came from the environment";
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    if (std::string(tuned).find("omp") != std::string::npos) {
        ASSERT_NE(policy, nullptr);
        EXPECT_STREQ(policy, "PASSIVE");
    } else {
        EXPECT_TRUE(policy || std::getenv("GOMP_SPINCOUNT")) << "restarted without choosing how OpenMP waits";
    }
}

// Where the kernel gives transparent huge pages on request, the restart
// asks glibc for them, and a large block is then backed by huge pages.
TEST(CpuTuning, HugePagesWhereTheKernelGivesThemOnRequest) {
    const char* tuned = std::getenv("KVLENS_TUNED");
    if (!tuned || std::string(tuned).find("thp") == std::string::npos)
        GTEST_SKIP() << "no huge pages asked for (the kernel's mode is not madvise, or GLIBC_TUNABLES was set)";
    ASSERT_NE(std::getenv("GLIBC_TUNABLES"), nullptr);
    EXPECT_STREQ(std::getenv("GLIBC_TUNABLES"), "glibc.malloc.hugetlb=1");
    // (Asked at run time: clang's AddressSanitizer does not define __SANITIZE_ADDRESS__.)
    if (dlsym(RTLD_DEFAULT, "__asan_init"))
        GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc's malloc, which the tunable configures";
    auto hugeKiB = [] {
        std::ifstream in("/proc/self/smaps_rollup");
        std::string key;
        long kib = 0;
        while (in >> key)
            if (key == "AnonHugePages:" && in >> kib) return kib;
        return 0L;
    };
    const long before = hugeKiB();
    std::vector<char> block(64 << 20);
    for (size_t i = 0; i < block.size(); i += 4096) block[i] = 1;
    EXPECT_GE(hugeKiB() - before, 32 * 1024) << "64 MiB touched, under 32 MiB of it on huge pages";
}

TEST(CpuTuning, OpenBlasRunsModernKernels) {
    using CoreName = const char* (*)();
    auto coreName = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!coreName || !kvlens::preferredOpenBlasCore()) GTEST_SKIP() << "not OpenBLAS, or a CPU without AVX2";
    const std::string core = coreName();
    for (const char* old : {"Prescott", "Core2", "Nehalem", "Penryn", "Dunnington", "Atom", "Northwood"})
        EXPECT_NE(core, old) << "OpenBLAS runs its " << core << " fallback kernels";
}

// --threads reaches OpenBLAS's own pool, and parallel Session runs multiply
// on their own threads (pool size 1 while they run), restoring it after.
TEST(CpuTuning, ThreadSettingsReachOpenBlasPool) {
    const int before = kvlens::blasThreads();
    if (before < 0) GTEST_SKIP() << "the BLAS is not OpenBLAS";
    kvlens::applyThreads(1);
    EXPECT_EQ(kvlens::blasThreads(), 1);
    kvlens::applyThreads(2);
    EXPECT_EQ(kvlens::blasThreads(), 2);
    std::atomic<int> seen{0};
    kvlens::runInParallel(4, 2, [&](size_t, const std::atomic<bool>&) {
        if (kvlens::blasThreads() == 1) ++seen;
    });
    EXPECT_EQ(seen.load(), 4) << "jobs ran with OpenBLAS's pool at more than one thread";
    EXPECT_EQ(kvlens::blasThreads(), 2) << "the pool size was not restored";
    kvlens::setBlasThreads(before);
}

// Jobs start in the order given (the longest first), each exactly once.
TEST(ParallelRuns, JobsStartInTheGivenOrder) {
    std::vector<size_t> started;
    std::mutex m;
    const auto note = [&](size_t job, const std::atomic<bool>&) {
        std::lock_guard<std::mutex> lock(m);
        started.push_back(job);
    };
    kvlens::runInParallel(5, 1, note, {3, 1, 4, 0, 2});
    EXPECT_EQ(started, (std::vector<size_t>{3, 1, 4, 0, 2}));
    started.clear();
    kvlens::runInParallel(5, 2, note, {4, 3, 2, 1, 0});
    std::sort(started.begin(), started.end());
    EXPECT_EQ(started, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

// The last job still running takes the threads the finished ones freed (at
// its next widenIfAlone), and only then; the caller's counts come back after.
TEST(ParallelRuns, TheLastJobRunningTakesTheFreedThreads) {
    const int intraBefore = at::get_num_threads(), blasBefore = kvlens::blasThreads();
    at::set_num_threads(2);
    if (blasBefore >= 0) kvlens::setBlasThreads(2);
    std::atomic<bool> shortDone{false};
    int afterwards = 0, blasAfterwards = 0, shortSaw = 0;
    kvlens::runInParallel(2, 2, [&](size_t job, const std::atomic<bool>&) {
        if (job == 1) {  // the short one
            kvlens::widenIfAlone();  // the long one still runs: nothing changes
            shortSaw = at::get_num_threads();
            shortDone = true;
            return;
        }
        while (!shortDone.load()) std::this_thread::yield();
        for (int i = 0; i < 2000 && at::get_num_threads() == 1; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            kvlens::widenIfAlone();
        }
        afterwards = at::get_num_threads();
        blasAfterwards = kvlens::blasThreads();
    }, {0, 1});
    EXPECT_EQ(shortSaw, 1) << "a job widened while another still ran";
    EXPECT_EQ(afterwards, 2) << "the last job running kept one thread";
    if (blasBefore >= 0) EXPECT_EQ(blasAfterwards, 2);
    EXPECT_EQ(at::get_num_threads(), 2);
    kvlens::widenIfAlone();  // outside runInParallel: nothing
    EXPECT_EQ(at::get_num_threads(), 2);
    at::set_num_threads(intraBefore);
    if (blasBefore >= 0) kvlens::setBlasThreads(blasBefore);
}
