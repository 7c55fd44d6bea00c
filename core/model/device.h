#pragma once
// Where and in what precision a model runs. Torch-free so that the GUI and
// CLI can carry the user's choice; resolved inside core.
#include <string>

namespace kvlens {

struct RunSettings {
    std::string device = "auto";  // auto | cpu | cuda | cuda:N
    std::string dtype = "auto";   // auto (f32 on CPU, bf16 on CUDA) | f32 | f16 | bf16
    int threads = 0;              // CPU intra-op threads; 0 = LibTorch's default
};

// Validates the strings (throws ArgumentError naming the bad value) and
// reports what they resolve to on this machine, e.g. "cpu/f32" or "cuda:0/bf16".
std::string describeRunSettings(const RunSettings& s);
bool cudaAvailable();
std::string libtorchVersion();  // the LibTorch this build links, e.g. "1.13.0"
int cudaDeviceCount();

}  // namespace kvlens
