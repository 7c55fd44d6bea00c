// kvlens-cli bench: prints what core/bench measures. For each policy, a decode step at
// the same context as the full cache (budget = context, so every step
// appends one entry and evicts one) is timed against a full-cache step,
// interleaved in one run so that both see the same machine state; the
// ratio is the eviction overhead. A prefill_once policy evicts nothing at
// budget = context, so its overhead row runs at 50 % and its verdict is the
// work it did on the prompt (timed inside the policy) amortised over 256
// generated tokens. With --budget, the policy also runs at that budget
// (where real compaction should make steps cheaper).
// --quick runs SPEC's whole target table in about a minute: the engine
// against a C reference built like run.c's runomp at 1 and 2 threads, every
// policy's overhead near the bundled model's full context (the per-step
// ratios judged on SmolLM2-135M's shape, where a step is real work), 25 %
// budgets at 8192 tokens on a synthetic shape of the same size, and the
// interactive refresh (full + 5 policies, 512 tokens).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/bench/bench.h"
#include "core/error.h"
#include "core/model/device_internal.h"
#include "core/model/device_stats.h"
#include "core/model/model.h"

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
    bool quick = false;
    bool reference = false;
    std::string synthetic;  // a named real shape with random weights
};

// "device memory: 812.4 MiB allocated, 1024.0 MiB reserved, peak 990.1 MiB", or "" off CUDA.
std::string deviceMemoryLine(const c10::Device& device) {
    const DeviceMemory m = deviceMemory(device);
    if (!device.is_cuda()) return "";
    if (!m.available) return "device memory: not read (this build has no CUDA allocator statistics)";
    char buf[160];
    std::snprintf(buf, sizeof buf, "device memory: %.1f MiB allocated, %.1f MiB reserved, peak %.1f MiB",
                  static_cast<double>(m.allocated) / 1048576.0, static_cast<double>(m.reserved) / 1048576.0,
                  static_cast<double>(m.peakAllocated) / 1048576.0);
    return buf;
}

nlohmann::json deviceMemoryJson(const c10::Device& device) {
    const DeviceMemory m = deviceMemory(device);
    if (!m.available) return nullptr;
    return {{"allocated", m.allocated}, {"reserved", m.reserved}, {"peak_allocated", m.peakAllocated}};
}

void printHeader(const std::string& model, const Model& m, int64_t context, int64_t steps) {
    std::printf("model %s, %s, %d threads, context %lld, %lld timed steps (medians; ratio = median of paired step "
                "ratios, quartiles beside it)\n"
                "%-22s %-13s %-10s %9s %9s %8s %-11s %8s %11s %11s %9s %6s  %s\n",
                model.c_str(), (m.device().str() + "/" + dtypeLabel(m.dtype())).c_str(), at::get_num_threads(),
                static_cast<long long>(context), static_cast<long long>(steps), "policy", "schedule", "budget",
                "full ms", "pol ms", "ratio", "quartiles", "in pol", "prompt full", "prompt pol", "cpu ratio", "KV", "target");
}

