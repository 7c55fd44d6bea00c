// Every registered policy × budgets {tiny, 25 %, 50 %, ≥ T}: the kept sets
// have the budgeted size, contain the protected sets, and a budget covering
// the whole sequence changes nothing. A policy is tested the day it is
// registered.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <set>

#include "core/model/model.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

constexpr int64_t kPrompt = 48;
constexpr int64_t kSteps = 4;

std::shared_ptr<const Model> sharedModel() {
    test::ModelOptions o;
    o.maxPositions = 512;
    o.numLayers = 3;
    return test::sharedRandomModel("conformance", Family::Llama, o, 21);
}

// Positions the policy must hold after reading the prompt (POLICIES.md's
// protected sets, truncated to the budget: sinks first, then the window).
std::set<int64_t> protectedPositions(const PolicyConfig& c, int64_t B, int64_t T) {
    std::set<int64_t> out;
    int64_t sinks = 0, window = 0;
    if (c.has("sinks")) sinks = c.getInt("sinks");  // streaming, andpro, cur, lagkv
    if (c.id == "window")
        window = B;
    else if (c.id == "h2o")
        window = c.text("recent") == "B/2" ? B / 2 : c.getInt("recent");
    else if (c.has("window"))  // the SnapKV family, random, rkv, qfilter
        window = c.getInt("window");
    sinks = std::min({sinks, B, T});
    window = std::min({window, B - sinks, T - sinks});
    for (int64_t p = 0; p < sinks; ++p) out.insert(p);
    for (int64_t p = T - window; p < T; ++p) out.insert(p);
    return out;
}

bool skipsLayer(const PolicyConfig& c, int64_t layer) {
    if (c.id != "knorm") return false;
    for (int64_t l : c.getIntList("skip_layers"))
        if (l == layer) return true;
    return false;
}

struct Case {
    std::string policy;
    std::string budget;
};

class Conformance : public ::testing::TestWithParam<Case> {};

TEST_P(Conformance, KeptSetsHaveTheBudgetAndTheProtectedSets) {
    const Case& tc = GetParam();
    auto model = sharedModel();
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, model->config().vocabSize, 5);
    so.policies = {parsePolicySpec(tc.policy)};
    so.budget = parseBudget(tc.budget);
    Session session(model, so);
    auto trace = session.start();
    ASSERT_EQ(trace->policies.size(), 2u);
    const PolicyTrace& p = trace->policies[1];
    const PolicyConfig& cfg = so.policies[0];
    const bool adaptive = cfg.has("heads") && cfg.text("heads") == "adaptive";
    for (int64_t l = 0; l < trace->numLayers; ++l) {
        SCOPED_TRACE("layer " + std::to_string(l));
        const LayerTrace& lt = p.layers[l];
        const int64_t B = lt.budget;
        ASSERT_GE(B, 1);
        int64_t total = 0;
        for (const HeadTrace& h : lt.heads) {
            total += h.held;
            int64_t heldStatuses = 0;
            for (TokenStatus s : h.status) heldStatuses += isHeld(s) ? 1 : 0;
            EXPECT_EQ(heldStatuses, h.held) << "statuses must describe the cache";
            if (!adaptive && !isFullCache(cfg) && !skipsLayer(cfg, l)) EXPECT_LE(h.held, B);
        }
        const int64_t expected = (isFullCache(cfg) || skipsLayer(cfg, l)) ? kPrompt : std::min(B, kPrompt);
        if (!budgetIsOutcome(cfg)) EXPECT_EQ(total, trace->numKvHeads * expected) << "the layer holds exactly its budget";
        if (isFullCache(cfg) || skipsLayer(cfg, l)) continue;
        for (int64_t pos : protectedPositions(cfg, B, kPrompt))
            for (size_t h = 0; h < lt.heads.size(); ++h)
                EXPECT_TRUE(isHeld(lt.heads[h].status[pos])) << "protected position " << pos << " of head " << h;
    }
    for (int64_t s = 0; s < kSteps; ++s) trace = session.step();  // decoding keeps the invariants running
    EXPECT_EQ(trace->policies[1].metrics.size(), static_cast<size_t>(kSteps + 1));
}

