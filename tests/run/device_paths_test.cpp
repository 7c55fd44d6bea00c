// Issue 18: the code a GPU runs, tested on the CPU. Much of the engine's hot
// path has a host loop for CPU float32 tensors beside the tensor code that
// CUDA, bf16 and f16 take (core/host_paths.h). Here every policy runs under
// every schedule in one lockstep Session, once on the host paths and once on
// the device paths, and everything a view shows is compared: statuses, held
// sets, budgets and token choices exactly; log-probs, KL, retained mass,
// output cosine and the captured attention within kDeviceTol.
//
// The whole test suite also runs once more with KVLENS_DEVICE_PATHS=1
// (CTest's device_paths.* tests): the naive-reference, conformance,
// equivalence, session, refresh and compaction tests through the device paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/host_paths.h"
#include "core/model/model.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"
#include "tests/support/trace_compare.h"

using namespace kvlens;

namespace {

// f32 sums taken in another order (ATen's kernels against the host loops).
constexpr double kDeviceTol = 1e-5;
constexpr int kSteps = 6;

// Restores the host paths however a test ends.
struct DevicePaths {
    explicit DevicePaths(bool on) : before(hostPathsEnabled()) { setHostPathsEnabled(!on); }
    ~DevicePaths() { setHostPathsEnabled(before); }
    bool before;
};

// Every registered policy (the full cache is run 0 anyway) with `schedule`,
// plus the variants whose code differs: streaming re-rotated (RoPE models),
// H2O's GQA max.
std::vector<PolicyConfig> everyPolicy(const Model& model, const std::string& schedule) {
    std::vector<PolicyConfig> out;
    for (const PolicyInfo& info : policyRegistry()) {
        if (info.fullCache || info.sessionScored) continue;  // the oracle, KVzip: prefill_once only
        out.push_back(parsePolicySpec(info.id + ":schedule=" + schedule));
    }
    if (model.config().family != Family::Gpt2)
        out.push_back(parsePolicySpec("streaming:rerotate=true,schedule=" + schedule));
    out.push_back(parsePolicySpec("h2o:gqa=max,schedule=" + schedule));
    return out;
}

// The prompt and the teacher-forced continuation: no token twice. CUR's
// scores are key and value norms, which RoPE keeps, so two equal tokens tie
// exactly, and f32 rounding (host loops against ATen's kernels) breaks that
// tie either way: a kept set that differs with no bug (seen on an AMD EPYC).
void distinctTokens(SessionOptions& o, int64_t vocab) {
    std::vector<int64_t> ids = test::randomTokens(200, vocab, 11), unique;
    for (int64_t id : ids)
        if (std::find(unique.begin(), unique.end(), id) == unique.end()) unique.push_back(id);
    const size_t prompt = 20;  // + kSteps fits gpt2's 32 positions
    if (unique.size() < prompt + kSteps) throw std::runtime_error("the test model's vocabulary is too small");
    o.prompt.assign(unique.begin(), unique.begin() + prompt);
    o.continuation.assign(unique.begin() + prompt, unique.begin() + prompt + kSteps);
}

SessionOptions sessionOptions(const Model& model, const std::string& schedule) {
    SessionOptions o;
    distinctTokens(o, model.config().vocabSize);
    o.policies = everyPolicy(model, schedule);
    o.budget = parseBudget("8");
    o.attention = {true, 1, 1};  // as the GUI: one captured map
    return o;
}

std::vector<std::shared_ptr<const Trace>> traces(const std::shared_ptr<const Model>& model, const SessionOptions& o,
                                                 bool devicePaths) {
    DevicePaths paths(devicePaths);
    Session s(model, o);
    return test::runAll(s, kSteps);
}

class DevicePathsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DevicePathsTest, EveryPolicyAndScheduleMatchesTheHostPaths) {
    RunSettings cpu;
    cpu.device = "cpu";
    const auto model = test::variantModel(GetParam(), cpu);
    for (const std::string schedule : {"every_step", "prefill_once", "every_n,n=3", "prefill_then_step"}) {
        SessionOptions o = sessionOptions(*model, schedule);
        test::expectSameTraces(traces(model, o, true), traces(model, o, false), kDeviceTol, GetParam() + " " + schedule);
        // Free-running with sampling: every run draws its own tokens (same seed).
        o.teacherForced = false;
        o.sampling.greedy = false;
        o.sampling.temperature = 0.8;
        o.sampling.seed = 5;
        test::expectSameTraces(traces(model, o, true), traces(model, o, false), kDeviceTol,
                               GetParam() + " " + schedule + " free-running");
    }
}

// GQA (2 KV heads of 2 queries), MHA with learned positions, and a model
// whose sliding window masks decode steps.
INSTANTIATE_TEST_SUITE_P(Families, DevicePathsTest, ::testing::Values("llama_gqa", "gpt2", "mistral_window"));

TEST(DevicePaths, TheSwitchIsTheEnvironmentOrTheSetter) {
    const bool before = hostPathsEnabled();
    setHostPathsEnabled(false);
    EXPECT_FALSE(hostPathsEnabled());
    setHostPathsEnabled(true);
    EXPECT_TRUE(hostPathsEnabled());
    setHostPathsEnabled(before);
}

}  // namespace
