// A policy written outside core, to show and test what adding one takes
// (issue 19): this file, whose last line registers it. The tests that read
// the registry (EveryPolicy.* in conformance_test.cpp, Registry.*) then cover
// it like the built-in ones; in the app the same call would add it to the
// CLI's --policy and --help and to the GUI's controls.
//
// "test_vnorm": keep the B entries whose values have the largest L2 norm,
// with an optional window of recent entries (an attention-free scorer, as
// knorm is, on the values).
#include <ATen/ATen.h>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens::test {
namespace {

class ValueNormPolicy : public ScorerPolicy {
public:
    ValueNormPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)), m_window(this->config().getInt("window")) {}

protected:
    at::Tensor score(const LayerState& state) override { return state.values.to(at::kFloat).pow(2).sum(-1); }
    int64_t window(const LayerState& state) const override { return std::min(m_window, state.budget); }

private:
    int64_t m_window;
};

std::unique_ptr<Policy> makeValueNorm(const PolicyInfo& info, PolicyConfig config) {
    return std::make_unique<ValueNormPolicy>(info, std::move(config));
}

const bool kRegistered = (registerPolicy(makePolicyInfo("test_vnorm", "Value norm (test fixture)",
                                                        "tests/policy/fixture_policy.cpp",
                                                        "keep the B entries with the largest value norm",
                                                        Schedule::PrefillOnce, false, true,
                                                        {{"window", ParamSpec::Type::Int, "0", 0, 1e7, {},
                                                          "the last W entries are always kept"}}),
                                         makeValueNorm),
                          true);

}  // namespace
}  // namespace kvlens::test
