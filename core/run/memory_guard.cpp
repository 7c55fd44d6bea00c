#include "core/run/memory_guard.h"

#include <c10/util/Exception.h>

#include <new>
#include <regex>

#include "core/error.h"
#include "core/model/device_stats.h"

namespace kvlens {
namespace {

std::string advice(const std::string& doing, const std::string& bytes) {
    return "out of memory while " + doing + (bytes.empty() ? "" : " (an allocation of " + bytes + " failed)") +
           "; shorten the prompt or the decode steps, or run fewer policies at once";
}

// "…you tried to allocate 1280000000000 bytes…" -> "1.28 TB"; "" when absent.
std::string requestedBytes(const std::string& message) {
    static const std::regex kBytes("allocate ([0-9]+) bytes");
    std::smatch m;
    if (!std::regex_search(message, m, kBytes)) return "";
    double v = std::stod(m[1].str());
    const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (v >= 1000 && u < 5) v /= 1000, ++u;
    char buf[48];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
}

}  // namespace

void rethrowAllocationFailure(const std::string& doing) {
    try {
        throw;
    } catch (const c10::OutOfMemoryError& e) {
        // CUDA: what the failed step had cached stays with the caching
        // allocator unless given back; the next, smaller request needs it.
        releaseCachedDeviceMemory();
        throw MemoryError(advice(doing, requestedBytes(e.what_without_backtrace())));
    } catch (const c10::Error& e) {
        const std::string what = e.what_without_backtrace();
        // c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory" / "not enough memory".
        if (what.find("DefaultCPUAllocator") != std::string::npos || what.find("out of memory") != std::string::npos)
            throw MemoryError(advice(doing, requestedBytes(what)));
        throw;
    } catch (const std::bad_alloc&) {
        throw MemoryError(advice(doing, ""));
    }
}

}  // namespace kvlens
