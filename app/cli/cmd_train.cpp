// kvlens-cli train: train the bundled model kvlens-tiny from scratch (CPU,
// LibTorch autograd) on the synthetic corpus, checkpointing as it goes.
#include <cstdio>
#include <functional>
#include <memory>
#include <type_traits>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/train/trainer.h"

namespace kvlens::cli {
namespace {

struct TrainArgs {
    TrainOptions o;
    std::string out, saveDtype = "auto";
    // Each flag with how to copy its value: on --resume the checkpoint's
    // options are the base and only the flags given on the command line apply.
    std::vector<std::pair<CLI::Option*, std::function<void(TrainOptions&, const TrainOptions&)>>> flags;

    template <class T>
    void add(CLI::App& cmd, T TrainOptions::*field, const std::string& name, const std::string& help) {
        CLI::Option* opt = cmd.add_option(name, o.*field, help)->capture_default_str();
        if constexpr (std::is_same_v<T, double>) opt->check(finiteReal());
        if constexpr (std::is_same_v<T, int64_t>) opt->check(wholeNumber(0, 1000000000));
        flags.push_back({opt, [field](TrainOptions& dst, const TrainOptions& src) { dst.*field = src.*field; }});
    }
};

SaveDtype parseSaveDtype(const std::string& s) {
    if (s == "auto") return SaveDtype::Auto;
    if (s == "f32") return SaveDtype::F32;
    if (s == "bf16") return SaveDtype::BF16;
    throw ArgumentError("--save-dtype must be auto, f32 or bf16 (got '" + s + "')");
}

void runTrain(TrainArgs& a, CLI::Option* saveDtypeFlag) {
    OutputGuard guard;
    if (!a.o.initFrom.empty()) guard.inputFolder(a.o.initFrom);
    guard.output(a.out, "--out");
    a.o.outDir = a.out;
    a.o.saveDtype = parseSaveDtype(a.saveDtype);
    TrainOptions o = a.o;
    if (a.o.resume) {
        o = loadTrainOptions(a.out);
        for (const auto& [flag, copy] : a.flags)
            if (flag->count() > 0) copy(o, a.o);
        if (saveDtypeFlag->count() > 0) o.saveDtype = a.o.saveDtype;
        o.resume = true;
    }
    bool first = true;
    TrainResult r = train(o, [&](const StepReport& s) {
        if (first) {
            std::printf("training %lld parameters into %s (seed %llu, batch %lld, curriculum %s)\n",
                        static_cast<long long>(s.model->parameterCount()), o.outDir.string().c_str(),
                        static_cast<unsigned long long>(o.seed), static_cast<long long>(o.batch), o.curriculum.c_str());
            first = false;
        }
        std::printf("step %lld/%lld  len %lld  lr %.2e  loss %.4f  fact_acc %.3f  answer_acc %.3f  %.2f s/step  %.0f tok/s%s\n",
                    static_cast<long long>(s.step), static_cast<long long>(s.steps), static_cast<long long>(s.seqLen),
                    s.lr, s.loss, s.factAccuracy, s.answerAccuracy, s.seconds, s.tokensPerSecond, s.checkpointed ? "  [checkpoint]" : "");
        std::fflush(stdout);
        return true;
    });
    std::printf("done: steps %lld..%lld, model in %s\n", static_cast<long long>(r.startStep),
                static_cast<long long>(r.endStep), o.outDir.string().c_str());
}

}  // namespace

void addTrainCommand(CLI::App& app) {
    auto a = std::make_shared<TrainArgs>();
    auto* cmd = app.add_subcommand("train", "train the bundled model (kvlens-tiny) on the synthetic corpus, on the CPU");
    cmd->add_option("--out", a->out, "output model directory (checkpoint/ and train_log.csv go inside)")->required();
    cmd->add_flag("--resume", a->o.resume,
                  "continue from the checkpoint in --out with its options; only --steps, --until, --threads, "
                  "--checkpoint-every (and --save-dtype) may change");
    a->add(*cmd, &TrainOptions::seed, "--seed", "seed of the initial weights and of every batch");
    a->add(*cmd, &TrainOptions::steps, "--steps", "optimizer steps in all");
    a->add(*cmd, &TrainOptions::until, "--until",
           "stop after this step although the schedule spans --steps (0: run to --steps)");
    a->add(*cmd, &TrainOptions::batch, "--batch", "sequences per step");
    a->add(*cmd, &TrainOptions::curriculum, "--curriculum", "sequence lengths: LEN:UNTIL_STEP,...,LEN");
    a->add(*cmd, &TrainOptions::lr, "--lr", "peak learning rate");
    a->add(*cmd, &TrainOptions::minLr, "--min-lr", "learning rate at the end of the cosine decay");
    a->add(*cmd, &TrainOptions::warmupSteps, "--warmup", "linear warmup steps");
    a->add(*cmd, &TrainOptions::weightDecay, "--weight-decay", "AdamW weight decay (matrices only)");
    a->add(*cmd, &TrainOptions::gradClip, "--grad-clip", "max global gradient norm");
    a->add(*cmd, &TrainOptions::needleFraction, "--needle-fraction", "share of haystack-style documents");
    a->add(*cmd, &TrainOptions::mix, "--mix",
           "corpus mix of the default documents, key=value,...: weights fact, query, entity, entity-query, filler, "
           "list, repeat; probabilities restate, recent, reverse; code lengths digits-min, digits-max; facts-max (codes per "
           "document, 0: no limit)");
    a->add(*cmd, &TrainOptions::needleMix, "--needle-mix",
           "the same overrides for the haystack-style documents (e.g. facts-max=1)");
    a->add(*cmd, &TrainOptions::initFrom, "--init-from",
           "start from this model directory's weights (same shape; fresh optimizer and schedule): a recipe's next phase");
    a->add(*cmd, &TrainOptions::answerWeight, "--answer-weight", "loss weight of answer tokens (facts, entities, copies)");
    a->add(*cmd, &TrainOptions::positionalHeads, "--positional-heads",
           "offsets, e.g. 1,2,3: layer 0's first query heads start as heads attending that many tokens back");
    a->add(*cmd, &TrainOptions::checkpointEvery, "--checkpoint-every", "steps between checkpoints");
    a->add(*cmd, &TrainOptions::threads, "--threads", "CPU threads (0: LibTorch's default)");
    auto* dtype = cmd->add_option("--save-dtype", a->saveDtype,
                                  "model.safetensors dtype: auto (f32 if <= 8 MB, else bf16), f32, bf16")
                      ->capture_default_str();
    a->add(*cmd, &TrainOptions::layers, "--layers", "transformer layers");
    a->add(*cmd, &TrainOptions::hidden, "--hidden", "hidden size");
    a->add(*cmd, &TrainOptions::heads, "--heads", "query heads");
    a->add(*cmd, &TrainOptions::kvHeads, "--kv-heads", "key/value heads (GQA)");
    a->add(*cmd, &TrainOptions::intermediate, "--intermediate", "MLP size");
    a->add(*cmd, &TrainOptions::maxPositions, "--max-positions", "context the model is declared for");
    a->add(*cmd, &TrainOptions::ropeTheta, "--rope-theta", "RoPE base");
    cmd->callback([a, dtype] { runTrain(*a, dtype); });
}

}  // namespace kvlens::cli
