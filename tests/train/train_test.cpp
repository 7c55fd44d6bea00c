// The trainer: gradients through Model::forward (and the KvCache it writes)
// match finite differences; a tiny model learns; an interrupted and resumed
// run reproduces an uninterrupted one exactly; the written directory loads
// with Model::load and gives the training-time logits.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/eval/corpus.h"
#include "core/eval/vocabulary.h"
#include "core/model/model.h"
#include "core/train/trainer.h"
#include "tests/support/scratch_dir.h"

namespace kvlens {
namespace {
namespace fs = std::filesystem;

// A training output folder, not created yet, in this process's scratch folder.
fs::path tmpDir(const std::string& name) {
    static const test::ScratchDir scratch("train");
    return scratch / name;
}

TrainOptions tinyOptions(const fs::path& out) {
    TrainOptions o;
    o.outDir = out;
    o.seed = 7;
    o.steps = 30;
    o.batch = 4;
    o.curriculum = "32:15,64";
    o.lr = 1e-2;
    o.minLr = 1e-3;
    o.warmupSteps = 5;
    o.checkpointEvery = 10;
    o.threads = 2;
    o.layers = 2;
    o.hidden = 32;
    o.heads = 4;
    o.kvHeads = 2;
    o.intermediate = 64;
    o.maxPositions = 128;
    return o;
}

at::Tensor logitsOf(const Model& model, const std::vector<int64_t>& tokens) {
    at::NoGradGuard noGrad;
    KvCache cache = model.newCache();
    return model.forward(tokens, cache).logits;
}

TEST(Train, CurriculumAndSchedule) {
    auto stages = parseCurriculum("256:400,512:800,1024");
    EXPECT_EQ(sequenceLength(stages, 0), 256);
    EXPECT_EQ(sequenceLength(stages, 399), 256);
    EXPECT_EQ(sequenceLength(stages, 400), 512);
    EXPECT_EQ(sequenceLength(stages, 5000), 1024);
    EXPECT_THROW(parseCurriculum("256:400,512:300"), ArgumentError);
    EXPECT_THROW(parseCurriculum("256,512:800"), ArgumentError);
    EXPECT_THROW(parseCurriculum("x:1"), ArgumentError);
    TrainOptions o;
    o.steps = 1000, o.warmupSteps = 100, o.lr = 1e-3, o.minLr = 1e-4;
    EXPECT_NEAR(learningRate(o, 0), 1e-5, 1e-12);
    EXPECT_NEAR(learningRate(o, 100), 1e-3, 1e-12);
    EXPECT_NEAR(learningRate(o, 999), 1e-4, 1e-8);
}

// Autograd through the inference forward, KvCache::append's copy_ included
// (k_proj and v_proj only reach the loss through the cache).
TEST(Train, GradientsMatchFiniteDifferences) {
    TrainOptions o = tinyOptions("");
    o.hidden = 16, o.intermediate = 32;
    TrainableModel m = initModel(trainConfig(o), 3);
    {
        at::NoGradGuard noGrad;  // larger weights than the init: gradients well above f32 noise
        for (auto& p : m.parameters)
            if (p.second.dim() == 2) p.second.mul_(10.0);
    }
    const TrainSequence seq = trainingSequence(o, 0, 0, 24);
    sequenceLoss(*m.model, seq).backward();
    auto lossAt = [&] {
        at::NoGradGuard noGrad;
        return sequenceLoss(*m.model, seq).item<double>();
    };
    const double h = 1e-2;
    for (auto& [name, p] : m.parameters) {
        at::Tensor g = p.grad();
        ASSERT_TRUE(g.defined()) << name;
        const int64_t i = g.abs().flatten().argmax().item<int64_t>();
        const double analytic = g.flatten()[i].item<double>();
        EXPECT_GT(std::abs(analytic), 1e-3) << name << ": no gradient reaches it";
        float* v = p.data_ptr<float>() + i;
        const float saved = *v;
        *v = saved + float(h);
        const double up = lossAt();
        *v = saved - float(h);
        const double down = lossAt();
        *v = saved;
        const double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(numeric, analytic, 0.05 * std::abs(analytic) + 3e-4) << name << " [" << i << "]";
    }
}

TEST(Train, LearnsResumesExactlyAndLoadsBack) {
    const fs::path dirA = tmpDir("train_a"), dirB = tmpDir("train_b");
    const TrainSequence probe = trainingSequence(tinyOptions(dirA), 999, 0, 64);
    at::Tensor trainedLogits;
    TrainResult a = train(tinyOptions(dirA), [&](const StepReport& s) {
        if (s.step == 30) trainedLogits = logitsOf(*s.model, probe.tokens);
        return true;
    });
    ASSERT_EQ(a.losses.size(), 30u);
    const double first = a.losses.front();
    const double last5 = std::accumulate(a.losses.end() - 5, a.losses.end(), 0.0) / 5;
    EXPECT_NEAR(first, std::log(320.0), 0.3);  // near-uniform at init
    EXPECT_LT(last5, first - 0.8) << "the loss did not drop";

    // Interrupted after step 15 (not a checkpoint step: stopping writes one), then resumed.
    TrainResult b1 = train(tinyOptions(dirB), [](const StepReport& s) { return s.step < 15; });
    EXPECT_EQ(b1.endStep, 15);
    TrainOptions resumed = tinyOptions(dirB);
    resumed.resume = true;
    TrainResult b2 = train(resumed);
    EXPECT_EQ(b2.startStep, 15);
    ASSERT_EQ(b2.losses.size(), 15u);
    for (size_t i = 0; i < 15; ++i) EXPECT_EQ(b2.losses[i], a.losses[15 + i]) << "step " << 16 + i;
    std::ifstream log(dirB / "train_log.csv");
    int lines = 0;
    for (std::string l; std::getline(log, l);) ++lines;
    EXPECT_EQ(lines, 31);  // header + one row per step, no duplicates

    // The model directory loads with the inference loader and agrees.
    auto loaded = Model::load(dirA);
    EXPECT_EQ(loaded->config().modelType, "llama");
    EXPECT_TRUE(loaded->tiedEmbeddings());
    EXPECT_EQ(loaded->config().numKvHeads, 2);
    ASSERT_TRUE(trainedLogits.defined());
    at::Tensor back = logitsOf(*loaded, probe.tokens);
    EXPECT_LT((back - trainedLogits).abs().max().item<double>(), 1e-5);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "checkpoint/optimizer.pt"})
        EXPECT_TRUE(fs::exists(dirA / f)) << f;

