#include "core/host_paths.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kvlens {

namespace {

bool fromEnvironment() {
    const char* v = std::getenv("KVLENS_DEVICE_PATHS");
    return !(v && *v && std::strcmp(v, "0") != 0);
}

std::atomic<bool>& enabledFlag() {
    static std::atomic<bool> flag{fromEnvironment()};
    return flag;
}

}  // namespace

bool hostPathsEnabled() { return enabledFlag().load(std::memory_order_relaxed); }

void setHostPathsEnabled(bool enabled) { enabledFlag().store(enabled, std::memory_order_relaxed); }

}  // namespace kvlens
