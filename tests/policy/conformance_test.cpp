// Every registered policy, on random layers and on a stream of tokens run
// the way the Session runs it: the plan invariants (the cache's own checks
// and more), the protected sets, kept = top-scoring, and batching the
// prompt prefix giving the same plans as feeding it one token at a time.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "core/error.h"
#include "core/policy/select.h"
#include "core/run/policy_run.h"
#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;

namespace {

// Each policy with small protected sets so that the budgets below exercise
// sinks, windows and scores together. knorm skips no layer here.
std::string specFor(const PolicyInfo& info) {
    std::string spec = info.id + ":";
    for (const auto& p : info.params) {
        if (p.name == "window") spec += "window=3,";
        if (p.name == "sinks") spec += "sinks=2,";
        if (p.name == "kernel") spec += "kernel=3,";
        if (p.name == "skip_layers") spec += "skip_layers=,";
    }
    spec.pop_back();
    return spec;
}

bool adaptive(const Policy& p) { return p.config().text("heads") == "adaptive"; }

int64_t sinksOf(const Policy& p) { return p.config().has("sinks") ? p.config().getInt("sinks") : 0; }

int64_t windowOf(const Policy& p, int64_t B) {
    const std::string& id = p.config().id;
    if (id == "window") return B;
    if (id == "streaming") return std::max<int64_t>(0, B - sinksOf(p));
    if (id == "h2o") return B / 2;
    return p.config().has("window") ? p.config().getInt("window") : 0;
}

void checkPlan(const Policy& policy, const LayerState& s, const Plan& plan, const std::string& where) {
    SCOPED_TRACE(where);
    const int64_t H = s.numKvHeads, B = s.budget, L = s.keys.size(1);
    ASSERT_EQ(static_cast<int64_t>(plan.keep.size()), H);
    ASSERT_EQ(static_cast<int64_t>(plan.reasons.size()), H);
    ASSERT_TRUE(plan.scores.defined());
    ASSERT_EQ(plan.scores.sizes().vec(), (std::vector<int64_t>{H, L}));
    ASSERT_EQ(plan.scores.scalar_type(), at::kFloat);
    const bool full = isFullCache(policy.config());
    int64_t total = 0, kept = 0;
    for (int64_t h = 0; h < H; ++h) {
        const int64_t len = s.length(h);
        const auto& keep = plan.keep[h];
        total += len;
        kept += static_cast<int64_t>(keep.size());
        ASSERT_EQ(static_cast<int64_t>(plan.reasons[h].size()), len);
        std::vector<bool> in(static_cast<size_t>(len), false);
        for (size_t i = 0; i < keep.size(); ++i) {
            ASSERT_TRUE(keep[i] >= 0 && keep[i] < len) << "index " << keep[i];
            if (i > 0) {
                ASSERT_LT(keep[i - 1], keep[i]) << "sorted, unique";
            }
            in[keep[i]] = true;
        }
        float worstKept = INFINITY, bestEvicted = -INFINITY;
        for (int64_t i = 0; i < L; ++i) {
            const float sc = plan.scores[h][i].item<float>();
            if (i >= len) {
                EXPECT_TRUE(std::isnan(sc)) << "padding has no score";
                continue;
            }
            const TokenStatus r = plan.reasons[h][i];
            EXPECT_EQ(in[i], r != TokenStatus::Evicted) << "reason of entry " << i;
            if (r == TokenStatus::Sink || r == TokenStatus::Window) {
                EXPECT_TRUE(std::isnan(sc));
            }
            if (r == TokenStatus::Score && !std::isnan(sc)) worstKept = std::min(worstKept, sc);
            if (r == TokenStatus::Evicted && !std::isnan(sc)) bestEvicted = std::max(bestEvicted, sc);
        }
        if (full) {
            EXPECT_EQ(static_cast<int64_t>(keep.size()), len);
            continue;
        }
        const Protected p = protectedSet(len, sinksOf(policy), windowOf(policy, B), B);
        for (int64_t i = 0; i < len; ++i)
            if (p.contains(i, len)) {
                EXPECT_TRUE(in[i]) << "protected entry " << i << " evicted";
            }
        if (adaptive(policy) || budgetIsOutcome(policy.config())) continue;  // heads keep what they earn
        EXPECT_EQ(static_cast<int64_t>(keep.size()), std::min(len, B)) << "head " << h;
        EXPECT_GE(worstKept, bestEvicted) << "kept = the top-scoring, head " << h;
        if (policy.config().id == "tova") {
            EXPECT_EQ(keep, plan.keep[0]) << "one set per layer";
        }
    }
    if (adaptive(policy) && !full) {
        EXPECT_EQ(kept, std::min(total, H * B)) << "exact layer total";
    }
}

class EveryPolicy : public ::testing::TestWithParam<std::string> {
protected:
    const PolicyInfo& info() const { return findPolicy(GetParam()); }
};

std::vector<std::string> allIds() {
    std::vector<std::string> ids;
    for (const auto& info : policyRegistry())
        if (!info.sessionScored) ids.push_back(info.id);  // scored by a Session (session_scored tests)
    return ids;
}

}  // namespace