    // A changed trajectory option is refused on resume; a fresh run refuses a used directory.
    resumed.lr = 1e-3;
    EXPECT_THROW(train(resumed), ArgumentError);
    EXPECT_THROW(train(tinyOptions(dirA)), ArgumentError);
}

TEST(Train, Bf16ModelStaysClose) {
    const fs::path dir = tmpDir("train_bf16");
    TrainOptions o = tinyOptions(dir);
    TrainableModel m = initModel(trainConfig(o), 5);
    writeModelDir(m, dir, /*bf16=*/true);
    const TrainSequence seq = trainingSequence(o, 0, 0, 48);
    at::Tensor ref = logitsOf(*m.model, seq.tokens);
    at::Tensor got = logitsOf(*Model::load(dir), seq.tokens);
    EXPECT_LT((got - ref).abs().max().item<double>(), 2e-2);
    EXPECT_LT(fs::file_size(dir / "model.safetensors"), 4u * 1024 * 1024 / 2);
}

}  // namespace
}  // namespace kvlens

namespace kvlens {
namespace {

// initPositionalHeads: layer 0's first query heads attend to the token their
// offset back, whatever the tokens, over a long context; the other heads
// keep their random queries.
TEST(Train, PositionalHeadsAttendTheirOffsetBack) {
    TrainOptions o = tinyOptions("");
    o.hidden = 128, o.heads = 4, o.kvHeads = 1, o.intermediate = 256, o.maxPositions = 2048;
    TrainableModel m = initModel(trainConfig(o), 11);
    std::vector<int64_t> tokens;
    for (int64_t i = 0; i < 600; ++i) tokens.push_back(4 + (i * 7919 + i * i * 31) % 300);
    initPositionalHeads(m, parseOffsets("1,2,3"));
    at::NoGradGuard noGrad;
    KvCache cache = m.model->newCache();
    ForwardOptions fo;
    fo.captureAttention = true;
    fo.captureLayers = {0};
    const ForwardResult r = m.model->forward(tokens, cache, fo);
    const at::Tensor probs = r.attention[0];  // [Hq, n, n]
    for (int64_t h = 0; h < 3; ++h) {
        const int64_t offset = h + 1;
        double worst = 1.0;
        for (int64_t q = offset; q < int64_t(tokens.size()); ++q)
            worst = std::min(worst, probs[h][q][q - offset].item<double>());
        EXPECT_GT(worst, 0.9) << "head " << h << " (offset " << offset << ")";
    }
    // Head 3 keeps its random query: nothing pins it to one offset.
    EXPECT_LT(probs[3][500][499].item<double>(), 0.5);
    EXPECT_THROW(parseOffsets("1,0"), ArgumentError);
    EXPECT_THROW(parseOffsets("1,x"), ArgumentError);
    EXPECT_THROW(initPositionalHeads(m, {1, 2, 3, 4, 5}), ArgumentError);
}

}  // namespace
}  // namespace kvlens

