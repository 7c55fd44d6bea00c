// Session semantics: lockstep, teacher forcing, free running, metrics,
// attention capture, cancellation and bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

std::shared_ptr<const Model> tinyModel() {
    test::ModelOptions o;
    o.maxPositions = 256;
    o.scale = 2.0f;
    return test::sharedRandomModel("session", Family::Llama, o, 41);
}

SessionOptions baseOptions(std::vector<std::string> policies, const std::string& budget) {
    SessionOptions so;
    so.prompt = test::randomTokens(40, tinyModel()->config().vocabSize, 3);
    for (const auto& p : policies) so.policies.push_back(parsePolicySpec(p));
    so.budget = parseBudget(budget);
    return so;
}

}  // namespace

TEST(Session, TeacherForcedRunsReadTheSameTokens) {
    Session s(tinyModel(), baseOptions({"window", "streaming"}, "8"));
    auto t = s.start();
    for (int i = 0; i < 6; ++i) t = s.step();
    ASSERT_EQ(t->policies.size(), 3u);
    EXPECT_EQ(t->policies[0].id, "full");
    for (const auto& p : t->policies) {
        EXPECT_EQ(p.generated, t->policies[0].generated) << p.label;
        EXPECT_EQ(p.metrics.size(), 7u);
        for (const auto& m : p.metrics) EXPECT_GE(m.kl, -1e-12);
        EXPECT_EQ(p.divergedAt, -1);
    }
    EXPECT_EQ(t->tokens.size(), 46u);
    EXPECT_EQ(t->labels.size(), 46u);
    // The full cache agrees with itself; a budget of 8 of 46 tokens costs something.
    EXPECT_EQ(t->policies[0].meanKl(), 0.0);
    EXPECT_GT(t->policies[1].meanKl(), 0.0);
    EXPECT_LT(t->policies[1].bytesHeld, t->policies[0].bytesHeld);
    EXPECT_LT(t->policies[1].meanRetainedMass(), 1.0);
    // Perplexity of the continuation is defined once a target has been read.
    EXPECT_TRUE(std::isfinite(t->policies[1].perplexity()));
}

TEST(Session, ContinuationIsReadAsGiven) {
    SessionOptions so = baseOptions({"window"}, "8");
    so.continuation = {5, 6, 7};
    Session s(tinyModel(), so);
    s.start();
    std::shared_ptr<const Trace> t;
    for (int i = 0; i < 3; ++i) t = s.step();
    EXPECT_EQ(t->policies[1].generated, (std::vector<int64_t>{5, 6, 7}));
    EXPECT_FALSE(std::isnan(t->policies[1].metrics[0].targetLogProb)) << "the read token is the target";
}

TEST(Session, FreeRunningRunsGenerateTheirOwnText) {
    SessionOptions so = baseOptions({"window"}, "2");
    so.teacherForced = false;
    Session s(tinyModel(), so);
    auto t = s.start();
    for (int i = 0; i < 24; ++i) t = s.step();
    const auto& full = t->policies[0].generated;
    const auto& win = t->policies[1].generated;
    ASSERT_EQ(win.size(), 24u);
    if (full != win) {
        EXPECT_GE(t->policies[1].divergedAt, 0);
        EXPECT_NE(full[t->policies[1].divergedAt], win[t->policies[1].divergedAt]);
    }
}

TEST(Session, AttentionCaptureMarksEvictedKeys) {
    SessionOptions so = baseOptions({"window"}, "8");
    so.attention = {true, 1, 3};
    Session s(tinyModel(), so);
    auto t = s.start();
    t = s.step();
    ASSERT_EQ(t->attention.size(), 2u);
    const AttentionMap& full = t->attention[0];
    const AttentionMap& win = t->attention[1];
    EXPECT_EQ(full.size, 41);
    const int64_t q = 40;
    double fullSum = 0, winSum = 0;
    for (int64_t k = 0; k <= q; ++k) {
        fullSum += full.at(q, k);
        if (k >= q - 8) {
            EXPECT_FALSE(std::isnan(win.at(q, k))) << k;
            winSum += win.at(q, k);
        } else {
            EXPECT_TRUE(std::isnan(win.at(q, k))) << "evicted key " << k << " must be NaN";
        }
    }
    EXPECT_NEAR(fullSum, 1.0, 1e-5);
    EXPECT_NEAR(winSum, 1.0, 1e-5);
    EXPECT_TRUE(std::isnan(full.at(3, 10))) << "keys after the query are not seen";
}

TEST(Session, CancelFlagStopsTheRun) {
    std::atomic<bool> cancel{true};
    Session s(tinyModel(), baseOptions({"h2o"}, "8"));
    s.setCancelFlag(&cancel);
    EXPECT_THROW(s.start(), Cancelled);
}