// select=threshold (DMS-style): every entry a score decided is held exactly
// when it scored at least tau; the layer's budget in the Trace is what its
// fullest KV head holds; the protected sets stay. Runs on through decode steps.
class Threshold : public ::testing::TestWithParam<std::string> {};

TEST_P(Threshold, HoldsExactlyTheEntriesScoringAtLeastTau) {
    auto model = sharedModel();
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, model->config().vocabSize, 5);
    so.policies = {parsePolicySpec(GetParam())};
    so.budget = parseBudget("25%");
    Session session(model, so);
    auto trace = session.start();
    for (int64_t s = 0; s < kSteps; ++s) trace = session.step();
    const PolicyConfig& cfg = so.policies[0];
    const double tau = cfg.getReal("threshold");
    const PolicyTrace& p = trace->policies[1];
    const int64_t T = static_cast<int64_t>(trace->tokens.size());
    int64_t keptByScore = 0, evictedByScore = 0;
    std::set<int64_t> heldCounts;
    for (int64_t l = 0; l < trace->numLayers; ++l) {
        SCOPED_TRACE("layer " + std::to_string(l));
        const LayerTrace& lt = p.layers[l];
        int64_t fullest = 0;
        for (const HeadTrace& h : lt.heads) {
            fullest = std::max(fullest, h.held);
            heldCounts.insert(h.held);
            int64_t held = 0;
            for (int64_t pos = 0; pos < T; ++pos) {
                held += isHeld(h.status[pos]) ? 1 : 0;
                if (h.status[pos] == TokenStatus::Score) {
                    EXPECT_GE(h.score[pos], tau) << "position " << pos;
                    ++keptByScore;
                } else if (h.status[pos] == TokenStatus::Evicted && !std::isnan(h.score[pos])) {
                    EXPECT_LT(h.score[pos], tau) << "position " << pos;
                    ++evictedByScore;
                }
            }
            EXPECT_EQ(held, h.held);
        }
        EXPECT_EQ(lt.budget, fullest) << "a threshold's budget is what its fullest head holds";
    }
    EXPECT_GT(keptByScore, 0) << "tau must keep some entries for the test to mean anything";
    EXPECT_GT(evictedByScore, 0) << "tau must evict some entries for the test to mean anything";
    EXPECT_GT(heldCounts.size(), 1u) << "heads hold what their scores earn, not one budget";
}

INSTANTIATE_TEST_SUITE_P(Policies, Threshold,
                         ::testing::Values("snapkv:select=threshold,threshold=0.2,window=8",
                                           "h2o:select=threshold,threshold=0.5,schedule=every_step",
                                           "knorm:select=threshold,threshold=-3,skip_layers=",
                                           "tova:select=threshold,threshold=0.02"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                             std::string id = i.param.substr(0, i.param.find(':'));
                             return id + std::to_string(i.index);
                         });

// Policies that decide across layers. CAKE shares the layers' budgets out:
// the total stays, the layers differ, and each holds its own.
TEST(CrossLayer, CakeSharesTheLayersBudgetsOutAndEachLayerHoldsItsOwn) {
    auto model = sharedModel();
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, model->config().vocabSize, 5);
    so.policies = {parsePolicySpec("cake:window=4")};
    so.budget = parseBudget("50%");
    Session session(model, so);
    auto trace = session.start();
    const PolicyTrace& p = trace->policies[1];
    int64_t sum = 0;
    std::set<int64_t> distinct;
    for (const LayerTrace& lt : p.layers) {
        sum += lt.budget;
        distinct.insert(lt.budget);
        int64_t total = 0;
        for (const HeadTrace& h : lt.heads) {
            EXPECT_EQ(h.held, std::min(lt.budget, kPrompt));
            total += h.held;
        }
        EXPECT_GE(lt.budget, 4) << "the window is kept";
    }
    EXPECT_EQ(sum, trace->numLayers * 24) << "the layers' budgets still add up to L x B";
    EXPECT_GT(distinct.size(), 1u) << "preferences differ between layers";
    // Turned off, the allocator's budgets stand.
    so.policies = {parsePolicySpec("cake:window=4,layer_budgets=false")};
    Session uniform(model, so);
    const auto uniformTrace = uniform.start();
    for (const LayerTrace& lt : uniformTrace->policies[1].layers) EXPECT_EQ(lt.budget, 24);
}

