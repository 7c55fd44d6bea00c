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
#include <cmath>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/host_paths.h"
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

// A random model of `family` in `dir` (attention sharpened: scale 2), loaded.
std::unique_ptr<Model> randomModel(Family family, uint64_t seed, const test::ScratchDir& dir, test::ModelOptions& o) {
    o.maxPositions = 256;
    o.scale = 2.0f;
    test::makeRandomModel(family, o, seed, dir.path());
    return Model::load(dir.path());
}

void sharedEqualsAlone(Family family, uint64_t seed) {
    test::ScratchDir dir("shared-run");
    test::ModelOptions o;
    const auto model = randomModel(family, seed, dir, o);
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

// Known decode tokens read ahead (PolicyRun::beginTokensAhead: one forward,
// each layer reading the rows in turn, the policy trimming that layer
// between them) give, step by step as stepAhead() presents them, what
// readToken() gives one token at a time: the same kept sets, Traces (status,
// score, rank, cutoff, held, budgets, bytes), held masks and captured
// attention rows, logits and latest outputs within 1e-5 — for every
// registered policy under every schedule, a threshold and a critical
// variant, with 1 to 3 runs sharing the forward.
namespace {

// On the device paths (the tensor code CUDA runs, core/host_paths.h) a
// step read ahead multiplies more rows at once than a step alone and
// rounds differently: scores, outputs and logits agree within 1e-4, and
// ranks of near-equal scores may swap.
double tolerance() { return hostPathsEnabled() ? 1e-5 : 1e-4; }

void expectSameLayers(const PolicyTrace& a, const PolicyTrace& b, const std::string& what) {
    ASSERT_EQ(a.layers.size(), b.layers.size()) << what;
    EXPECT_EQ(a.bytesHeld, b.bytesHeld) << what;
    EXPECT_EQ(a.bytesAllocated, b.bytesAllocated) << what;
    for (size_t l = 0; l < a.layers.size(); ++l) {
        const LayerTrace &x = a.layers[l], &y = b.layers[l];
        EXPECT_EQ(x.budget, y.budget) << what << " layer " << l;
        ASSERT_EQ(x.heads.size(), y.heads.size()) << what;
        for (size_t h = 0; h < x.heads.size(); ++h) {
            const HeadTrace &p = x.heads[h], &q = y.heads[h];
            const std::string where = what + " layer " + std::to_string(l) + " head " + std::to_string(h);
            EXPECT_EQ(p.status, q.status) << where;
            if (hostPathsEnabled()) EXPECT_EQ(p.rank, q.rank) << where;
            EXPECT_EQ(p.held, q.held) << where;
            ASSERT_EQ(p.score.size(), q.score.size()) << where;
            for (size_t i = 0; i < p.score.size(); ++i)
                if (std::isnan(p.score[i]) || std::isnan(q.score[i]))
                    EXPECT_EQ(std::isnan(p.score[i]), std::isnan(q.score[i])) << where << " position " << i;
                else
                    EXPECT_NEAR(p.score[i], q.score[i], tolerance() * std::max(1.0f, std::abs(q.score[i]))) << where;
            EXPECT_EQ(std::isnan(p.cutoff), std::isnan(q.cutoff)) << where;
        }
    }
}

void expectSameMaps(const AttentionMap& a, const AttentionMap& b, const std::string& what) {
    ASSERT_EQ(a.size, b.size) << what;
    for (int64_t q = 0; q < a.size; ++q)
        for (int64_t k = 0; k <= q; ++k) {
            const float x = a.at(q, k), y = b.at(q, k);
            if (std::isnan(x) || std::isnan(y)) EXPECT_EQ(std::isnan(x), std::isnan(y)) << what << " " << q << "," << k;
            else EXPECT_NEAR(x, y, tolerance()) << what << " " << q << "," << k;
        }
}

void readAheadEqualsStepByStep(Family family, uint64_t seed) {
    test::ScratchDir dir("read-ahead");
    test::ModelOptions o;
    const auto model = randomModel(family, seed, dir, o);
    const auto prompt = test::randomTokens(kPrompt, o.vocabSize, seed + 1);
    const auto tokens = test::randomTokens(kSteps + 1, o.vocabSize, seed + 2);
    const BudgetSpec budget = parseBudget("16");
    const CaptureTarget capture{true, 1, 3};
    std::vector<PolicyConfig> configs;
    for (const auto& info : policyRegistry()) {
        if (info.fullCache || info.sessionScored) continue;
        // CUR's leverage scores (an SVD of keys and values) sit within the
        // device paths' rounding of each other on this random model.
        if (info.id == "cur" && !hostPathsEnabled()) continue;
        for (const char* schedule : {"every_step", "prefill_once", "prefill_then_step", "every_n,n=3"}) {
            try {
                configs.push_back(parsePolicySpec(info.id + ":schedule=" + schedule));
            } catch (const ArgumentError&) {  // a schedule the policy refuses
            }
        }
    }
    configs.push_back(parsePolicySpec("snapkv:schedule=every_step,select=threshold,threshold=0.02"));
    configs.push_back(parsePolicySpec("h2o:critical=true"));
    int ahead = 0;
    // Runs in groups of up to 3 (each reading kSteps rows): the forward's
    // 18 rows stay within rowLinear's streamed kernel, as a step's do.
    for (size_t from = 0; from < configs.size(); from += 3) {
        const size_t to = std::min(configs.size(), from + 3);
        std::vector<std::unique_ptr<PolicyRun>> one, all;
        for (size_t i = from; i < to; ++i) {
            one.push_back(std::make_unique<PolicyRun>(*model, configs[i], budget, kPrompt, capture));
            all.push_back(std::make_unique<PolicyRun>(*model, configs[i], budget, kPrompt, capture));
            one.back()->readPrompt(prompt, {});
            all.back()->readPrompt(prompt, {});
        }
        std::vector<Model::Segment> segments;
        std::vector<size_t> reading;
        const std::vector<int64_t> known(tokens.begin(), tokens.begin() + kSteps);
        for (size_t i = 0; i < all.size(); ++i)
            if (all[i]->readsAhead()) {
                segments.push_back(all[i]->beginTokensAhead(known));
                reading.push_back(i);
            } else {
                // Only a policy still deciding across layers cannot.
                EXPECT_TRUE(configs[from + i].id == "cake" || configs[from + i].id == "duo") << configs[from + i].label();
            }
        if (!segments.empty()) {
            std::vector<ForwardResult> results = model->forward(segments);
            for (size_t j = 0; j < reading.size(); ++j) all[reading[j]]->endTokensAhead(std::move(results[j]));
        }
        for (int64_t s = 0; s <= kSteps; ++s) {
            for (size_t i = 0; i < all.size(); ++i) {
                const std::string what = configs[from + i].label() + " step " + std::to_string(s);
                one[i]->readToken(tokens[static_cast<size_t>(s)]);
                if (all[i]->hasStepsAhead()) {
                    EXPECT_LT(s, kSteps);
                    EXPECT_TRUE(all[i]->stepAhead());
                } else {
                    EXPECT_FALSE(all[i]->stepAhead());
                    all[i]->readToken(tokens[static_cast<size_t>(s)]);  // past the steps read ahead
                }
                const double scale = std::max(1.0, one[i]->logits().abs().max().item<double>());
                EXPECT_LE((all[i]->logits() - one[i]->logits()).abs().max().item<double>(), tolerance() * scale) << what;
                if (hostPathsEnabled())
                    EXPECT_EQ(all[i]->logits().argmax().item<int64_t>(), one[i]->logits().argmax().item<int64_t>()) << what;
                EXPECT_TRUE(at::equal(all[i]->heldMask(), one[i]->heldMask())) << what;
                PolicyTrace a, b;
                all[i]->fillTrace(a);
                one[i]->fillTrace(b);
                expectSameLayers(a, b, what);
                expectSameMaps(all[i]->attentionMap(), one[i]->attentionMap(), what);
                for (size_t l = 0; l < one[i]->lastOutputs().size(); ++l)
                    EXPECT_LE((all[i]->lastOutputs()[l] - one[i]->lastOutputs()[l]).abs().max().item<double>(),
                              tolerance() * std::max(1.0, one[i]->lastOutputs()[l].abs().max().item<double>()))
                        << what;
            }
        }
        ahead += static_cast<int>(reading.size());
    }
    EXPECT_GE(ahead, static_cast<int>(configs.size()) - 8);  // cake and duo under each schedule
}

}  // namespace

TEST(SharedRuns, StepsReadAheadEqualStepsTakenOneByOne) {
    readAheadEqualsStepByStep(Family::Llama, 81);
    readAheadEqualsStepByStep(Family::Qwen2, 82);
}