// Prints (unless JSON) and collects the rows of policy × budget; returns
// how many carry a FAIL verdict.
int benchRows(const Model& model, const std::vector<PolicyConfig>& policies, const std::vector<bench::BudgetCase>& budgets,
              const std::vector<int64_t>& tokens, int64_t context, int64_t steps, bool print, nlohmann::json& json,
              bool judgeSteps) {
    auto printRow = [&](const bench::PolicyRow& r) {
        if (!print) return;
        const bench::StepTiming &tf = r.full, &tp = r.timed;
        std::printf("%-22s %-13s %-10s %9.3f %9.3f %7.3fx %5.3f-%5.3f %8.3f %9.1fms %9.1fms %8.3fx %5.0f%%  %s\n",
                    r.policy.substr(0, 22).c_str(), r.schedule.c_str(), r.budget.c_str(), tf.stepMs, tp.stepMs, tp.ratio,
                    tp.ratioLow, tp.ratioHigh, tp.policyMs, tf.promptMs, tp.promptMs, tp.cpuRatio, 100 * tp.kvShare,
                    r.target.c_str());
        std::fflush(stdout);
    };
    const auto rows = bench::policyRows(model, policies, budgets, tokens, context, steps, printRow, 256, judgeSteps);
    int failures = 0;
    std::vector<double> prefillTokS, decodeTokS;  // the full cache's, one pair per row
    for (const auto& r : rows) {
        const bench::StepTiming &tf = r.full, &tp = r.timed;
        failures += r.failed;
        prefillTokS.push_back(1e3 * static_cast<double>(context) / tf.promptMs);
        decodeTokS.push_back(1e3 / tf.stepMs);
        json.push_back({{"policy", r.policy}, {"schedule", r.schedule}, {"budget", r.budget},
                        {"context", context}, {"full_prefill_tok_s", prefillTokS.back()},
                        {"full_decode_tok_s", decodeTokS.back()}, {"full_step_ms", tf.stepMs},
                        {"policy_step_ms", tp.stepMs},
                        {"step_ratio", tp.ratio}, {"step_ratio_q1", tp.ratioLow}, {"step_ratio_q3", tp.ratioHigh},
                        {"policy_ms_per_step", tp.policyMs},
                        {"full_prompt_ms", tf.promptMs}, {"policy_prompt_ms", tp.promptMs},
                        {"policy_prompt_work_ms", tp.promptPolicyMs},
                        {"cpu_step_ratio", tp.cpuRatio}, {"kv_bytes_share", tp.kvShare}, {"target", r.target}});
    }
    if (print && !prefillTokS.empty())
        std::printf("full cache (median over the rows): prefill %.0f tokens/s (%lld tokens), decode %.0f tokens/s at "
                    "%lld tokens\n",
                    bench::median(prefillTokS), static_cast<long long>(context), bench::median(decodeTokS),
                    static_cast<long long>(context));
    return failures;
}

// Whether the per-step ratios are judged: not on the bundled model or its
// shape, where a decode step is per-op overhead (bench::policyRows).
bool judgesSteps(const BenchArgs& a) {
    return a.synthetic.empty() ? !a.model.model.empty() : a.synthetic != "kvlens-tiny";
}

bench::BenchModel benchModel(const BenchArgs& a) {
    if (!a.synthetic.empty()) return bench::BenchModel::synthetic(a.synthetic, a.seed, a.model.run);
    return bench::BenchModel::load(a.model.dir(), a.model.run);
}

void runBench(const BenchArgs& a) {
    if (a.context < 2) throw ArgumentError("--context must be ≥ 2");
    if (a.steps < 1) throw ArgumentError("--steps must be ≥ 1");
    c10::InferenceMode inference;
    const bench::BenchModel bm = benchModel(a);
    const Model& model = bm.get();
    resetPeakDeviceMemory(model.device());
    std::vector<PolicyConfig> policies = a.policy.configs();
    if (policies.empty())
        for (const auto& info : policyRegistry())
            if (!info.fullCache && !info.sessionScored) policies.push_back(parsePolicySpec(info.id));
    const std::vector<int64_t> tokens = bench::randomTokens(model, a.seed, a.context + a.steps + 2);
    std::vector<bench::BudgetCase> budgets{bench::atContext(a.context)};
    if (!a.policy.budget.empty() || !a.policy.budgets.empty()) budgets.push_back({a.policy.budget.empty() ? a.policy.budgets : a.policy.budget, a.policy.budgetSpec()});

    nlohmann::json rows = nlohmann::json::array();
    if (!a.json) printHeader(bm.name(), model, a.context, a.steps);
    benchRows(model, policies, budgets, tokens, a.context, a.steps, !a.json, rows, judgesSteps(a));
    const std::string deviceLine = deviceMemoryLine(model.device());
    if (!a.json) std::printf("peak RSS %.1f MiB%s%s\n", static_cast<double>(bench::peakRssKiB()) / 1024.0,
                             deviceLine.empty() ? "" : "; ", deviceLine.c_str());
    if (a.json)
        std::cout << nlohmann::json{{"model", bm.name()},
                                    {"device", model.device().str() + "/" + dtypeLabel(model.dtype())},
                                    {"context", a.context},
                                    {"steps", a.steps},
                                    {"threads", at::get_num_threads()},
                                    {"peak_rss_kib", bench::peakRssKiB()},
                                    {"device_memory", deviceMemoryJson(model.device())},
                                    {"rows", rows}}
                         .dump(2)
                  << "\n";
}

