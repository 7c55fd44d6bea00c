// core/cpu_tuning: every test binary runs through restartWithTunedBlas (test
// main), so this process is the restarted one: OpenMP's threads wait
// passively unless the user chose a policy, and OpenBLAS runs this CPU's
// kernels rather than its pre-AVX fallback.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "core/cpu_tuning.h"

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

TEST(CpuTuning, OpenBlasRunsModernKernels) {
    using CoreName = const char* (*)();
    auto coreName = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!coreName || !kvlens::preferredOpenBlasCore()) GTEST_SKIP() << "not OpenBLAS, or a CPU without AVX2";
    const std::string core = coreName();
    for (const char* old : {"Prescott", "Core2", "Nehalem", "Penryn", "Dunnington", "Atom", "Northwood"})
        EXPECT_NE(core, old) << "OpenBLAS runs its " << core << " fallback kernels";
}
