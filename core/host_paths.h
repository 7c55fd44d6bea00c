#pragma once
// Host fast paths (issue 18). Much of the engine's hot path is written twice:
// plain loops over host memory, taken when the tensors are CPU float32, and
// tensor code, taken otherwise (CUDA, bf16, f16). A CPU test run only ever
// reached the loops, so the code a GPU user runs went untested.
//
// KVLENS_DEVICE_PATHS=1 in the environment (or setHostPathsEnabled(false))
// makes the CPU take the tensor code everywhere a host path exists; results
// are the same within float tolerance (docs/testing.md). Internal to core.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

// A host loop compiled for AVX-512 and AVX2+FMA as well as the baseline,
// the CPU's best chosen at load time: the build targets plain x86-64, whose
// SSE2 code runs such loops at 4 floats a time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVLENS_HOST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KVLENS_HOST_CLONES
#endif

namespace kvlens {

// False when KVLENS_DEVICE_PATHS is set to anything but "" or "0", or after
// setHostPathsEnabled(false).
bool hostPathsEnabled();
// For tests and benches: overrides the environment from now on.
void setHostPathsEnabled(bool enabled);

// Whether a host loop may read and write `t` (or memory on `device`) directly.
inline bool onHost(const c10::Device& device) { return device.is_cpu() && hostPathsEnabled(); }
inline bool onHostF32(const at::Tensor& t) { return t.is_cpu() && t.scalar_type() == at::kFloat && hostPathsEnabled(); }

}  // namespace kvlens