TEST_P(EveryPolicy, PlansOnARandomLayer) {
    at::Generator gen = at::detail::createCPUGenerator(11);
    const int64_t Hq = 4, Hkv = 2, L = 24, D = 8;
    const at::Tensor k = at::randn({Hkv, L, D}, gen), v = at::randn({Hkv, L, D}, gen);
    for (int64_t B : {1, 2, 3, 5, 8, 16, 24, 30}) {
        auto p = policy(specFor(info()));
        const LayerState s = makeState(k, v, Hq, B);
        // The whole prompt in one batch, with causal attention.
        at::Tensor probs = at::softmax(at::randn({Hq, L, L}, gen), -1).tril();
        probs = probs / probs.sum(-1, true);
        std::vector<int64_t> qpos;
        for (int64_t i = 0; i < L; ++i) qpos.push_back(i);
        p->observe(s, Observation{probs, at::randn({Hq, L, D}, gen), qpos});
        checkPlan(*p, s, p->plan(s), specFor(info()) + " B=" + std::to_string(B));
    }
}

TEST_P(EveryPolicy, RunsOnlineOverACache) {
    for (int64_t B : {3, 7}) {
        Driver d(policy(specFor(info())), 4, 2, 8, B, 5);
        for (int64_t t = 0; t < 40; ++t) {
            const Plan plan = d.step();
            if (!plan.keep.empty())
                checkPlan(d.policy(), d.planned(), plan, specFor(info()) + " B=" + std::to_string(B) + " t=" + std::to_string(t));
            if (HasFatalFailure()) return;
        }
        int64_t held = 0;
        for (int64_t h = 0; h < 2; ++h) held += d.cache().length(0, h);
        if (!isFullCache(GetParam()) && !info().budgetFree) {
            EXPECT_EQ(held, 2 * B);
        }
    }
}

TEST_P(EveryPolicy, BatchedPrefixEqualsOneTokenAtATime) {
    const int64_t B = 6;
    Driver batched(policy(specFor(info())), 4, 2, 8, B, 9), single(policy(specFor(info())), 4, 2, 8, B, 9);
    batched.step(B);  // nothing is evicted while the prefix fits
    for (int64_t t = 0; t < B; ++t) single.step();
    for (int64_t t = 0; t < 12; ++t) {
        const Plan a = batched.step(), b = single.step();
        ASSERT_EQ(a.keep, b.keep) << "step " << t;
        if (a.scores.defined()) {
            EXPECT_TRUE(at::allclose(a.scores.nan_to_num(-7), b.scores.nan_to_num(-7), 1e-5, 1e-6)) << "step " << t;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryPolicy, ::testing::ValuesIn(allIds()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// What PolicyRun::trim checks on every plan (core/run/policy_run.h): a
// policy that breaks its promises is an Error naming it, not a cache that
// holds something else.
TEST(PlanCheck, ABrokenPlanIsAnErrorNamingThePolicy) {
    at::Generator gen = at::detail::createCPUGenerator(3);
    const int64_t Hq = 4, Hkv = 2, L = 10, D = 8, B = 4;
    const LayerState s = makeState(at::randn({Hkv, L, D}, gen), at::randn({Hkv, L, D}, gen), Hq, B);
    const PolicyConfig snapkv = parsePolicySpec("snapkv:window=2");
    auto plan = [&](std::vector<int64_t> keep) {
        Plan p;
        for (int64_t h = 0; h < Hkv; ++h) {
            p.keep.push_back(keep);
            std::vector<TokenStatus> r(static_cast<size_t>(L), TokenStatus::Evicted);
            for (int64_t i : keep) r[static_cast<size_t>(i)] = TokenStatus::Score;
            p.reasons.push_back(r);
        }
        return p;
    };
    auto message = [&](const PolicyConfig& c, const Plan& p) -> std::string {
        try {
            checkPlanHolds(c, s, p);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    };
    EXPECT_EQ(message(snapkv, plan({2, 5, 8, 9})), "") << "B entries per head";
    EXPECT_EQ(message(snapkv, plan({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})), "") << "keeping everything (knorm's skipped layers)";
    const std::string over = message(snapkv, plan({1, 2, 5, 8, 9}));
    EXPECT_NE(over.find("policy snapkv:window=2 broke its plan at layer 0"), std::string::npos) << over;
    EXPECT_NE(over.find("keeps 5 entries, budget 4"), std::string::npos) << over;
    Plan lying = plan({2, 5, 8, 9});
    lying.reasons[1][0] = TokenStatus::Sink;  // a protected entry the plan evicts
    const std::string lie = message(snapkv, lying);
    EXPECT_NE(lie.find("KV head 1 entry 0 is evicted but marked kept"), std::string::npos) << lie;
    // Per-head allocation: heads may differ while the layer total holds.
    Plan ragged = plan({2, 5, 8, 9});
    ragged.keep[0] = {1, 2, 5, 8, 9};
    ragged.reasons[0][1] = TokenStatus::Score;
    ragged.keep[1] = {5, 8, 9};
    ragged.reasons[1][2] = TokenStatus::Evicted;
    EXPECT_EQ(message(parsePolicySpec("adakv:window=2"), ragged), "");
    EXPECT_NE(message(snapkv, ragged), "");
}
