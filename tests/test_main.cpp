// The main() of every GoogleTest executable: as kvlens-cli does, restart with
// OpenBLAS's right kernels where Debian's OpenBLAS misdetects the CPU
// (core/cpu_tuning.h), so that tests run at the speed users see.
#include <gtest/gtest.h>

#include "core/cpu_tuning.h"

int main(int argc, char** argv) {
    kvlens::restartWithTunedBlas(argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
