// The interactive refresh (issue 17): a Session built after an edit from
// the previous one gives the Traces a new Session gives — step for step,
// every run — while reading only what the edit invalidated. Same prompt:
// bit for bit (the runs kept, and the ones replaying the prompt record that
// a new Session replays the same way). A prompt sharing a prefix: the full
// cache reads the rest in other chunks, so logits agree within 1e-5 and
// the kept sets are the same; so do the runs that read the prompt
// themselves after an edit (they take the prefix no trim touches from the
// full cache's record and read the rest in one batch of another size).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <cmath>

#include "core/host_paths.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"
#include "tests/support/trace_compare.h"

using namespace kvlens;
using test::expectSameTraces;
using test::runAll;

namespace {

constexpr int kSteps = 5;

std::shared_ptr<const Model> refreshModel() {
    test::ModelOptions o;
    o.maxPositions = 256;
    o.scale = 2.0f;
    return test::sharedRandomModel("refresh", Family::Qwen2, o, 91);
}

SessionOptions options(const std::vector<std::string>& policies, const std::string& budget,
                       std::vector<int64_t> prompt = {}) {
    SessionOptions so;
    so.prompt = prompt.empty() ? test::randomTokens(40, refreshModel()->config().vocabSize, 5) : std::move(prompt);
    for (const auto& p : policies) so.policies.push_back(parsePolicySpec(p));
    so.budget = parseBudget(budget);
    so.attention = {true, 1, 3};  // as the GUI: one captured map
    so.refreshable = true;
    return so;
}

const std::vector<std::string> kPolicies{"streaming", "h2o", "tova", "snapkv", "pyramidkv", "h2o:schedule=every_step",
                                         "knorm", "lru"};

// Exact on the host paths (a row's products and attention do not depend on
// how rows are batched); the device paths (core/host_paths.h: the tensor code
// CUDA runs) batch the rows of a replay or a catch-up differently from a run
// alone, so there the same figures agree within float rounding.
const double kExact = hostPathsEnabled() ? 0 : 1e-5;
// Where a run reading the prompt itself (streaming, window, strict
// every_step) is computed again: it replays the prefix no trim touches from
// the full cache's record and reads the rest in a batch of another size,
// which the BLAS may round differently.
constexpr double kReread = 1e-5;

// Runs `before` for `stepsBefore` steps, then `after` taking over from it,
// and compares with `after` computed afresh. Returns what was taken over.
Reuse refreshEqualsFresh(const SessionOptions& before, const SessionOptions& after, double tol, const std::string& what,
                         int stepsBefore = kSteps, int stepsAfter = kSteps) {
    auto previous = std::make_unique<Session>(refreshModel(), before);
    runAll(*previous, stepsBefore);
    Session refreshed(refreshModel(), after, std::move(previous));
    const auto got = runAll(refreshed, stepsAfter);
    Session fresh(refreshModel(), after);
    const auto want = runAll(fresh, stepsAfter);
    expectSameTraces(got, want, tol, what);
    return refreshed.reuse();
}

}  // namespace

TEST(Refresh, ABudgetEditKeepsTheFullCacheAndReplaysThePrompt) {
    const Reuse r = refreshEqualsFresh(options(kPolicies, "16"), options(kPolicies, "12"), kReread, "budget 16 -> 12");
    EXPECT_EQ(r.runsKept, 1);  // the full cache
    EXPECT_EQ(r.steps, kSteps);
    EXPECT_EQ(r.runsShared, 5);  // h2o, tova (prefill_then_step), snapkv, pyramidkv, knorm (prefill_once)
    EXPECT_EQ(r.runsRead, 3);      // streaming, h2o every_step, lru
    EXPECT_EQ(r.runsReadPast, 3);  // each replayed the 12 tokens no trim touches from the full cache's record
}

TEST(Refresh, AParameterEditRerunsThatPolicyOnly) {
    std::vector<std::string> edited = kPolicies;
    edited[3] = "snapkv:window=4";
    const Reuse r = refreshEqualsFresh(options(kPolicies, "16"), options(edited, "16"), kExact, "snapkv window");
    EXPECT_EQ(r.runsKept, static_cast<int>(kPolicies.size()));  // all but snapkv, plus the full cache
    EXPECT_EQ(r.runsShared, 1);
    EXPECT_EQ(r.runsRead, 0);
}

TEST(Refresh, PoliciesAddedRemovedAndReordered) {
    const Reuse r = refreshEqualsFresh(options({"h2o", "streaming", "tova"}, "16"),
                                       options({"tova", "window", "h2o"}, "16"), kReread, "reordered");
    EXPECT_EQ(r.runsKept, 3);  // full, tova, h2o
    EXPECT_EQ(r.runsRead, 1);  // window
}

