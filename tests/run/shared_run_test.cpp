// Issue 17's reshaped lockstep against the engine it replaces: a shared
// prefill (the full run reads the prompt once; every run that reads it with
// full attention follows that forward into its own cache, or replays its
// record later — each layer's queries, keys and values — and compresses)
// and a batched decode step
// (one forward over every run's token) give what each run reading alone
// gives — the same kept sets, logits within 1e-5 relative, the same greedy
// choices — for every registered policy under each schedule that shares,
// on a Llama-family and a Qwen2 model (GQA, biases).
#include <ATen/ATen.h>

#include <algorithm>
#include <gtest/gtest.h>

#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/policy_run.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

constexpr int64_t kPrompt = 48, kSteps = 6;

std::vector<std::vector<TokenStatus>> statuses(const PolicyRun& run) {
    PolicyTrace t;
    run.fillTrace(t);
    std::vector<std::vector<TokenStatus>> out;
    for (const auto& l : t.layers)
        for (const auto& h : l.heads) out.push_back(h.status);
    return out;
}

void expectClose(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
    const double scale = std::max(1.0, b.abs().max().item<double>());
    EXPECT_LE((a - b).abs().max().item<double>(), 1e-5 * scale) << what;
    EXPECT_EQ(a.argmax().item<int64_t>(), b.argmax().item<int64_t>()) << what;
}

void sharedEqualsAlone(Family family, uint64_t seed) {
    test::ScratchDir dir("shared-run");
    test::ModelOptions o;
    o.maxPositions = 256;
    o.scale = 2.0f;
    test::makeRandomModel(family, o, seed, dir.path());
    const auto model = Model::load(dir.path());
    const auto prompt = test::randomTokens(kPrompt, o.vocabSize, seed + 1);
    const BudgetSpec budget = parseBudget("16");
    std::vector<PolicyConfig> configs;
    for (const auto& info : policyRegistry()) {
        if (info.fullCache || info.sessionScored) continue;  // scored by a Session (the oracle, KVzip)
        for (const char* schedule : {"prefill_once", "prefill_then_step"})
            configs.push_back(parsePolicySpec(info.id + ":schedule=" + schedule));
    }
    // Together: the full run leads, every policy follows; decode steps batched.
    PolicyRun full(*model, parsePolicySpec("full"), budget, kPrompt, CaptureTarget{});
    std::vector<std::unique_ptr<PolicyRun>> shared, alone;
    std::vector<PolicyRun*> followers;
    for (const auto& c : configs) {
        shared.push_back(std::make_unique<PolicyRun>(*model, c, budget, kPrompt, CaptureTarget{}));
        alone.push_back(std::make_unique<PolicyRun>(*model, c, budget, kPrompt, CaptureTarget{}));
        ASSERT_TRUE(shared.back()->sharesPrefill()) << c.label();
        followers.push_back(shared.back().get());
    }
    PromptRecord record;
    full.readPromptShared(prompt, followers, &record, {});
    for (auto& r : shared) r->finishSharedPrompt(record.logits);
    for (auto& r : alone) r->readPrompt(prompt, {});
    for (size_t i = 0; i < configs.size(); ++i) {
        EXPECT_TRUE(at::equal(shared[i]->logits(), alone[i]->logits())) << configs[i].label();
        EXPECT_EQ(statuses(*shared[i]), statuses(*alone[i])) << configs[i].label() << " after the prompt";
        // The record replayed later (an edited policy's refresh) gives the same.
        PolicyRun late(*model, configs[i], budget, kPrompt, CaptureTarget{});
        PolicyRun::replayRecord(*model, record, {&late});
        late.finishSharedPrompt(record.logits);
        EXPECT_TRUE(at::equal(late.logits(), alone[i]->logits())) << configs[i].label();
        EXPECT_EQ(statuses(late), statuses(*alone[i])) << configs[i].label() << " replayed later";
    }
    // Decode steps in batches of up to 8 rows (the full run's and 7
    // policies' first, then 8 policies at a time), the rows rowLinear's
    // streamed kernel serves (a Session of full + up to 7 policies). A
    // larger batch goes to the BLAS, whose blocking rounds differently: with
    // all 33 rows in one batch (16 policies) knorm's logits moved 1.2e-5 relative.
    constexpr size_t kRows = 8;
    for (int64_t s = 0; s < kSteps; ++s) {
        const int64_t next = full.logits().argmax().item<int64_t>();
        for (size_t from = 0; from < configs.size() + 1; from += kRows) {
            std::vector<Model::Segment> segments;
            const size_t to = std::min(configs.size() + 1, from + kRows);
            for (size_t row = from; row < to; ++row)
                segments.push_back(row == 0 ? full.beginToken(next) : shared[row - 1]->beginToken(next));
            std::vector<ForwardResult> results = model->forward(segments);
            for (size_t row = from; row < to; ++row)
                if (row == 0)
                    full.endToken(std::move(results[0]));
                else
                    shared[row - 1]->endToken(std::move(results[row - from]));
        }
        for (size_t i = 0; i < configs.size(); ++i) {
            alone[i]->readToken(next);
            expectClose(shared[i]->logits(), alone[i]->logits(), configs[i].label() + " step " + std::to_string(s));
            EXPECT_EQ(statuses(*shared[i]), statuses(*alone[i])) << configs[i].label() << " step " << s;
        }
    }
}

}  // namespace

TEST(SharedRuns, SharedPrefillAndBatchedStepsEqualRunsAlone) {
    sharedEqualsAlone(Family::Llama, 71);
    sharedEqualsAlone(Family::Qwen2, 72);
}
