#pragma once
// Where and in what precision a model runs. Torch-free so that the GUI and
// CLI can carry the user's choice; resolved inside core.
#include <cstdint>
#include <string>

namespace kvlens {

struct RunSettings {
    std::string device = "auto";  // auto | cpu | cuda | cuda:N
    std::string dtype = "auto";   // auto (f32 on CPU, bf16 on CUDA) | f32 | f16 | bf16
    int threads = 0;              // CPU intra-op threads; 0 = LibTorch's default
};

// The most CPU threads a run takes: twice this machine's logical CPUs, and
// at least 256 (a typo of --threads 100000 started a hundred thousand
// threads that ignored SIGTERM).
int maxThreads();
// Throws ArgumentError naming `what` (a flag or a field) unless
// 0 <= threads <= maxThreads().
void checkThreads(int64_t threads, const std::string& what);

// Validates the strings (throws ArgumentError naming the bad value) and
// reports what they resolve to on this machine, e.g. "cpu/f32" or "cuda:0/bf16".
std::string describeRunSettings(const RunSettings& s);
bool cudaAvailable();
std::string libtorchVersion();  // the LibTorch this build links, e.g. "1.13.0"
int cudaDeviceCount();

}  // namespace kvlens
