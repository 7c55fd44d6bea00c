#include "core/model/device_stats.h"

#include <torch/cuda.h>

#include <chrono>

#ifdef KVLENS_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace kvlens {

bool cudaExtrasBuilt() {
#ifdef KVLENS_WITH_CUDA
    return true;
#else
    return false;
#endif
}

DeviceMemory deviceMemory(const c10::Device& device) {
    DeviceMemory m;
#ifdef KVLENS_WITH_CUDA
    if (device.is_cuda() && torch::cuda::is_available()) {
        // Index 0 of each statistic is the aggregate over pool types (StatType::AGGREGATE).
        const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.has_index() ? device.index() : 0);
        m.available = true;
        m.allocated = static_cast<uint64_t>(stats.allocated_bytes[0].current);
        m.reserved = static_cast<uint64_t>(stats.reserved_bytes[0].current);
        m.peakAllocated = static_cast<uint64_t>(stats.allocated_bytes[0].peak);
    }
#else
    (void)device;
#endif
    return m;
}

void resetPeakDeviceMemory(const c10::Device& device) {
#ifdef KVLENS_WITH_CUDA
    if (device.is_cuda() && torch::cuda::is_available())
        c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index() : 0);
#else
    (void)device;
#endif
}

void releaseCachedDeviceMemory() {
#ifdef KVLENS_WITH_CUDA
    if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void synchronizeDevice(const c10::Device& device) {
    if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

struct DeviceTimer::Impl {
    c10::Device device;
    std::chrono::steady_clock::time_point t0;
#ifdef KVLENS_WITH_CUDA
    std::unique_ptr<at::cuda::CUDAEvent> begin, end;
#endif
};

DeviceTimer::DeviceTimer(const c10::Device& device) : m(new Impl{device, {}}) {
#ifdef KVLENS_WITH_CUDA
    if (device.is_cuda()) {
        m->begin = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);  // timing enabled
        m->end = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    }
#endif
}

DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::start() {
#ifdef KVLENS_WITH_CUDA
    if (m->begin) {
        m->begin->record();
        return;
    }
#endif
    synchronizeDevice(m->device);
    m->t0 = std::chrono::steady_clock::now();
}

double DeviceTimer::stopMs() {
#ifdef KVLENS_WITH_CUDA
    if (m->end) {
        m->end->record();
        m->end->synchronize();
        return static_cast<double>(m->begin->elapsed_time(*m->end));
    }
#endif
    synchronizeDevice(m->device);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m->t0).count();
}

}  // namespace kvlens