// SPEC "Performance" as one report: each target with its measured value and
// PASS/FAIL. Exit status 0 either way (a measurement, not a test).
class QuickReport {
public:
    explicit QuickReport(bool print) : print(print) {}
    // "PASS" or "FAIL", counting the failures.
    const char* verdict(bool ok) {
        failures += !ok;
        return ok ? "PASS" : "FAIL";
    }
    // printf when printing (not --json).
    template <typename... A>
    void line(const char* format, A... args) const {
        if (print) std::printf(format, args...);
    }
    const bool print;
    nlohmann::json out;
    int failures = 0;
};

// The engine's decode against the C reference built like run.c's `runomp`,
// at 1 and 2 threads: ≥ 1.0x at each where `targeted`. SPEC sets the target
// at the sizes users run; on the bundled 0.63 M-parameter model a step is
// ATen's per-op overhead, and the race is only reported.
void referenceSection(QuickReport& q, const bench::BenchModel& bm, const std::vector<int64_t>& tokens, int64_t n,
                      bool targeted, const char* key) {
    nlohmann::json races = nlohmann::json::array();
    q.line("\n%s decode vs the C reference (run.c's runomp build: -Ofast -fopenmp, vectorised for this CPU), "
           "%lld tokens from position 0, 3 rounds in turn:\n",
           bm.name().c_str(), static_cast<long long>(n - 1));
    for (int threads : {1, 2}) {
        const bench::ReferenceRace r = bench::raceReference(bm, tokens, n, threads, 3);
        if (!r.ran) {
            q.line("  not run (%s)\n", r.why.c_str());
            return;
        }
        const std::string verdict = targeted ? std::string(q.verdict(r.ratio >= 1.0)) + " >= 1.0x"
                                             : "(reported: the target is for SmolLM2's size)";
        q.line("  %d thread%s: engine %.1f tok/s, reference %.1f tok/s: %.2fx (rounds %.2f-%.2f)  %s  "
               "(max logit difference %.2g)\n",
               threads, threads == 1 ? "" : "s", r.engineTokS, r.referenceTokS, r.ratio, r.ratioLow, r.ratioHigh,
               verdict.c_str(), r.maxLogitDiff);
        races.push_back({{"threads", threads}, {"tokens", r.tokens}, {"engine_tok_s", r.engineTokS},
                         {"reference_tok_s", r.referenceTokS}, {"ratio", r.ratio}, {"ratio_min", r.ratioLow},
                         {"ratio_max", r.ratioHigh}, {"max_logit_diff", r.maxLogitDiff}, {"target", verdict}});
    }
    q.out[key] = {{"model", bm.name()}, {"races", races}};
}

std::vector<PolicyConfig> policiesWith(Schedule schedule) {
    std::vector<PolicyConfig> out;
    for (const auto& info : policyRegistry())
        if (!info.fullCache && !info.sessionScored && info.defaultSchedule == schedule) out.push_back(parsePolicySpec(info.id));
    return out;
}

