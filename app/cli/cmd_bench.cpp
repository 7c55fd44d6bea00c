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

#include <time.h>

#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/model/device_internal.h"
#include "core/model/model.h"
#include "core/run/policy_run.h"

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
};

struct Timing {
    double promptMs = 0, stepMs = 0;  // step: median over the measured steps
    double ratio = 0;                 // policy: median of (policy step / the full step beside it)
    double cpuRatio = 0;              // the same with process CPU time (robust on a busy machine at --threads 1)
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
    return {tf, tp};
}

void runBench(const BenchArgs& a) {
    if (a.context < 2) throw ArgumentError("--context must be ≥ 2");
    if (a.steps < 1) throw ArgumentError("--steps must be ≥ 1");
    auto model = Model::load(a.model.dir(), a.model.run);
    at::NoGradGuard noGrad;
    std::vector<PolicyConfig> policies = a.policy.configs();
    if (policies.empty())
        for (const auto& info : policyRegistry())
            if (info.id != "full") policies.push_back(parsePolicySpec(info.id));
    std::mt19937_64 rng(a.seed);
    std::uniform_int_distribution<int64_t> pick(0, model->config().vocabSize - 1);
    std::vector<int64_t> tokens(static_cast<size_t>(a.context + a.steps + 2));
    for (auto& t : tokens) t = pick(rng);

    std::vector<std::pair<std::string, BudgetSpec>> budgets{{"= context", parseBudget(std::to_string(a.context))}};
    if (!a.policy.budget.empty() || !a.policy.budgets.empty()) budgets.push_back({a.policy.budget.empty() ? a.policy.budgets : a.policy.budget, a.policy.budgetSpec()});

    nlohmann::json rows = nlohmann::json::array();
    if (!a.json)
        std::printf("model %s, %s, %d threads, context %lld, %lld timed steps (medians; ratio = median of paired step ratios)\n%-22s %-13s %-10s %10s %10s %9s %12s %12s %10s\n",
                    a.model.dir().c_str(), (model->device().str() + "/" + dtypeLabel(model->dtype())).c_str(),
                    at::get_num_threads(), static_cast<long long>(a.context), static_cast<long long>(a.steps),
                    "policy", "schedule", "budget", "full ms", "policy ms", "ratio", "prompt full", "prompt pol", "cpu ratio");
    for (const auto& cfg : policies)
        for (const auto& [label, spec] : budgets) {
            auto [tf, tp] = timePair(*model, cfg, spec, tokens, a.context, a.steps);
            const double ratio = tp.ratio;
            rows.push_back({{"policy", cfg.label()}, {"schedule", scheduleName(cfg.schedule)}, {"budget", label},
                            {"full_step_ms", tf.stepMs}, {"policy_step_ms", tp.stepMs}, {"step_ratio", ratio},
                            {"full_prompt_ms", tf.promptMs}, {"policy_prompt_ms", tp.promptMs}, {"cpu_step_ratio", tp.cpuRatio}});
            if (!a.json)
                std::printf("%-22s %-13s %-10s %10.3f %10.3f %8.3fx %10.1fms %10.1fms %9.3fx\n", cfg.label().substr(0, 22).c_str(),
                            scheduleName(cfg.schedule), label.c_str(), tf.stepMs, tp.stepMs, ratio, tf.promptMs,
                            tp.promptMs, tp.cpuRatio);
        }
    if (a.json)
        std::cout << nlohmann::json{{"context", a.context}, {"steps", a.steps}, {"threads", at::get_num_threads()},
                                    {"rows", rows}}.dump(2)
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
    cmd->add_option("--seed", args->seed, "seed of the random token sequence")->capture_default_str();
    cmd->add_flag("--json", args->json, "print JSON");
    cmd->callback([args] { runBench(*args); });
}

}  // namespace kvlens::cli
