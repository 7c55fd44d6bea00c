#include "core/model/device_internal.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>

#include "core/cpu_tuning.h"
#include "core/error.h"

namespace kvlens {

bool cudaAvailable() { return torch::cuda::is_available(); }
std::string libtorchVersion() { return TORCH_VERSION; }

int cudaDeviceCount() { return static_cast<int>(torch::cuda::device_count()); }

c10::Device resolveDevice(const std::string& device) {
    if (device == "auto" || device.empty()) return cudaAvailable() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
    if (device == "cpu") return c10::Device(c10::kCPU);
    if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
        int index = 0;
        if (device.size() > 5) {
            const std::string num = device.substr(5);
            if (num.empty() || num.size() > 3 || num.find_first_not_of("0123456789") != std::string::npos)
                throw ArgumentError("bad device '" + device + "' (expected auto, cpu, cuda or cuda:N)");
            index = std::stoi(num);
        }
        if (!cudaAvailable())
            throw ArgumentError("device '" + device + "' requested but CUDA is not available in this LibTorch build or machine");
        if (index >= cudaDeviceCount())
            throw ArgumentError("device '" + device + "' requested but only " + std::to_string(cudaDeviceCount()) +
                                " CUDA device(s) exist");
        return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
    }
    throw ArgumentError("bad device '" + device + "' (expected auto, cpu, cuda or cuda:N)");
}

c10::ScalarType resolveDtype(const std::string& dtype, const c10::Device& device) {
    if (dtype == "auto" || dtype.empty()) return device.is_cuda() ? c10::kBFloat16 : c10::kFloat;
    if (dtype == "f32" || dtype == "float32") return c10::kFloat;
    if (dtype == "f16" || dtype == "float16") return c10::kHalf;
    if (dtype == "bf16" || dtype == "bfloat16") return c10::kBFloat16;
    throw ArgumentError("bad dtype '" + dtype + "' (expected auto, f32, f16 or bf16)");
}

const char* dtypeLabel(c10::ScalarType t) {
    switch (t) {
        case c10::kFloat: return "f32";
        case c10::kHalf: return "f16";
        case c10::kBFloat16: return "bf16";
        default: return "?";
    }
}

void applyThreads(int threads) {
    checkThreads(threads, "--threads");
    if (threads > 0) {
        at::set_num_threads(threads);
        setBlasThreads(threads);  // OpenBLAS's own pool (cpu_tuning.h)
    }
}

std::string describeRunSettings(const RunSettings& s) {
    c10::Device d = resolveDevice(s.device);
    return d.str() + "/" + dtypeLabel(resolveDtype(s.dtype, d));
}

}  // namespace kvlens