// Every policy's overhead per decode step near the model's full context, then
// a 25 % budget at 8192 tokens on the bundled shape with random weights.
void overheadSection(QuickReport& q, const bench::BenchModel& bm, const std::vector<int64_t>& tokens,
                     const RunSettings& cpuRun, uint64_t seed, bool judgeSteps) {
    const Model& model = bm.get();
    // 48 paired steps: a step is ~1 ms here, so the median needs a few dozen
    // pairs to stand still; they cost far less than the prompt reads.
    const int64_t steps = 48, context = static_cast<int64_t>(tokens.size()) - steps - 2;
    nlohmann::json rows = nlohmann::json::array();
    if (q.print) {
        std::printf("\n");
        printHeader(bm.name(), model, context, steps);
    }
    std::vector<PolicyConfig> policies = policiesWith(Schedule::EveryStep);
    for (const auto& p : policiesWith(Schedule::PrefillThenStep)) policies.push_back(p);
    for (const auto& p : policiesWith(Schedule::PrefillOnce)) policies.push_back(p);
    q.failures += benchRows(model, policies, {bench::atContext(context)}, tokens, context, steps, q.print, rows, judgeSteps);

    const int64_t longContext = 8192, longSteps = 8;
    const bench::BenchModel longModel = bench::BenchModel::synthetic("kvlens-tiny", seed, cpuRun);
    const std::vector<int64_t> longTokens = bench::randomTokens(longModel.get(), seed, longContext + longSteps + 2);
    if (q.print) {
        std::printf("\n");
        printHeader(longModel.name(), longModel.get(), longContext, longSteps);
    }
    // One policy: each row reads the 8192-token prompt twice (full and policy).
    q.failures += benchRows(longModel.get(), {parsePolicySpec("snapkv")}, {{"25%", parseBudget("25%")}}, longTokens,
                            longContext, longSteps, q.print, rows, true);
    q.out["rows"] = rows;
}

// The policies that trim every decode step, judged where a step is real
// work: a real shape (SmolLM2-135M's unless --synthetic names another) with
// random weights, 512 tokens, 24 paired steps (16 left the median of a
// ~55 ms step within a few per cent of the 1.10x line on a busy machine).
void stepSection(QuickReport& q, const std::string& shape, uint64_t seed, const RunSettings& cpuRun) {
    const bench::BenchModel bm = bench::BenchModel::synthetic(shape, seed, cpuRun);
    const int64_t context = 512, steps = 24;
    const std::vector<int64_t> tokens = bench::randomTokens(bm.get(), seed, context + steps + 2);
    std::vector<PolicyConfig> policies = policiesWith(Schedule::EveryStep);
    for (const auto& p : policiesWith(Schedule::PrefillThenStep)) policies.push_back(p);
    nlohmann::json rows = nlohmann::json::array();
    if (q.print) {
        std::printf("\n");
        printHeader(bm.name(), bm.get(), context, steps);
    }
    q.failures += benchRows(bm.get(), policies, {bench::atContext(context)}, tokens, context, steps, q.print, rows, true);
    q.out["step_rows"] = rows;
}

// The interactive refresh: full + 5 policies on a 512-token prompt.
void refreshSection(QuickReport& q, const Model& model, const std::vector<int64_t>& tokens) {
    const std::vector<int64_t> prompt(tokens.begin(), tokens.begin() + std::min<size_t>(512, tokens.size()));
    const double ms = bench::refreshMs(model, bench::lockstepPolicies(), parseBudget("25%"), prompt, 3);
    const char* verdict = q.verdict(ms < 250);
    q.line("\ninteractive refresh: full + streaming, h2o, tova, snapkv, pyramidkv at 25%% on %zu tokens: %.0f ms "
           "(median of 3)  %s < 250 ms\n",
           prompt.size(), ms, verdict);
    q.out["refresh"] = {{"prompt_tokens", prompt.size()}, {"ms", ms}, {"target", verdict}};
}

// Targets of the lockstep refresh (ms; 0: reported only): from scratch, after
// a budget edit, after an appended sentence; and of its decode step against
// the full cache's alone (0: reported only: on the bundled model a step is
// per-op overhead, which six runs multiply while the weights they share
// are read once; docs/performance.md).
struct RefreshTargets {
    double scratch = 0, budgetEdit = 0, append = 0, stepRatio = 0;
};