namespace kvlens {
namespace {

// --mix overrides the corpus weights by name and names what it rejects;
// --answer-weight moves the loss toward the answer tokens only.
TEST(Train, CorpusMixAndAnswerWeight) {
    const eval::CorpusOptions base;
    const eval::CorpusOptions mixed = eval::applyCorpusMix(base, "query=8,filler=0.5,recent=0.9,digits-min=2,digits-max=3");
    EXPECT_EQ(mixed.codeDigitsMin, 2);
    EXPECT_EQ(mixed.codeDigitsMax, 3);
    EXPECT_EQ(mixed.factQueryWeight, 8.0);
    EXPECT_EQ(mixed.fillerWeight, 0.5);
    EXPECT_EQ(mixed.recentQueryProbability, 0.9);
    EXPECT_EQ(mixed.factWeight, base.factWeight);
    EXPECT_EQ(eval::applyCorpusMix(base, "").factQueryWeight, base.factQueryWeight);
    for (const char* bad : {"queries=2", "query", "query=x", "recent=1.5", "filler=-1", "query=2junk", "digits-min=0",
                            "digits-max=2.5", "digits-min=5,digits-max=3"}) {
        try {
            eval::applyCorpusMix(base, bad);
            ADD_FAILURE() << bad << " was accepted";
        } catch (const ArgumentError& e) {
            EXPECT_NE(std::string(e.what()).find("corpus"), std::string::npos) << e.what();
        }
    }

    TrainOptions o = tinyOptions("");
    o.mix = "fact=3,query=6,filler=1";
    o.needleFraction = 0;
    TrainableModel m = initModel(trainConfig(o), 4);
    TrainSequence seq = trainingSequence(o, 0, 0, 128);
    ASSERT_FALSE(seq.answerTargets.empty());
    at::NoGradGuard noGrad;
    const double plain = sequenceLoss(*m.model, seq).item<double>();
    seq.answerWeight = 5.0;
    AnswerHits hits;
    const double weighted = sequenceLoss(*m.model, seq, &hits).item<double>();
    EXPECT_NE(plain, weighted);
    // By hand: the weighted mean of the per-token losses.
    const std::vector<int64_t> inputs(seq.tokens.begin(), seq.tokens.end() - 1);
    KvCache cache = m.model->newCache();
    const at::Tensor logits = m.model->forward(inputs, cache).logits;
    const at::Tensor targets = at::tensor(std::vector<int64_t>(seq.tokens.begin() + 1, seq.tokens.end()));
    const at::Tensor perToken = at::cross_entropy_loss(logits, targets, {}, at::Reduction::None);
    at::Tensor w = at::ones_like(perToken);
    for (int64_t i : seq.answerTargets) w[i] = 5.0;
    EXPECT_NEAR(weighted, ((perToken * w).sum() / w.sum()).item<double>(), 1e-5);
    EXPECT_LE(hits.facts, int64_t(seq.factTargets.size()));
    EXPECT_LE(hits.answers, int64_t(seq.answerTargets.size()));

    // --needle-mix overrides the haystack-style documents the same way.
    TrainOptions needles = tinyOptions("");
    needles.needleFraction = 1;
    needles.needleMix = "facts-max=1,query=8";
    const TrainSequence ns = trainingSequence(needles, 0, 1, 512);
    std::set<std::vector<int64_t>> codes;
    const auto& vocab = eval::Vocabulary::bundled();
    for (size_t i = 0; i + 6 < ns.tokens.size(); ++i)
        if (ns.tokens[i] == *vocab.id("code") && ns.tokens[i + 1] == *vocab.id("for"))
            codes.insert({ns.tokens[i + 3], ns.tokens[i + 4]});
    EXPECT_EQ(codes.size(), 1u);
    EXPECT_FALSE(ns.factTargets.empty());

    TrainOptions badWeight = tinyOptions(tmpDir("bad_weight"));
    badWeight.answerWeight = 0;
    EXPECT_THROW(train(badWeight), ArgumentError);
    TrainOptions badMix = tinyOptions(tmpDir("bad_mix"));
    badMix.mix = "nope=1";
    EXPECT_THROW(train(badMix), ArgumentError);
    badMix.mix = "";
    badMix.needleMix = "facts-max=x";
    EXPECT_THROW(train(badMix), ArgumentError);
}

// --until stops a run partway through its schedule (the learning rates are
// those of the full --steps), checkpointing there; a resume can go on.
TEST(Train, UntilStopsMidScheduleAndResumes) {
    const fs::path dir = tmpDir("train_until"), whole = tmpDir("train_until_whole");
    TrainOptions o = tinyOptions(dir);
    o.steps = 20;
    o.until = 12;
    std::vector<double> lrs;
    const TrainResult r = train(o, [&](const StepReport& s) {
        lrs.push_back(s.lr);
        return true;
    });
    EXPECT_EQ(r.endStep, 12);
    ASSERT_EQ(lrs.size(), 12u);
    EXPECT_DOUBLE_EQ(lrs.back(), learningRate(o, 11));
    EXPECT_GT(lrs.back(), o.minLr * 1.5) << "the cosine was squeezed into --until";
    TrainOptions all = tinyOptions(whole);
    all.steps = 20;
    const TrainResult full = train(all);
    TrainOptions more = tinyOptions(dir);
    more.steps = 20;
    more.resume = true;  // until 0: on to --steps
    const TrainResult rest = train(more);
    EXPECT_EQ(rest.startStep, 12);
    ASSERT_EQ(rest.losses.size(), 8u);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(rest.losses[i], full.losses[12 + i]) << "step " << 13 + i;
    TrainOptions bad = tinyOptions(tmpDir("train_until_bad"));
    bad.until = 31;
    EXPECT_THROW(train(bad), ArgumentError);
}

// Hyper-parameters that are not numbers are refused, naming the option, and
// a loss that stops being a number stops the run without writing it into a
// checkpoint (a NaN learning rate saved a NaN model and exited 0; issue 50).
TEST(Train, NonFiniteHyperParametersAndLossesStopTheRun) {
    for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
        TrainOptions o = tinyOptions(tmpDir("train_nan_lr"));
        o.lr = bad;
        try {
            train(o);
            ADD_FAILURE() << "lr " << bad << " was accepted";
        } catch (const ArgumentError& e) {
            EXPECT_NE(std::string(e.what()).find("--lr is"), std::string::npos) << e.what();
        }
        o = tinyOptions(tmpDir("train_nan_clip"));
        o.gradClip = bad;
        EXPECT_THROW(train(o), ArgumentError);
    }
    TrainOptions o = tinyOptions(tmpDir("train_diverges"));
    o.lr = 1e30;
    o.minLr = 0;
    o.warmupSteps = 0;
    o.checkpointEvery = 1;
    int64_t reported = 0;
    try {
        train(o, [&](const StepReport& s) {
            EXPECT_TRUE(std::isfinite(s.loss)) << "a step with loss " << s.loss << " was reported";
            reported = s.step;
            return true;
        });
        ADD_FAILURE() << "a learning rate of 1e30 trained to the end";
    } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("stopped; the last checkpoint is kept"), std::string::npos) << e.what();
    }
    EXPECT_LT(reported, o.steps);
    // The checkpoint holds the last step whose weights were all numbers.
    const TrainableModel saved = loadTrainable(o.outDir / "checkpoint");
    for (const auto& [name, w] : saved.parameters)
        EXPECT_TRUE(w.isfinite().all().item<bool>()) << name << " holds a value that is not a number";
}

