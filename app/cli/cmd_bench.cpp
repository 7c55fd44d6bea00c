// kvlens-cli bench: what eviction costs. For each policy, a decode step at
// the same context as the full cache (budget = context, so every step
// appends one entry and evicts one) is timed against a full-cache step,
// interleaved in one run so that both see the same machine state; the
// ratio is the eviction overhead. With --budget, the policy also runs at
// that budget (where real compaction should make steps cheaper).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include <sys/resource.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/model/device_internal.h"
#include "core/model/model.h"
#include "core/model/config.h"
#include "core/run/policy_run.h"
#include "core/train/trainer.h"

namespace kvlens::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
    ModelArgs model;
    PolicyArgs policy;
    int64_t context = 512;
    int64_t steps = 64;
    uint64_t seed = 0;
    bool json = false;
    std::string synthetic;  // a named real shape with random weights
};

struct Timing {
    double promptMs = 0, stepMs = 0;  // step: median over the measured steps
    double ratio = 0;                 // policy: median of (policy step / the full step beside it)
    double cpuRatio = 0;              // the same with process CPU time (robust on a busy machine at --threads 1)
    double policyMs = 0;              // policy: mean time per step inside the policy (observe, plan, apply, record)
    double kvShare = 1;               // policy: KV bytes held / the full cache's, after the last step
};

// Wall and process CPU milliseconds of f().
struct Elapsed {
    double wall = 0, cpu = 0;
};
double cpuMs() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}
template <class F>
Elapsed timed(F&& f) {
    const auto t0 = Clock::now();
    const double c0 = cpuMs();
    f();
    return {std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), cpuMs() - c0};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Runs full and the policy side by side on the same tokens, alternating each step.
std::pair<Timing, Timing> timePair(const Model& model, const PolicyConfig& cfg, const BudgetSpec& budget,
                                   const std::vector<int64_t>& tokens, int64_t context, int64_t steps) {
    const std::vector<int64_t> prompt(tokens.begin(), tokens.begin() + context);
    PolicyRun full(model, parsePolicySpec("full"), BudgetSpec{}, context, CaptureTarget{});
    PolicyRun run(model, cfg, budget, context, CaptureTarget{});
    Timing tf, tp;
    tf.promptMs = timed([&] { full.readPrompt(prompt, {}); }).wall;
    tp.promptMs = timed([&] { run.readPrompt(prompt, {}); }).wall;
    const double policyAfterPrompt = run.policySeconds();
    std::vector<double> sf, sp, ratios, cpuRatios;
    const int64_t warmup = 2;
    for (int64_t s = 0; s < steps + warmup; ++s) {
        const int64_t tok = tokens[context + s];
        // Alternate which goes first so neither always runs on a warmer cache.
        Elapsed a, b;
        if (s % 2) {
            a = timed([&] { full.readToken(tok); });
            b = timed([&] { run.readToken(tok); });
        } else {
            b = timed([&] { run.readToken(tok); });
            a = timed([&] { full.readToken(tok); });
        }
        if (s >= warmup) {
            sf.push_back(a.wall);
            sp.push_back(b.wall);
            ratios.push_back(b.wall / a.wall);  // paired: both steps saw the same machine state
            cpuRatios.push_back(b.cpu / a.cpu);
        }
    }
    tf.stepMs = median(sf);
    tp.stepMs = median(sp);
    tp.ratio = median(ratios);
    tp.cpuRatio = median(cpuRatios);
    tp.policyMs = (run.policySeconds() - policyAfterPrompt) * 1e3 / static_cast<double>(steps + warmup);
    tp.kvShare = static_cast<double>(run.cache().bytesHeld()) / static_cast<double>(std::max<uint64_t>(1, full.cache().bytesHeld()));
    return {tf, tp};
}

