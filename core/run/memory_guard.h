#pragma once
// Out-of-memory as a clear error: LibTorch reports a failed allocation as a
// c10::Error (CPU allocator) or c10::OutOfMemoryError (CUDA), std::vector as
// std::bad_alloc. Torch-free header.
#include <cstdint>
#include <string>

namespace kvlens {

struct ModelConfig;

// What a Session will hold at most, estimated before it starts (issue 50):
// every run's KV cache at its fullest (the full cache's size: a policy that
// compresses after the prompt holds it all first), the captured attention
// map (row q of query q has q + 1 floats, per run), the per-token state of
// the Traces kept (status, score and rank per layer, KV head and token), and
// the full cache's prompt record a later edit reuses.
struct RunMemory {
    uint64_t kv = 0, attention = 0, traces = 0, record = 0;
    uint64_t total() const { return kv + attention + traces + record; }
};

struct RunShape {
    int64_t tokens = 0;        // prompt (and question) plus the decode steps
    int64_t steps = 0;         // decode steps (Traces published after the prompt)
    int64_t runs = 1;          // the full cache included
    uint64_t elementBytes = 4; // of the KV cache
    bool capture = false;      // an attention map per run
    int64_t captureFrom = 0;   // the first query row captured
    bool keepTraces = false;   // every step's Trace kept (the GUI's history and refresh)
};
RunMemory estimateRunMemory(const ModelConfig& config, const RunShape& shape);

// The memory a run may plan for: half of the physical memory, and no more
// than half of what the process's address-space limit (RLIMIT_AS) leaves.
uint64_t defaultMemoryBudget();

// The guard: `shape` with its attention capture cut to the latest queries
// when the whole map would not fit `budget` (`note` says what was dropped),
// unchanged when it fits; MemoryError, one sentence, when even without the
// map the run would not fit.
RunShape fitRunMemory(const ModelConfig& config, RunShape shape, uint64_t budget, std::string* note);

// Call from a catch (...) block: rethrows the exception in flight, a failed
// allocation turned into MemoryError naming `doing` ("reading a prompt of
// 200000 tokens") and the bytes asked for; anything else unchanged. A CUDA
// out-of-memory also gives the caching allocator's unused blocks back, so
// that the app goes on with a smaller request.
[[noreturn]] void rethrowAllocationFailure(const std::string& doing);

}  // namespace kvlens