TEST(Session, BadOptionsAreArgumentErrors) {
    SessionOptions so = baseOptions({"window"}, "8");
    so.prompt.clear();
    EXPECT_THROW(Session(tinyModel(), so), ArgumentError);
    so = baseOptions({"window"}, "8");
    so.attention = {true, 7, 0};
    EXPECT_THROW(Session(tinyModel(), so), ArgumentError);
    so = baseOptions({"window"}, "8");
    so.budget = parseLayerBudgets("4,4,4,4,4");
    EXPECT_THROW(Session(tinyModel(), so), ArgumentError);
    so = baseOptions({"window"}, "8");
    so.prompt.push_back(100000);
    EXPECT_THROW(Session(tinyModel(), so), ArgumentError);
    EXPECT_THROW(parsePolicySpec("nosuch"), ArgumentError);
}

// Window and streaming read the prompt in one batch under their band mask;
// every_n(1) is the same rule read token by token. Both must give the same
// logits, kept sets, statuses and captured attention (POLICIES.md allows the
// batch only where the result is identical).
TEST(Session, BandedPromptEqualsTokenByTokenReading) {
    for (const std::string policy : {"window", "streaming:sinks=3", "window:alloc=pyramid"}) {
        SessionOptions batched = baseOptions({policy, policy + (policy.find(':') == std::string::npos ? ":" : ",") +
                                                          "schedule=every_n,n=1"},
                                             "9");
        batched.attention = {true, 1, 3};
        Session s(tinyModel(), batched);
        auto t = s.start();
        for (int i = 0; i < 5; ++i) t = s.step();
        const PolicyTrace &band = t->policies[1], &online = t->policies[2];
        ASSERT_EQ(band.metrics.size(), online.metrics.size());
        for (size_t i = 0; i < band.metrics.size(); ++i) {
            // fp32 sums in another order: agreement to ~1e-6 relative
            EXPECT_NEAR(band.metrics[i].kl, online.metrics[i].kl, 1e-5 * std::max(1.0, online.metrics[i].kl)) << policy << " step " << i;
            EXPECT_EQ(band.metrics[i].argmax, online.metrics[i].argmax) << policy;
        }
        for (size_t l = 0; l < band.layers.size(); ++l)
            for (size_t h = 0; h < band.layers[l].heads.size(); ++h) {
                EXPECT_EQ(band.layers[l].heads[h].status, online.layers[l].heads[h].status) << policy << " L" << l;
                EXPECT_EQ(band.layers[l].heads[h].held, online.layers[l].heads[h].held);
            }
        const std::vector<float> a = t->attention[1].dense(), b = t->attention[2].dense();
        const int64_t size = t->attention[1].size;
        ASSERT_EQ(a.size(), b.size());
        int hidden = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i])) << policy << " cell " << i;
            if (std::isnan(a[i])) ++hidden;
            else EXPECT_NEAR(a[i], b[i], 1e-5);
        }
        EXPECT_GT(hidden, static_cast<int>(size * (size + 1) / 2)) << "evicted keys are hidden, not just future ones";
    }
}

// prefill_then_step (POLICIES.md; the H2O real-drop and TOVA references):
// the prompt compressed once from the full prefill's attention — the same
// kept set as prefill_once, which scores the same prefill — then one token
// evicted after every decode step, so the cache stays at B where
// prefill_once grows. The trace says which schedule ran.
TEST(Session, PrefillThenStepCompressesLikePrefillOnceThenTrimsEveryStep) {
    for (const char* id : {"h2o", "tova"}) {
        SCOPED_TRACE(id);
        const std::string p = id;
        Session s(tinyModel(), baseOptions({p + ":schedule=prefill_then_step", p + ":schedule=prefill_once",
                                            p + ":schedule=every_step"}, "12"));
        auto t = s.start();
        const PolicyTrace &then = t->policies[1], &once = t->policies[2], &online = t->policies[3];
        EXPECT_EQ(then.schedule, "prefill_then_step");
        EXPECT_EQ(once.schedule, "prefill_once");
        bool differsFromOnline = false;
        for (size_t l = 0; l < then.layers.size(); ++l)
            for (size_t h = 0; h < then.layers[l].heads.size(); ++h) {
                EXPECT_EQ(then.layers[l].heads[h].status, once.layers[l].heads[h].status) << "layer " << l << " head " << h;
                EXPECT_EQ(then.layers[l].heads[h].held, 12);
                differsFromOnline = differsFromOnline || then.layers[l].heads[h].status != online.layers[l].heads[h].status;
            }
        EXPECT_TRUE(differsFromOnline) << "the prefill's scores should keep another set than online reading";
        for (int i = 0; i < 5; ++i) t = s.step();
        for (const auto& layer : t->policies[1].layers)
            for (const auto& head : layer.heads) EXPECT_EQ(head.held, 12);
        for (const auto& layer : t->policies[2].layers)
            for (const auto& head : layer.heads) EXPECT_EQ(head.held, 17);
    }
}