// Real shapes with random weights (Llama layout, no biases), so that cost can
// be measured at the sizes users run without downloading anything.
struct SyntheticShape {
    const char* name;
    int64_t vocab, hidden, intermediate, layers, heads, kvHeads;
    double ropeTheta;
};
constexpr SyntheticShape kShapes[] = {
    {"smollm2-135m", 49152, 576, 1536, 30, 9, 3, 100000.0},
    {"qwen2.5-0.5b", 151936, 896, 4864, 24, 14, 2, 1000000.0},
    {"llama-3.2-1b", 128256, 2048, 8192, 16, 32, 8, 500000.0},
};

// The model a bench runs: a directory's, or a synthetic shape (whose
// tensors the TrainableModel holds).
struct BenchModel {
    TrainableModel synthetic;
    std::unique_ptr<Model> loaded;
    std::string name;
    const Model& get() const { return loaded ? *loaded : *synthetic.model; }
};

BenchModel benchModel(const BenchArgs& a) {
    BenchModel m;
    if (a.synthetic.empty()) {
        m.loaded = Model::load(a.model.dir(), a.model.run);
        m.name = a.model.dir().string();
        return m;
    }
    std::string known;
    for (const auto& s : kShapes) {
        known += std::string(known.empty() ? "" : ", ") + s.name;
        if (a.synthetic != s.name) continue;
        ModelConfig c;
        c.vocabSize = s.vocab;
        c.hiddenSize = s.hidden;
        c.intermediateSize = s.intermediate;
        c.numLayers = s.layers;
        c.numHeads = s.heads;
        c.numKvHeads = s.kvHeads;
        c.headDim = s.hidden / s.heads;
        c.maxPositions = 131072;
        c.ropeTheta = s.ropeTheta;
        if (a.model.run.threads > 0) at::set_num_threads(a.model.run.threads);
        m.synthetic = initModel(parseConfig(configJson(c, "float32"), s.name), a.seed);
        m.name = std::string("synthetic ") + s.name + " (random weights)";
        return m;
    }
    throw ArgumentError("--synthetic: unknown shape '" + a.synthetic + "' (" + known + ")");
}

long peakRssKiB() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;  // KiB on Linux
}

// The targets of SPEC.md "Performance" that one row can decide; empty when none applies.
std::string verdict(const PolicyConfig& cfg, bool atContext, const Timing& tf, const Timing& tp, int64_t generated) {
    if (atContext && cfg.schedule == Schedule::EveryStep)
        return tp.ratio <= 1.10 ? "PASS <= 1.10x" : "FAIL > 1.10x";
    if (atContext && cfg.schedule == Schedule::PrefillOnce) {
        // Amortised over `generated` tokens: the extra prompt work plus the extra per step.
        const double extra = (tp.promptMs - tf.promptMs) + generated * (tp.stepMs - tf.stepMs);
        const double base = tf.promptMs + generated * tf.stepMs;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s %+.1f%% /%lld", extra / base <= 0.02 ? "PASS" : "FAIL", 100 * extra / base,
                      static_cast<long long>(generated));
        return buf;
    }
    if (!atContext) {
        const bool faster = tp.ratio < 1.0, small = tp.kvShare <= 0.27;
        return std::string(faster && small ? "PASS" : "FAIL") + (faster ? " faster" : " slower") + (small ? "" : ", KV > 27%");
    }
    return "";
}

