#include "core/run/memory_guard.h"

#include <c10/util/Exception.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <new>
#include <regex>

#include "core/error.h"
#include "core/eval/kv_memory.h"
#include "core/model/config.h"
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

namespace {

constexpr uint64_t kRecordCap = 1ull << 30;  // core/run/session_impl.h kRecordBytes

// Bytes of captured rows from..tokens-1 of one run: row q holds q + 1 floats (and a shared pointer).
uint64_t captureBytes(int64_t from, int64_t tokens) {
    if (from >= tokens) return 0;
    const double a = static_cast<double>(std::max<int64_t>(from, 0)), n = static_cast<double>(tokens);
    return static_cast<uint64_t>(2.0 * (n * (n + 1) - a * (a + 1)) + 64.0 * (n - a));
}

}  // namespace

RunMemory estimateRunMemory(const ModelConfig& c, const RunShape& s) {
    RunMemory m;
    const auto runs = static_cast<uint64_t>(std::max<int64_t>(s.runs, 1));
    const auto tokens = static_cast<uint64_t>(std::max<int64_t>(s.tokens, 0));
    m.kv = runs * tokens * c.kvBytesPerToken(s.elementBytes);
    if (s.capture) m.attention = runs * captureBytes(s.captureFrom, s.tokens);
    // status (1 byte), score and rank (4 each) per layer, KV head and token, per run and Trace kept.
    const uint64_t traces = s.keepTraces ? static_cast<uint64_t>(std::max<int64_t>(s.steps, 0)) + 1 : 2;
    m.traces = traces * runs * static_cast<uint64_t>(c.numLayers * c.numKvHeads) * tokens * 9;
    // The full cache's prompt record: queries, keys and values of every layer, kept under its cap.
    if (s.keepTraces)
        m.record = std::min<uint64_t>(kRecordCap, tokens * static_cast<uint64_t>(c.numLayers) *
                                                      static_cast<uint64_t>((c.numHeads + 2 * c.numKvHeads) * c.headDim) * 4);
    return m;
}

uint64_t defaultMemoryBudget() {
    const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    uint64_t budget = pages > 0 && pageSize > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize) / 2 : 4ull << 30;
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        uint64_t inUse = 0;  // the address space mapped now (/proc/self/statm: size in pages)
        std::ifstream statm("/proc/self/statm");
        if (statm >> inUse) inUse *= static_cast<uint64_t>(pageSize > 0 ? pageSize : 4096);
        const uint64_t left = limit.rlim_cur > inUse ? limit.rlim_cur - inUse : 0;
        budget = std::min(budget, left / 2);
    }
    return budget;
}

RunShape fitRunMemory(const ModelConfig& c, RunShape shape, uint64_t budget, std::string* note) {
    const RunMemory whole = estimateRunMemory(c, shape);
    if (whole.total() <= budget) return shape;
    RunShape bare = shape;
    bare.capture = false;
    const RunMemory without = estimateRunMemory(c, bare);
    if (without.total() > budget)
        throw MemoryError("this run would hold about " + formatBytes(without.total()) + " (KV caches " +
                          formatBytes(without.kv) + ", per-token traces " + formatBytes(without.traces) +
                          ") but its memory budget is " + formatBytes(budget) +
                          "; shorten the prompt or the decode steps, or run fewer policies at once");
    if (!shape.capture) return shape;
    // The latest rows that fit (binary search on the first row kept).
    int64_t lo = shape.captureFrom, hi = shape.tokens;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        RunShape s = shape;
        s.captureFrom = mid;
        if (estimateRunMemory(c, s).total() <= budget) hi = mid;
        else lo = mid + 1;
    }
    if (note)
        *note = "attention captured for the last " + std::to_string(shape.tokens - lo) + " of " + std::to_string(shape.tokens) +
                " queries only: the whole map of every run would take " + formatBytes(whole.attention) +
                ", past the memory budget of " + formatBytes(budget);
    shape.captureFrom = lo;
    return shape;
}

}  // namespace kvlens
