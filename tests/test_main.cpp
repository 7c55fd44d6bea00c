// The main() of every GoogleTest executable: as kvlens-cli does, restart with
// OpenBLAS's right kernels where Debian's OpenBLAS misdetects the CPU
// (core/cpu_tuning.h), so that tests run at the speed users see.
#include <gtest/gtest.h>

#include "core/cpu_tuning.h"

#if defined(__SANITIZE_ADDRESS__)
#define KVLENS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVLENS_ASAN 1
#endif
#endif

#ifdef KVLENS_ASAN
// Defaults for the sanitizer build (KVLENS_SANITIZE), compiled in so that
// CTest's test discovery (which runs the binaries before the tests) sees them
// too; ASAN_OPTIONS in the environment still overrides them.
// - detect_leaks=0: LibTorch is not instrumented and keeps process-lifetime
//   allocations (operator registries, thread pools) that LeakSanitizer
//   reports at exit.
// - allocator_may_return_null=1: an allocation larger than memory returns
//   null, as malloc does without ASan, so that LibTorch reports it and the
//   out-of-memory tests see what users see; ASan would abort instead.
extern "C" const char* __asan_default_options() { return "detect_leaks=0:allocator_may_return_null=1"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1"; }
#endif

int main(int argc, char** argv) {
    kvlens::restartWithTunedBlas(argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