void runBench(const BenchArgs& a) {
    if (a.context < 2) throw ArgumentError("--context must be ≥ 2");
    if (a.steps < 1) throw ArgumentError("--steps must be ≥ 1");
    at::NoGradGuard noGrad;
    const BenchModel bm = benchModel(a);
    const Model& model = bm.get();
    std::vector<PolicyConfig> policies = a.policy.configs();
    if (policies.empty())
        for (const auto& info : policyRegistry())
            if (info.id != "full") policies.push_back(parsePolicySpec(info.id));
    std::mt19937_64 rng(a.seed);
    std::uniform_int_distribution<int64_t> pick(0, model.config().vocabSize - 1);
    std::vector<int64_t> tokens(static_cast<size_t>(a.context + a.steps + 2));
    for (auto& t : tokens) t = pick(rng);

    std::vector<std::pair<std::string, BudgetSpec>> budgets{{"= context", parseBudget(std::to_string(a.context))}};
    if (!a.policy.budget.empty() || !a.policy.budgets.empty()) budgets.push_back({a.policy.budget.empty() ? a.policy.budgets : a.policy.budget, a.policy.budgetSpec()});

    nlohmann::json rows = nlohmann::json::array();
    if (!a.json)
        std::printf("model %s, %s, %d threads, context %lld, %lld timed steps (medians; ratio = median of paired step ratios)\n"
                    "%-22s %-13s %-10s %9s %9s %8s %8s %11s %11s %9s %6s  %s\n",
                    bm.name.c_str(), (model.device().str() + "/" + dtypeLabel(model.dtype())).c_str(), at::get_num_threads(),
                    static_cast<long long>(a.context), static_cast<long long>(a.steps), "policy", "schedule", "budget",
                    "full ms", "pol ms", "ratio", "in pol", "prompt full", "prompt pol", "cpu ratio", "KV", "target");
    for (const auto& cfg : policies)
        for (const auto& [label, spec] : budgets) {
            auto [tf, tp] = timePair(model, cfg, spec, tokens, a.context, a.steps);
            const std::string target = verdict(cfg, label == "= context", tf, tp, 256);
            rows.push_back({{"policy", cfg.label()}, {"schedule", scheduleName(cfg.schedule)}, {"budget", label},
                            {"full_step_ms", tf.stepMs}, {"policy_step_ms", tp.stepMs}, {"step_ratio", tp.ratio},
                            {"policy_ms_per_step", tp.policyMs}, {"full_prompt_ms", tf.promptMs},
                            {"policy_prompt_ms", tp.promptMs}, {"cpu_step_ratio", tp.cpuRatio},
                            {"kv_bytes_share", tp.kvShare}, {"target", target}});
            if (!a.json)
                std::printf("%-22s %-13s %-10s %9.3f %9.3f %7.3fx %8.3f %9.1fms %9.1fms %8.3fx %5.0f%%  %s\n",
                            cfg.label().substr(0, 22).c_str(), scheduleName(cfg.schedule), label.c_str(), tf.stepMs,
                            tp.stepMs, tp.ratio, tp.policyMs, tf.promptMs, tp.promptMs, tp.cpuRatio, 100 * tp.kvShare,
                            target.c_str());
        }
    if (!a.json) std::printf("peak RSS %.1f MiB\n", static_cast<double>(peakRssKiB()) / 1024.0);
    if (a.json)
        std::cout << nlohmann::json{{"model", bm.name}, {"context", a.context}, {"steps", a.steps},
                                    {"threads", at::get_num_threads()}, {"peak_rss_kib", peakRssKiB()}, {"rows", rows}}
                         .dump(2)
                  << "\n";
}

}  // namespace

void addBenchCommand(CLI::App& app) {
    auto args = std::make_shared<BenchArgs>();
    auto* cmd = app.add_subcommand("bench", "time eviction overhead: policy decode steps vs full-cache steps");
    args->model.add(*cmd);
    args->policy.add(*cmd, /*repeatable=*/true);
    cmd->add_option("--context", args->context, "tokens in the cache when steps are timed")->capture_default_str();
    cmd->add_option("--steps", args->steps, "timed decode steps per policy")->capture_default_str();
    cmd->add_option("--seed", args->seed, "seed of the random token sequence (and of --synthetic weights)")->capture_default_str();
    cmd->add_option("--synthetic", args->synthetic, "a real shape with random weights instead of --model: smollm2-135m, qwen2.5-0.5b, llama-3.2-1b");
    cmd->add_flag("--json", args->json, "print JSON");
    cmd->callback([args] { runBench(*args); });
}

}  // namespace kvlens::cli
