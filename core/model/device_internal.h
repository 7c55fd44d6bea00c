#pragma once
// Resolution of RunSettings to ATen types (core-internal).
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/model/device.h"

namespace kvlens {

c10::Device resolveDevice(const std::string& device);
c10::ScalarType resolveDtype(const std::string& dtype, const c10::Device& device);
const char* dtypeLabel(c10::ScalarType t);
// Applies `threads` to LibTorch's intra-op pool (no-op for 0).
void applyThreads(int threads);

}  // namespace kvlens