TEST(Refresh, MoreStepsContinueEveryRun) {
    const Reuse r = refreshEqualsFresh(options(kPolicies, "16"), options(kPolicies, "16"), kExact, "more steps", 2, kSteps);
    EXPECT_EQ(r.runsKept, static_cast<int>(kPolicies.size()) + 1);
    EXPECT_EQ(r.steps, 2);
}

TEST(Refresh, FreeRunningWithSamplingKeepsEachRunsText) {
    SessionOptions before = options({"h2o", "streaming", "snapkv"}, "12"), after = before;
    before.teacherForced = after.teacherForced = false;
    before.sampling.greedy = after.sampling.greedy = false;
    before.sampling.seed = after.sampling.seed = 7;
    after.policies[2] = parsePolicySpec("snapkv:window=4");
    const Reuse r = refreshEqualsFresh(before, after, kExact, "free-running");
    EXPECT_EQ(r.runsKept, 3);
}

TEST(Refresh, AnAppendedPromptContinuesTheFullCache) {
    const auto prompt = test::randomTokens(40, refreshModel()->config().vocabSize, 5);
    auto longer = prompt;
    for (int64_t t : test::randomTokens(7, refreshModel()->config().vocabSize, 6)) longer.push_back(t);
    const Reuse r = refreshEqualsFresh(options(kPolicies, "16", prompt), options(kPolicies, "16", longer), 1e-5, "append");
    EXPECT_EQ(r.promptTokens, 40);
    EXPECT_EQ(r.runsKept, 0);
    EXPECT_EQ(r.runsShared, 5);
    EXPECT_EQ(r.runsReadPast, 3);
}

TEST(Refresh, AnEditInTheMiddleAndAShorterPromptKeepThePrefix) {
    const auto prompt = test::randomTokens(40, refreshModel()->config().vocabSize, 5);
    auto middle = prompt;
    middle[25] = (middle[25] + 1) % refreshModel()->config().vocabSize;
    EXPECT_EQ(refreshEqualsFresh(options(kPolicies, "16", prompt), options(kPolicies, "16", middle), 1e-5, "middle")
                  .promptTokens,
              25);
    const std::vector<int64_t> shorter(prompt.begin(), prompt.begin() + 30);
    EXPECT_EQ(refreshEqualsFresh(options(kPolicies, "16", prompt), options(kPolicies, "16", shorter), 1e-5, "shorter")
                  .promptTokens,
              29);  // the last token is read again: the logits after it
}

TEST(Refresh, ChainedRefreshesAndWhatCannotBeTakenOver) {
    // A refresh of a refresh.
    auto first = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    runAll(*first, kSteps);
    auto second = std::make_unique<Session>(refreshModel(), options(kPolicies, "12"), std::move(first));
    runAll(*second, kSteps);
    std::vector<std::string> edited = kPolicies;
    edited[1] = "h2o:recent=3";
    Session third(refreshModel(), options(edited, "12"), std::move(second));
    const auto got = runAll(third, kSteps);
    Session fresh(refreshModel(), options(edited, "12"));
    expectSameTraces(got, runAll(fresh, kSteps), kReread, "chained");
    EXPECT_EQ(third.reuse().runsKept, static_cast<int>(kPolicies.size()));

    // Another captured head, a Session that was not refreshable, one that never started: afresh.
    SessionOptions head = options(kPolicies, "16");
    head.attention.head = 2;
    auto previous = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    runAll(*previous, 1);
    EXPECT_EQ(Session(refreshModel(), head, std::move(previous)).reuse().text(), "computed afresh");
    SessionOptions plain = options(kPolicies, "16");
    plain.refreshable = false;
    previous = std::make_unique<Session>(refreshModel(), plain);
    runAll(*previous, 1);
    EXPECT_EQ(Session(refreshModel(), options(kPolicies, "16"), std::move(previous)).reuse().runsKept, 0);
    previous = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    EXPECT_EQ(Session(refreshModel(), options(kPolicies, "16"), std::move(previous)).reuse().runsKept, 0);
}


