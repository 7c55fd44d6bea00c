// Tests labelled gpu (issue 18): the engine on CUDA against the CPU. Each
// skips, with a message, where CUDA is absent (CI; any machine without an
// NVIDIA GPU and a CUDA LibTorch). scripts/gpu-check.sh runs them on a GPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_paths.h"
#include "core/model/device.h"
#include "core/model/device_stats.h"
#include "core/model/model.h"
#include "core/policy/policy_info.h"
#include "core/run/memory_guard.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"
#include "tests/support/trace_compare.h"

using namespace kvlens;

namespace {

#define SKIP_WITHOUT_CUDA()                                                                                  \
    if (!cudaAvailable()) GTEST_SKIP() << "CUDA is not available (no NVIDIA GPU, or a LibTorch without CUDA)"

// cuBLAS and cuDNN sum in other orders than the CPU: f32 figures agree within this.
constexpr double kCudaTol = 1e-4;
constexpr int kSteps = 6;

RunSettings settings(const std::string& device, const std::string& dtype) {
    RunSettings s;
    s.device = device;
    s.dtype = dtype;
    return s;
}

SessionOptions everyPolicy(const Model& model, const std::string& schedule) {
    SessionOptions o;
    o.prompt = test::randomTokens(20, model.config().vocabSize, 11);
    for (const PolicyInfo& info : policyRegistry())
        if (!info.fullCache && !info.sessionScored) o.policies.push_back(parsePolicySpec(info.id + ":schedule=" + schedule));
    o.budget = parseBudget("8");
    o.attention = {true, 1, 1};
    return o;
}

std::vector<std::shared_ptr<const Trace>> traces(const std::shared_ptr<const Model>& model, const SessionOptions& o) {
    Session s(model, o);
    return test::runAll(s, kSteps);
}

class GpuSessions : public ::testing::TestWithParam<std::string> {};

// The same Sessions on cuda (f32) and on the CPU's host paths.
TEST_P(GpuSessions, EveryPolicyAndScheduleOnCudaMatchesTheCpu) {
    SKIP_WITHOUT_CUDA();
    const auto cpu = test::variantModel(GetParam(), settings("cpu", "f32"));
    const auto cuda = test::variantModel(GetParam(), settings("cuda", "f32"));
    ASSERT_TRUE(cuda->device().is_cuda());
    for (const std::string schedule : {"every_step", "prefill_once", "every_n,n=3", "prefill_then_step"}) {
        const SessionOptions o = everyPolicy(*cpu, schedule);
        test::expectSameTraces(traces(cuda, o), traces(cpu, o), kCudaTol, GetParam() + " cuda " + schedule);
    }
}

INSTANTIATE_TEST_SUITE_P(Families, GpuSessions, ::testing::Values("llama_gqa", "gpt2", "mistral_window"));

// bf16 on cuda, the dtype GPU users run: every figure finite, the full
// cache's predictions within 0.25 nats of f32's.
TEST(Gpu, Bf16SessionWithEveryPolicyIsFiniteAndCloseToF32) {
    SKIP_WITHOUT_CUDA();
    const auto f32 = test::variantModel("llama_gqa", settings("cuda", "f32"));
    const auto bf16 = test::variantModel("llama_gqa", settings("cuda", "bf16"));
    SessionOptions o = everyPolicy(*f32, "every_step");
    o.policies.clear();
    for (const PolicyInfo& info : policyRegistry())
        if (!info.fullCache) o.policies.push_back(parsePolicySpec(info.id));
    o.continuation = test::randomTokens(kSteps, f32->config().vocabSize, 4);
    const auto want = traces(f32, o), got = traces(bf16, o);
    const Trace &g = *got.back(), &w = *want.back();
    for (const PolicyTrace& p : g.policies) {
        EXPECT_TRUE(p.failure.empty()) << p.label << ": " << p.failure;
        for (const StepMetrics& m : p.metrics) {
            EXPECT_TRUE(std::isfinite(m.kl)) << p.label;
            EXPECT_TRUE(std::isfinite(m.retainedMass)) << p.label;
            EXPECT_TRUE(std::isfinite(m.outputCosine)) << p.label;
        }
    }
    for (size_t i = 0; i < g.policies[0].metrics.size(); ++i) {
        const double a = g.policies[0].metrics[i].targetLogProb, b = w.policies[0].metrics[i].targetLogProb;
        if (std::isnan(b)) continue;
        EXPECT_LE(std::abs(a - b), 0.25) << "full cache, step " << i;
    }
}

// A CUDA allocation too large for the device: the same clear MemoryError as
// on the CPU, the allocator's cache given back, and the next run works.
TEST(Gpu, OutOfMemoryIsAClearErrorAndTheNextRunWorks) {
    SKIP_WITHOUT_CUDA();
    const c10::Device cuda(c10::kCUDA, 0);
    try {
        try {
            const at::Tensor huge = at::empty({int64_t{1} << 45}, at::TensorOptions().dtype(at::kFloat).device(cuda));
            (void)huge;  // 128 TiB
            FAIL() << "a 128 TiB allocation succeeded";
        } catch (...) {
            rethrowAllocationFailure("a test allocation");
        }
    } catch (const MemoryError& e) {
        EXPECT_NE(std::string(e.what()).find("out of memory while a test allocation"), std::string::npos) << e.what();
    }
    const DeviceMemory after = deviceMemory(cuda);
    if (after.available) EXPECT_LE(after.reserved, after.allocated + (64u << 20)) << "cached blocks given back";
    const auto model = test::variantModel("llama_gqa", settings("cuda", "f32"));
    Session s(model, everyPolicy(*model, "every_step"));
    EXPECT_NO_THROW(test::runAll(s, 2));
}

// Device-side timing waits for the device; the allocator's figures move with the tensors.
TEST(Gpu, TimerAndAllocatorStatistics) {
    SKIP_WITHOUT_CUDA();
    const c10::Device cuda(c10::kCUDA, 0);
    std::printf("[ cuda     ] allocator statistics and CUDA events built: %s\n", cudaExtrasBuilt() ? "yes" : "no");
    const DeviceMemory before = deviceMemory(cuda);
    at::Tensor a = at::randn({4096, 4096}, at::TensorOptions().device(cuda));  // 64 MiB
    DeviceTimer timer(cuda);
    timer.start();
    for (int i = 0; i < 8; ++i) a = at::matmul(a, a) / 4096.0;
    const double ms = timer.stopMs();
    EXPECT_GT(ms, 0.0);
    std::printf("[ cuda     ] 8 matmuls 4096^2 f32: %.3f ms\n", ms);
    const DeviceMemory during = deviceMemory(cuda);
    EXPECT_EQ(during.available, cudaExtrasBuilt());
    if (during.available) {
        EXPECT_GE(during.allocated, before.allocated + (64u << 20) - 1);
        EXPECT_GE(during.peakAllocated, during.allocated);
    }
}

}  // namespace