// --init-from starts a new run (step 0, fresh optimizer) from a finished
// run's exact f32 weights; another shape is refused, naming the option.
TEST(Train, InitFromContinuesFromAnotherRunsWeights) {
    const fs::path first = tmpDir("init_first"), second = tmpDir("init_second");
    TrainOptions a = tinyOptions(first);
    a.steps = 10;
    train(a);
    TrainOptions b = tinyOptions(second);
    b.steps = 1;
    b.lr = 1e-12, b.minLr = 0;  // one step that moves nothing measurable
    b.initFrom = first.string();
    b.mix = "facts-max=1";
    const TrainResult r = train(b);
    EXPECT_EQ(r.startStep, 0);
    const TrainSequence probe = trainingSequence(a, 500, 0, 48);
    auto before = Model::load(first / "checkpoint"), after = Model::load(second);
    EXPECT_LT((logitsOf(*before, probe.tokens) - logitsOf(*after, probe.tokens)).abs().max().item<double>(), 1e-4);
    TrainOptions loaded = loadTrainOptions(second);
    EXPECT_EQ(loaded.initFrom, first.string());
    EXPECT_EQ(loaded.mix, "facts-max=1");

    TrainOptions wrong = tinyOptions(tmpDir("init_wrong"));
    wrong.initFrom = first.string();
    wrong.hidden = 64;
    try {
        train(wrong);
        ADD_FAILURE() << "a different shape was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("--init-from"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kvlens
