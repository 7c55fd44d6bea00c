// The bound on CPU threads (core/model/device.h): torch-free, so that the
// CLI's option checks (and the fuzzer that links them without LibTorch) have it.
#include <algorithm>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/model/device.h"

namespace kvlens {

int maxThreads() { return std::max(256, 2 * static_cast<int>(std::thread::hardware_concurrency())); }

void checkThreads(int64_t threads, const std::string& what) {
    if (threads < 0 || threads > maxThreads())
        throw ArgumentError(what + " is " + std::to_string(threads) + ": expected 0 (LibTorch's default) to " +
                            std::to_string(maxThreads()) + " (twice this machine's " +
                            std::to_string(std::thread::hardware_concurrency()) + " CPUs, at least 256)");
}

}  // namespace kvlens
