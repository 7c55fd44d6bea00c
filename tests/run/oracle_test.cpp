// The hindsight oracle (issue 20): at the end of the prompt it keeps, per
// layer and KV head, the B prompt tokens the full cache's next queries (the
// last prompt query and `horizon` decode queries) attend to most, summed
// over the group's query heads — checked against the attention maps a full
// cache captures head by head — and no prefill_once policy at the same
// uniform budget retains more of the full cache's attention than it does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/model/model.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

constexpr int64_t kPrompt = 40, kBudget = 10, kSteps = 5;

std::shared_ptr<const Model> oracleModel() {
    static test::ScratchDir dir("oracle");
    static std::shared_ptr<const Model> model = [] {
        test::ModelOptions o;
        o.maxPositions = 256;
        o.numLayers = 3;
        o.scale = 2.0f;  // peaked attention: the choice matters
        test::makeRandomModel(Family::Llama, o, 31, dir.path());
        return std::shared_ptr<const Model>(Model::load(dir.path()));
    }();
    return model;
}

SessionOptions optionsWith(std::vector<std::string> policies, int64_t planned = kSteps) {
    const auto model = oracleModel();
    SessionOptions so;
    so.prompt = test::randomTokens(kPrompt, model->config().vocabSize, 8);
    for (const auto& p : policies) so.policies.push_back(parsePolicySpec(p));
    so.budget = parseBudget(std::to_string(kBudget));
    so.plannedSteps = planned;
    return so;
}

std::shared_ptr<const Trace> run(SessionOptions so, int64_t steps = kSteps) {
    Session s(oracleModel(), std::move(so));
    auto t = s.start();
    for (int64_t i = 0; i < steps; ++i) t = s.step();
    return t;
}

}  // namespace

TEST(Oracle, KeepsWhatTheNextQueriesAttendToMost) {
    const auto model = oracleModel();
    const auto& c = model->config();
    const int64_t G = c.numHeads / c.numKvHeads;
    for (int64_t horizon : {int64_t{2}, kSteps}) {
        const std::string spec = horizon == kSteps ? "oracle" : "oracle:horizon=" + std::to_string(horizon);
        const auto trace = run(optionsWith({spec}));
        const PolicyTrace& oracle = trace->policies[1];
        EXPECT_EQ(oracle.id, "oracle");
        for (int64_t l = 0; l < c.numLayers; ++l) {
            // The future of each prompt token: the full cache's captured attention
            // of queries P-1 .. P-1+horizon, summed over the group's query heads.
            std::vector<std::vector<double>> future(static_cast<size_t>(c.numKvHeads), std::vector<double>(kPrompt, 0.0));
            for (int64_t h = 0; h < c.numHeads; ++h) {
                SessionOptions so = optionsWith({});
                so.attention = {true, l, h};
                const auto full = run(so);
                const AttentionMap& map = full->attention[0];
                for (int64_t q = kPrompt - 1; q <= kPrompt - 1 + horizon; ++q)
                    for (int64_t p = 0; p < kPrompt; ++p) future[h / G][p] += map.at(q, p);
            }
            for (int64_t kv = 0; kv < c.numKvHeads; ++kv) {
                std::vector<int64_t> order(kPrompt);
                for (int64_t p = 0; p < kPrompt; ++p) order[p] = p;
                const auto& f = future[kv];
                std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
                    return f[a] != f[b] ? f[a] > f[b] : a > b;
                });
                std::vector<int64_t> want(order.begin(), order.begin() + kBudget), got;
                std::sort(want.begin(), want.end());
                const auto& status = oracle.layers[l].heads[kv].status;
                for (int64_t p = 0; p < kPrompt; ++p)
                    if (isHeld(status[p])) got.push_back(p);
                EXPECT_EQ(got, want) << "horizon " << horizon << " layer " << l << " KV head " << kv;
            }
        }
    }
}

TEST(Oracle, NoPolicyAtTheSameBudgetRetainsMoreAttention) {
    const auto trace = run(optionsWith({"oracle", "snapkv:window=4", "snapkv:window=4,critical=true", "knorm:skip_layers=",
                                        "keydiff", "cur", "h2o:schedule=prefill_once", "tova:schedule=prefill_once"}));
    const double best = trace->policies[1].meanRetainedMass();
    EXPECT_GT(best, 0.0);
    for (size_t r = 2; r < trace->policies.size(); ++r)
        EXPECT_GE(best, trace->policies[r].meanRetainedMass() - 1e-6) << trace->policies[r].label;
    // And it is a bound that bites: some policy retains clearly less.
    double worst = best;
    for (size_t r = 2; r < trace->policies.size(); ++r) worst = std::min(worst, trace->policies[r].meanRetainedMass());
    EXPECT_LT(worst, best - 0.01);
}

TEST(Oracle, SaysWhatItNeeds) {
    auto refused = [](SessionOptions so) {
        try {
            Session s(oracleModel(), std::move(so));
        } catch (const ArgumentError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(refused(optionsWith({"oracle"}, 0)), "");  // no steps planned: 16 ahead
    EXPECT_NE(refused(optionsWith({"oracle:schedule=every_step"})).find("prefill_once"), std::string::npos);
    SessionOptions free = optionsWith({"oracle"});
    free.teacherForced = false;
    EXPECT_NE(refused(free).find("teacher-forced"), std::string::npos);
}
