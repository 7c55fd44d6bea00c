// kvlens-cli compare: the full cache and N policies in lockstep on one prompt;
// prints the fidelity table and writes the traces as JSON.
#include <cmath>
#include <cstdio>
#include <string>
#include <iostream>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/io/trace_json.h"
#include "core/model/model.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"

namespace kvlens::cli {
namespace {

struct CompareArgs {
    ModelArgs model;
    PromptArgs prompt;
    QuestionArgs question;
    PolicyArgs policy;
    SamplingArgs sampling;
    int64_t steps = 16;
    bool freeRunning = false;
    std::string continuation, continuationIds;
    std::string calibrationFile;
    std::string attention;  // LAYER:HEAD
    std::string json;       // file, or - for stdout
};

// A metric as text: "n/a" where it could not be computed (NaN: no steps, a
// stopped run, free-running), never a number made of NaN.
std::string metric(double v, const char* format, double factor = 1.0) {
    if (!std::isfinite(v)) return "n/a";
    char out[32];
    std::snprintf(out, sizeof out, format, v * factor);
    return out;
}

void printTable(const Trace& t) {
    // With the hindsight oracle: each run's retained attention mass as a share of the oracle's.
    const PolicyTrace* oracle = nullptr;
    for (const auto& p : t.policies)
        if (!oracle && findPolicy(p.id).hindsight) oracle = &p;
    std::printf("%-28s %-13s %9s %12s %9s %7s %9s %8s %8s %9s%s\n", "policy", "schedule", "budget", "KV held", "mean KL",
                "top-1", "PPL", "mass", "out cos", "diverged", oracle ? "  of oracle" : "");
    const double fullBytes = static_cast<double>(t.policies[0].bytesHeld);
    for (const auto& p : t.policies) {
        double avgBudget = 0;
        for (const auto& l : p.layers) avgBudget += static_cast<double>(l.budget);
        avgBudget /= static_cast<double>(std::max<size_t>(1, p.layers.size()));
        char budget[32], held[32], diverged[32];
        if (isFullCache(p.id))
            std::snprintf(budget, sizeof budget, "-");
        else
            std::snprintf(budget, sizeof budget, "%.0f", avgBudget);
        std::snprintf(held, sizeof held, "%.1fK %3.0f%%", p.bytesHeld / 1024.0,
                      fullBytes > 0 ? 100.0 * static_cast<double>(p.bytesHeld) / fullBytes : 0.0);
        if (p.divergedAt >= 0)
            std::snprintf(diverged, sizeof diverged, "%lld", static_cast<long long>(p.divergedAt));
        else
            std::snprintf(diverged, sizeof diverged, "-");
        std::string share;
        if (oracle) share = "  " + metric(p.meanRetainedMass() / oracle->meanRetainedMass(), "%9.1f%%", 100.0);
        std::printf("%-28s %-13s %9s %12s %9s %7s %9s %8s %8s %9s%s\n", p.label.substr(0, 28).c_str(),
                    p.schedule.c_str(), budget, held, metric(p.meanKl(), "%.4f").c_str(),
                    metric(p.top1Agreement(), "%.1f%%", 100.0).c_str(), metric(p.perplexity(), "%.3f").c_str(),
                    metric(p.meanRetainedMass(), "%.3f").c_str(), metric(p.meanOutputCosine(), "%.4f").c_str(), diverged,
                    share.c_str());
        if (!p.budgetNote.empty()) std::printf("    note: %s\n", p.budgetNote.c_str());
        if (!p.failure.empty()) std::printf("    %s\n", p.failure.c_str());
    }
}

// Which tokens two policies keep alike: the Jaccard overlap of their kept
// sets at the last step, mean over layers x KV heads (--json has each layer and head).
void printAgreement(const Trace& t) {
    const size_t n = t.policies.size();
    if (n < 3) return;
    std::printf("\nkept-set agreement (Jaccard |A and B| / |A or B| of the tokens held, mean over layers x KV heads):\n");
    std::printf("%-28s", "");
    for (size_t b = 1; b < n; ++b) std::printf(" %8zu", b);
    std::printf("\n");
    for (size_t a = 1; a < n; ++a) {
        std::printf("%zu %-26s", a, t.policies[a].label.substr(0, 26).c_str());
        for (size_t b = 1; b < n; ++b)
            std::printf(" %8s", metric(keptJaccardMean(t.policies[a], t.policies[b]), "%.3f").c_str());
        std::printf("\n");
    }
}

void runCompare(const CompareArgs& a) {
    if (!a.prompt.given()) throw ArgumentError("give a prompt with --prompt, --prompt-file or --prompt-ids");
    if (a.policy.policies.empty()) throw ArgumentError("give at least one --policy to compare with the full cache");
    OutputGuard guard;
    a.model.readBy(guard);
    a.prompt.readBy(guard);
    guard.input(a.calibrationFile);
    if (!a.json.empty()) guard.output(a.json, "--json");
    const auto dir = a.model.dir();
    std::shared_ptr<const Tokenizer> tok;
    if (auto t = tokenizerFor(dir)) tok = std::make_shared<const Tokenizer>(std::move(*t));
    SessionOptions so;
    so.prompt = a.prompt.resolve(tok.get());
    so.policies = a.policy.configs();
    so.budget = a.policy.budgetSpec();
    so.teacherForced = !a.freeRunning;
    so.sampling = a.sampling.options();
    so.tokenizer = tok;
    a.question.apply(so, tok.get());
    if (!a.calibrationFile.empty()) {
        if (!tok) throw ArgumentError("--calibration-file needs the model's tokenizer.json");
        for (int32_t id : tok->encode(readTextFile(a.calibrationFile, "--calibration-file"), true)) so.calibration.push_back(id);
        if (so.calibration.empty()) throw ArgumentError("--calibration-file " + a.calibrationFile + ": no text to calibrate on");
    }
    const int64_t steps = questionSteps(so) + a.steps;  // an agnostic question is read first
    so.plannedSteps = steps;
    if (!a.continuationIds.empty()) so.continuation = parseIdList(a.continuationIds, "--continuation-ids");
    if (!a.continuation.empty()) {
        if (!tok) throw ArgumentError("--continuation needs the model's tokenizer.json (or use --continuation-ids)");
        for (int32_t id : tok->encode(a.continuation, false)) so.continuation.push_back(id);
    }
    if (!a.attention.empty()) {
        const auto colon = a.attention.find(':');
        if (colon == std::string::npos) throw ArgumentError("--attention: expected LAYER:HEAD, got '" + a.attention + "'");
        so.attention = {true, parseIdList(a.attention.substr(0, colon), "--attention", "layer")[0],
                        parseIdList(a.attention.substr(colon + 1), "--attention", "head")[0]};
    }
    auto model = std::shared_ptr<const Model>(Model::load(dir, a.model.run));
    a.model.checkContext(model->config(), static_cast<int64_t>(so.prompt.size() + so.question.size()) + a.steps);
    Session session(model, so);
    std::shared_ptr<const Trace> trace = session.start();
    for (int64_t s = 0; s < steps; ++s) trace = session.step();
    if (a.json != "-") {
        if (trace->slidingWindow > 0)
            std::printf("model: sliding-window attention over the last %lld positions (config.json sliding_window)\n",
                        static_cast<long long>(trace->slidingWindow));
        printTable(*trace);
        printAgreement(*trace);
    }
    if (a.json.empty()) return;
    writeOutput(a.json, traceToJson(*trace).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

void addCompareCommand(CLI::App& app) {
    auto args = std::make_shared<CompareArgs>();
    auto* cmd = app.add_subcommand("compare", "run the full cache and eviction policies in lockstep; fidelity table");
    args->model.add(*cmd);
    args->prompt.add(*cmd);
    args->question.add(*cmd);
    cmd->add_option("--calibration-file", args->calibrationFile,
                    "a text whose queries Q-Filters learns its filters from (default: the prompt's)");
    args->policy.add(*cmd, /*repeatable=*/true);
    cmd->add_option("--steps", args->steps, "decode steps after the prompt (and after an agnostic --question)")->capture_default_str()->check(wholeNumber(0, kMaxDecodeSteps));
    cmd->add_flag("--free-running", args->freeRunning, "each policy generates its own text (default: teacher-forced)");
    auto* c = cmd->add_option("--continuation", args->continuation, "teacher-forced reference text (default: the full cache's own choices)");
    cmd->add_option("--continuation-ids", args->continuationIds, "teacher-forced reference as token ids")->excludes(c);
    args->sampling.add(*cmd);
    cmd->add_option("--attention", args->attention, "capture the attention map of LAYER:HEAD into the JSON");
    cmd->add_option("--json", args->json, "write the traces as JSON to FILE (- for stdout, without the table)");
    cmd->callback([args] { runCompare(*args); });
}

}  // namespace kvlens::cli