// DuoAttention: the ratio of all KV heads stream (sinks + recent), the
// others keep everything; decode steps add to both (prefill_once).
TEST(CrossLayer, DuoAttentionStreamsItsShareOfHeadsAndTheOthersKeepEverything) {
    auto model = sharedModel();
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, model->config().vocabSize, 5);
    so.policies = {parsePolicySpec("duo:sinks=2,recent=6,ratio=0.5")};
    so.budget = parseBudget("10%");  // does not apply
    Session session(model, so);
    auto trace = session.start();
    for (int64_t s = 0; s < kSteps; ++s) trace = session.step();
    const PolicyTrace& p = trace->policies[1];
    int64_t streaming = 0, retrieval = 0;
    for (const LayerTrace& lt : p.layers) {
        for (const HeadTrace& h : lt.heads) {
            if (h.held == 8 + kSteps) {
                ++streaming;
                EXPECT_EQ(h.status[1], TokenStatus::Sink);
                EXPECT_EQ(h.status[20], TokenStatus::Evicted);
                EXPECT_FALSE(std::isnan(h.score[20])) << "an evicted entry shows its head's score";
            } else {
                EXPECT_EQ(h.held, kPrompt + kSteps);
                ++retrieval;
            }
        }
    }
    const int64_t heads = trace->numLayers * trace->numKvHeads;
    EXPECT_EQ(streaming, static_cast<int64_t>(std::nearbyint(0.5 * static_cast<double>(heads))));
    EXPECT_EQ(streaming + retrieval, heads);
}

class NoEviction : public ::testing::TestWithParam<std::string> {};

TEST_P(NoEviction, BudgetCoveringTheSequenceChangesNothing) {
    auto model = sharedModel();
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, model->config().vocabSize, 6);
    so.policies = {parsePolicySpec(GetParam())};
    so.budget = parseBudget(std::to_string(kPrompt + kSteps + 1));
    Session session(model, so);
    auto trace = session.start();
    for (int64_t s = 0; s < kSteps; ++s) trace = session.step();
    const PolicyTrace& p = trace->policies[1];
    ASSERT_EQ(p.metrics.size(), static_cast<size_t>(kSteps + 1));
    for (const auto& m : p.metrics) {
        EXPECT_EQ(m.kl, 0.0) << "logits must be identical to the full cache at position " << m.position;
        EXPECT_TRUE(m.top1Agrees);
        EXPECT_NEAR(m.retainedMass, 1.0, 1e-6);
    }
    EXPECT_EQ(p.bytesHeld, trace->policies[0].bytesHeld);
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (const auto& info : policyRegistry())
        if (!info.fullCache)  // the Session's own run 0
        for (const char* b : {"3", "25%", "50%", "60"}) out.push_back({info.id, b});
    // The wrappers that compose with any scorer (CriticalKV, ChunkKV), on
    // an attention scorer, a prefill scorer, an attention-free one and together.
    for (const char* spec : {"h2o:critical=true", "snapkv:critical=true,first_stage=0.25", "tova:chunk_length=4",
                             "knorm:chunk_length=5,skip_layers=", "adakv:critical=true,chunk_length=3"})
        for (const char* b : {"3", "25%", "60"}) out.push_back({spec, b});
    return out;
}

std::string caseName(const ::testing::TestParamInfo<Case>& i) {
    std::string b = i.param.budget;
    if (b.back() == '%') b = b.substr(0, b.size() - 1) + "pct";
    std::string name = i.param.policy + "_" + b;
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return name;
}

INSTANTIATE_TEST_SUITE_P(Registry, Conformance, ::testing::ValuesIn(cases()), caseName);

std::vector<std::string> policyIds() {
    std::vector<std::string> out;
    for (const auto& info : policyRegistry())
        if (!info.fullCache) out.push_back(info.id);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Registry, NoEviction, ::testing::ValuesIn(policyIds()));

}  // namespace