TEST(Refresh, ASupersededRefreshStaysWholeForTheNextEdit) {
    // The GUI raises the flag of a run as soon as a newer edit comes: a
    // refresh that kept the full cache still reads its prompt, stops at its
    // first step, and the next edit takes over from it.
    std::atomic<bool> cancel{false};
    std::unique_ptr<Session> first = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    runAll(*first, kSteps);
    std::unique_ptr<Session> second = std::make_unique<Session>(refreshModel(), options(kPolicies, "12"), std::move(first));
    second->setCancelFlag(&cancel);
    cancel = true;
    EXPECT_NO_THROW(second->start());
    EXPECT_THROW(second->step(), Cancelled);
    Session third(refreshModel(), options(kPolicies, "14"), std::move(second));
    EXPECT_EQ(third.reuse().runsKept, 1);  // the full cache, still whole
    const auto got = runAll(third, kSteps);
    Session fresh(refreshModel(), options(kPolicies, "14"));
    expectSameTraces(got, runAll(fresh, kSteps), kReread, "after a superseded refresh");
    // Superseded while it caught up after a parameter edit: the runs it had
    // kept are kept again (at the steps they had), the one it computed is not.
    first = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    runAll(*first, kSteps);
    std::vector<std::string> window = kPolicies, recent = kPolicies;
    window[3] = "snapkv:window=4";
    recent[1] = "h2o:recent=3";
    second = std::make_unique<Session>(refreshModel(), options(window, "16"), std::move(first));
    second->setCancelFlag(&cancel);
    second->start();
    EXPECT_THROW(second->step(), Cancelled);
    Session fourth(refreshModel(), options(recent, "16"), std::move(second));
    EXPECT_EQ(fourth.reuse().runsKept, 7);  // full, streaming, tova, pyramidkv, h2o every_step, knorm, lru
    EXPECT_EQ(fourth.reuse().steps, kSteps);
    Session fresh4(refreshModel(), options(recent, "16"));
    expectSameTraces(runAll(fourth, kSteps), runAll(fresh4, kSteps), kExact, "superseded while catching up");
    // A Session computing afresh stops at once.
    Session afresh(refreshModel(), options(kPolicies, "16"));
    afresh.setCancelFlag(&cancel);
    EXPECT_THROW(afresh.start(), Cancelled);
}

TEST(SharedRuns, TokenByTokenPromptReadsAreBatchedAndEqualRunsAlone) {
    // Strict every_step runs read the prompt together, one batched forward
    // per token (their batched prefixes differ with their budgets): each
    // equals its run alone, bit for bit.
    const std::vector<std::string> online{"h2o:schedule=every_step", "lru", "lfu", "tova:schedule=every_step",
                                          "h2o:schedule=every_step,alloc=pyramid"};
    SessionOptions together = options(online, "12");
    together.refreshable = false;
    Session all(refreshModel(), together);
    const auto got = runAll(all, kSteps);
    for (size_t p = 0; p < online.size(); ++p) {
        SessionOptions one = options({online[p]}, "12");
        one.refreshable = false;
        Session alone(refreshModel(), one);
        const auto want = runAll(alone, kSteps);
        std::vector<std::shared_ptr<const Trace>> picked;
        for (const auto& t : got) {
            auto copy = std::make_shared<Trace>(*t);
            copy->policies = {t->policies[0], t->policies[p + 1]};
            copy->attention = {t->attention[0], t->attention[p + 1]};
            picked.push_back(copy);
        }
        expectSameTraces(picked, want, kExact, online[p]);
    }
}

TEST(Refresh, AnAppendAfterAChainedRefresh) {
    // The full cache a refresh kept (with its decode steps) goes back to the prompt.
    auto first = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    runAll(*first, kSteps);
    auto second = std::make_unique<Session>(refreshModel(), options(kPolicies, "12"), std::move(first));
    runAll(*second, kSteps);
    auto prompt = options(kPolicies, "12").prompt;
    prompt.push_back(3);
    Session third(refreshModel(), options(kPolicies, "12", prompt), std::move(second));
    const auto got = runAll(third, kSteps);
    Session fresh(refreshModel(), options(kPolicies, "12", prompt));
    expectSameTraces(got, runAll(fresh, kSteps), 1e-5, "prefix after chain");
    EXPECT_EQ(third.reuse().promptTokens, 40);
}

