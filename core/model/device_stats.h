#pragma once
// What a GPU run needs beyond the tensors (issue 18): timing that waits for
// the device, the memory the CUDA caching allocator holds, and giving its
// cached blocks back after an out-of-memory error so that the app can go on
// with a smaller request. Internal to core.
//
// The allocator statistics and CUDA events need a LibTorch built with CUDA
// that ships the c10/cuda headers (KVLENS_WITH_CUDA, set by CMake when it
// finds them; pip's torch has them, Debian's CPU LibTorch does not). Without
// them a CUDA timing synchronises the device around the wall clock, and the
// memory figures come from the tensors alone (available = false).
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

namespace kvlens {

struct DeviceMemory {
    bool available = false;     // false: not a CUDA device, or no allocator statistics in this build
    uint64_t allocated = 0;     // bytes in live tensors on the device
    uint64_t reserved = 0;      // bytes the caching allocator holds from the driver (allocated + cached)
    uint64_t peakAllocated = 0; // since the last resetPeakDeviceMemory()
};

DeviceMemory deviceMemory(const c10::Device& device);
void resetPeakDeviceMemory(const c10::Device& device);
// Gives the caching allocator's unused blocks back to the driver (CUDA; a
// no-op elsewhere). Called after an out-of-memory error.
void releaseCachedDeviceMemory();
// Waits until the device has finished the work queued so far (CUDA; a no-op on the CPU).
void synchronizeDevice(const c10::Device& device);
// Whether this build reads the CUDA allocator and times with CUDA events.
bool cudaExtrasBuilt();

// Milliseconds of device work between start() and stopMs(): CUDA events on
// the current stream where built (the time the device spent, not the time
// the host spent queueing), else the wall clock with the device
// synchronised at both ends; on the CPU, the wall clock.
class DeviceTimer {
public:
    explicit DeviceTimer(const c10::Device& device);
    ~DeviceTimer();
    DeviceTimer(const DeviceTimer&) = delete;
    DeviceTimer& operator=(const DeviceTimer&) = delete;
    void start();
    double stopMs();

private:
    struct Impl;
    std::unique_ptr<Impl> m;
};

}  // namespace kvlens