// The lockstep Session (issue 17): full + 5 policies at 25 % on 512 tokens
// and 16 decode steps, from scratch and after edits; its decode step against
// the full cache's alone; page faults per step.
void lockstepSection(QuickReport& q, const bench::BenchModel& bm, const std::vector<int64_t>& toks,
                     RefreshTargets target, const char* key) {
    const int64_t n = std::min<int64_t>(512, static_cast<int64_t>(toks.size()) - 12 * bench::kEdits);
    const bench::LockstepReport r = bench::lockstep(bm.get(), std::vector<int64_t>(toks.begin(), toks.begin() + n),
                                                    std::vector<int64_t>(toks.begin() + n, toks.begin() + n + 12), 16);
    auto targetText = [&](double ms, double limit) {
        if (limit <= 0) return std::string("(reported)");
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s <= %.0f ms", q.verdict(ms <= limit), limit);
        return std::string(buf);
    };
    auto refreshLine = [&](const char* what, const bench::Refresh& f, double limit) {
        q.line("  refresh after %s: %.0f ms (prompt's trace at %.0f ms)  %s  [%s]\n", what, f.ms, f.firstMs,
               targetText(f.ms, limit).c_str(), f.reuse.c_str());
    };
    q.line("\nlockstep %s, full + streaming, h2o, tova, snapkv, pyramidkv at 25%% on %lld tokens, 16 decode steps "
           "(median of %d, from scratch and of edits in a row):\n  refresh from scratch: %.0f ms  %s\n",
           bm.name().c_str(), static_cast<long long>(n), bench::kEdits, r.refreshMs,
           targetText(r.refreshMs, target.scratch).c_str());
    refreshLine("a budget edit (25% <-> 20%)", r.budgetEdit, target.budgetEdit);
    refreshLine("a parameter edit (snapkv window)", r.parameterEdit, 0);
    refreshLine("appending 12 tokens", r.append, target.append);
    char ratioText[64] = "(reported: the target is for SmolLM2's size)";
    if (target.stepRatio > 0)
        std::snprintf(ratioText, sizeof ratioText, "%s <= %.1fx", q.verdict(r.ratio <= target.stepRatio),
                      target.stepRatio);
    const char* faultsVerdict = q.verdict(r.faultsPerStep <= 50);
    q.line("  decode step (mean over the steps): %.2f ms vs full cache alone %.2f ms: %.2fx  %s\n"
           "  minor page faults per decode step: %.1f  %s <= 50\n",
           r.lockstepStepMs, r.fullStepMs, r.ratio, ratioText, r.faultsPerStep, faultsVerdict);
    auto refreshJson = [](const bench::Refresh& f) {
        return nlohmann::json{{"ms", f.ms}, {"first_trace_ms", f.firstMs}, {"reuse", f.reuse}};
    };
    q.out[key] = {{"model", bm.name()},
                  {"prompt_tokens", n},
                  {"refresh_ms", r.refreshMs},
                  {"budget_edit", refreshJson(r.budgetEdit)},
                  {"parameter_edit", refreshJson(r.parameterEdit)},
                  {"append", refreshJson(r.append)},
                  {"lockstep_step_ms", r.lockstepStepMs},
                  {"full_step_ms", r.fullStepMs},
                  {"lockstep_ratio", r.ratio},
                  {"faults_per_step", r.faultsPerStep}};
}

// --reference: only the race against the C reference, on --synthetic's shape
// or the loaded model.
void runReference(const BenchArgs& a) {
    c10::InferenceMode inference;
    QuickReport q(!a.json);
    const bench::BenchModel bm = benchModel(a);
    const int64_t n = std::min<int64_t>(a.context, bm.get().config().maxPositions);
    referenceSection(q, bm, bench::randomTokens(bm.get(), a.seed, n), n, true, "reference");
    if (!q.print) std::cout << q.out.dump(2) << "\n";
}