// What the GUI shows while a prompt is read: every run the Session computes,
// from the tokens it starts with to the whole prompt; a refresh lists only
// the runs it computes again.
TEST(Refresh, ProgressOfThePromptReadPerRun) {
    std::vector<std::vector<RunProgress>> seen;
    std::mutex mutex;
    auto record = [&](const std::vector<RunProgress>& p) {
        std::lock_guard<std::mutex> lock(mutex);
        seen.push_back(p);
    };
    auto first = std::make_unique<Session>(refreshModel(), options(kPolicies, "16"));
    first->setProgressCallback(record);
    first->start();
    ASSERT_GE(seen.size(), 2u);
    ASSERT_EQ(seen.front().size(), kPolicies.size() + 1);
    EXPECT_EQ(seen.front()[0].label, "full");
    EXPECT_EQ(seen.front()[1].label, "streaming");
    for (const RunProgress& p : seen.front()) EXPECT_EQ(p.done, 0) << p.label;
    for (const RunProgress& p : seen.back()) EXPECT_EQ(p.done, p.total) << p.label;
    EXPECT_EQ(seen.back()[0].total, 40);
    for (size_t i = 1; i < seen.size(); ++i)
        for (size_t r = 0; r < seen[i].size(); ++r) EXPECT_GE(seen[i][r].done, seen[i - 1][r].done) << "progress went back";
    first->step();
    // A budget edit computes the policies again, not the full cache.
    seen.clear();
    Session second(refreshModel(), options(kPolicies, "12"), std::move(first));
    second.setProgressCallback(record);
    second.start();
    ASSERT_FALSE(seen.empty());
    ASSERT_EQ(seen.back().size(), kPolicies.size());
    EXPECT_EQ(seen.back()[0].label, "streaming");
    for (const RunProgress& p : seen.back()) EXPECT_EQ(p.done, 40) << p.label;
    second.step();  // the runs no longer count (their counters are gone)
}

// Planned steps (SessionOptions::plannedSteps, as the GUI and compare set
// them): the full cache runs up to 16 steps ahead alone and the policy runs
// read its tokens ahead in one forward (Session::Impl::readAhead). The
// Traces are those of the Session that steps every run in lockstep —
// within 1e-5 (the read-ahead forward's many rows go to the BLAS), the same
// tokens and kept sets — greedy and sampling, with runs that cannot read
// ahead (CAKE deciding across layers, a re-rotated cache) among them.
TEST(Refresh, PlannedStepsReadAheadWithTheSameTraces) {
    std::vector<std::string> policies = kPolicies;
    for (const char* p : {"cake", "streaming:rerotate=true", "h2o:schedule=every_n,n=3", "tova:select=threshold,threshold=0.05"})
        policies.push_back(p);
    for (bool greedy : {true, false}) {
        SessionOptions lockstep = options(policies, "16");
        lockstep.sampling.greedy = greedy;
        lockstep.sampling.seed = 11;
        SessionOptions planned = lockstep;
        planned.plannedSteps = 7;
        Session a(refreshModel(), lockstep), b(refreshModel(), planned);
        expectSameTraces(runAll(b, 7), runAll(a, 7), kReread, greedy ? "planned, greedy" : "planned, sampling");
    }
    // A continuation known in advance is read ahead too (the full cache with the runs).
    SessionOptions given = options(policies, "16");
    given.continuation = test::randomTokens(6, refreshModel()->config().vocabSize, 12);
    SessionOptions givenPlanned = given;
    givenPlanned.plannedSteps = 6;
    Session c(refreshModel(), given), d(refreshModel(), givenPlanned);
    expectSameTraces(runAll(d, 6), runAll(c, 6), kReread, "continuation");
    // An appended prompt with planned steps: the full cache reads the rest,
    // runs ahead and the followers read ahead while StreamingLLM reads.
    SessionOptions before = options(kPolicies, "16"), after = before;
    before.plannedSteps = after.plannedSteps = 6;
    for (int64_t t : test::randomTokens(5, refreshModel()->config().vocabSize, 13)) after.prompt.push_back(t);
    const Reuse r = refreshEqualsFresh(before, after, kReread, "append, planned", 6, 6);
    EXPECT_EQ(r.promptTokens, 40);
}

// A Session stopped before the steps its runs read ahead (the GUI's edit
// superseding it mid-way) is taken over at the step it presented: the full
// cache goes back to it, the runs that stand past it are computed again.
TEST(Refresh, ASessionStoppedBeforeTheStepsItReadAheadIsTakenOver) {
    for (const char* budget : {"16", "12"}) {
        SessionOptions before = options(kPolicies, "16");
        before.plannedSteps = 9;
        before.sampling.greedy = false;
        before.sampling.seed = 5;
        SessionOptions after = before;
        after.budget = parseBudget(budget);
        auto previous = std::make_unique<Session>(refreshModel(), before);
        runAll(*previous, 3);  // 9 planned, the runs read 9 ahead, 3 presented
        Session refreshed(refreshModel(), after, std::move(previous));
        const auto got = runAll(refreshed, 9);
        Session fresh(refreshModel(), after);
        expectSameTraces(got, runAll(fresh, 9), kReread, std::string("stopped early, budget ") + budget);
        EXPECT_EQ(refreshed.reuse().steps, 3);
        EXPECT_EQ(refreshed.reuse().runsKept, 1);  // the full cache, gone back to its third step
    }
}
