// Policies the Session scores ahead. The hindsight oracle (issue 20): at the end of the prompt it keeps, per
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
#include "core/paths.h"
#include "core/tokenizer/tokenizer.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

constexpr int64_t kPrompt = 40, kBudget = 10, kSteps = 5;

std::shared_ptr<const Model> oracleModel() {
    test::ModelOptions o;
    o.maxPositions = 256;
    o.numLayers = 3;
    o.scale = 2.0f;  // peaked attention: the choice matters
    return test::sharedRandomModel("oracle", Family::Llama, o, 31);
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

// KVzip on the bundled model (its tokenizer writes the repeat request): each
// prompt token scores the most attention the model's reading of "repeat the
// context" + the prompt again gives it — the model's own attention of one
// forward over prompt + repeat, captured — and each KV head keeps its top B.
TEST(Kvzip, ScoresEachPromptTokenByTheMostAttentionItsRepeatGives) {
    const auto dir = bundledModelDir();
    const auto model = std::shared_ptr<const Model>(Model::load(dir));
    const auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(dir / "tokenizer.json"));
    const auto& c = model->config();
    SessionOptions so;
    for (int32_t id : tok->encode("the code for the red door is 4 8 2 1 . the small cat sleeps under the tree in the "
                                  "morning , and the baker walks slowly along the river . what is the code for the red door ?"))
        so.prompt.push_back(id);
    so.tokenizer = tok;
    so.policies = {parsePolicySpec("kvzip:sinks=0,heads=uniform")};
    const int64_t P = static_cast<int64_t>(so.prompt.size()), B = 12, G = c.numHeads / c.numKvHeads;
    so.budget = parseBudget(std::to_string(B));
    Session s(model, so);
    const auto trace = s.start();

    std::vector<int64_t> all = so.prompt;
    for (int32_t id : tok->encode("\n\nRepeat the previous context exactly.", false)) all.push_back(id);
    for (int32_t id : tok->encode("\n", false)) all.push_back(id);
    all.insert(all.end(), so.prompt.begin(), so.prompt.end());
    KvCache cache = model->newCache();
    ForwardOptions o;
    o.captureAttention = true;
    const ForwardResult r = model->forward(all, cache, o);
    const int64_t n = static_cast<int64_t>(all.size());
    for (int64_t l = 0; l < c.numLayers; ++l) {
        const at::Tensor probs = cache.byEntry(l, r.attention[l]).to(at::kFloat);  // [Hq, n, n]
        const at::Tensor want = probs.narrow(1, P, n - P).narrow(2, 0, P).amax(1).view({c.numKvHeads, G, P}).amax(1);
        for (int64_t kv = 0; kv < c.numKvHeads; ++kv) {
            const HeadTrace& h = trace->policies[1].layers[l].heads[kv];
            std::vector<int64_t> order(P), kept;
            for (int64_t p = 0; p < P; ++p) order[p] = p;
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
                const float x = want[kv][a].item<float>(), y = want[kv][b].item<float>();
                return x != y ? x > y : a > b;
            });
            std::vector<int64_t> top(order.begin(), order.begin() + B);
            std::sort(top.begin(), top.end());
            for (int64_t p = 0; p < P; ++p) {
                if (isHeld(h.status[p])) kept.push_back(p);
                if (!std::isnan(h.score[p]))
                    EXPECT_NEAR(h.score[p], want[kv][p].item<float>(), 1e-5) << "layer " << l << " head " << kv << " pos " << p;
            }
            EXPECT_EQ(kept, top) << "layer " << l << " KV head " << kv;
        }
    }
}