void runQuick(const BenchArgs& a) {
    c10::InferenceMode inference;
    const auto t0 = Clock::now();
    QuickReport q(!a.json);
    q.out["threads"] = at::get_num_threads();
    // The synthetic models of the quick table: f32 on the CPU, the threads asked for.
    RunSettings cpuRun;
    cpuRun.threads = a.model.run.threads;

    BenchArgs loadedArgs = a;
    loadedArgs.synthetic.clear();
    const bench::BenchModel loaded = benchModel(loadedArgs);  // the bundled model, or --model
    const Model& model = loaded.get();
    const int64_t maxContext = std::min<int64_t>(2048, model.config().maxPositions);
    const std::vector<int64_t> tokens = bench::randomTokens(model, a.seed, maxContext);
    q.line("model %s, %d threads\n", loaded.name().c_str(), at::get_num_threads());
    const bool bundled = a.model.model.empty();
    referenceSection(q, loaded, tokens, std::min<int64_t>(256, maxContext), !bundled, "reference");
    overheadSection(q, loaded, tokens, cpuRun, a.seed, !bundled);
    if (bundled) stepSection(q, a.synthetic.empty() || a.synthetic == "kvlens-tiny" ? "smollm2-135m" : a.synthetic, a.seed, cpuRun);
    refreshSection(q, model, tokens);
    // On the bundled model the lockstep refresh from scratch is judged by
    // SPEC's interactive target (< 250 ms; the row above), here with 16
    // decode steps too: issue 17's 100 ms read 73-124 ms in consecutive runs
    // of one binary on this project's shared 2-core machines
    // (docs/performance.md). A --model is judged as SPEC's real sizes.
    const RefreshTargets realSize{6000, 1500, 2000, 2.0};
    lockstepSection(q, loaded, tokens, bundled ? RefreshTargets{250, 0, 0, 0} : realSize, "lockstep");
    if (!a.synthetic.empty()) {  // a real shape with random weights
        const bench::BenchModel real = bench::BenchModel::synthetic(a.synthetic, a.seed, cpuRun);
        const std::vector<int64_t> realTokens = bench::randomTokens(real.get(), a.seed, 600);
        referenceSection(q, real, realTokens, 128, true, "real_reference");
        lockstepSection(q, real, realTokens, realSize, "real_lockstep");
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    q.out["failures"] = q.failures;
    q.out["seconds"] = seconds;
    q.out["peak_rss_kib"] = bench::peakRssKiB();
    if (q.print)
        std::printf("\n%d target(s) failed; %.0f s in all; peak RSS %.1f MiB. The heatmap target (8192² at >= 30 "
                    "frames/s) is measured by the GUI test attention_heatmap_test.\n",
                    q.failures, seconds, static_cast<double>(bench::peakRssKiB()) / 1024.0);
    else
        std::cout << q.out.dump(2) << "\n";
}

}  // namespace

void addBenchCommand(CLI::App& app) {
    auto args = std::make_shared<BenchArgs>();
    auto* cmd = app.add_subcommand("bench", "time eviction overhead: policy decode steps vs full-cache steps");
    args->model.add(*cmd);
    args->policy.add(*cmd, /*repeatable=*/true);
    cmd->add_option("--context", args->context, "tokens in the cache when steps are timed")
        ->capture_default_str()
        ->check(wholeNumber(1, kMaxDecodeSteps));
    cmd->add_option("--steps", args->steps, "timed decode steps per policy")
        ->capture_default_str()
        ->check(wholeNumber(1, kMaxDecodeSteps));
    cmd->add_option("--seed", args->seed, "seed of the random token sequence (and of --synthetic weights)")->capture_default_str();
    cmd->add_option("--synthetic", args->synthetic, "a real shape with random weights instead of --model: kvlens-tiny (the bundled shape), smollm2-135m, qwen2.5-0.5b, llama-3.2-1b");
    cmd->add_flag("--json", args->json, "print JSON");
    cmd->add_flag("--quick", args->quick,
                  "SPEC's performance targets in one table, in about a minute: engine vs a C reference built like run.c's "
                  "runomp (1 and 2 threads), "
                  "every policy near the model's full context (every-step ratios judged at SmolLM2-135M's shape), "
                  "25% budgets at 8192 tokens, interactive refresh");
    cmd->add_flag("--reference", args->reference,
                  "only the race against the C reference built like run.c's runomp, at 1 and 2 threads, over "
                  "--context tokens from position 0");
    cmd->callback([args] {
        if (args->quick) return runQuick(*args);
        if (args->reference) return runReference(*args);
        runBench(*args);
    });
}

}  // namespace kvlens::cli
