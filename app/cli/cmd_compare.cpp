// kvlens-cli compare: the full cache and N policies in lockstep on one prompt;
// prints the fidelity table and writes the traces as JSON.
#include <cmath>
#include <optional>
#include <cstdio>
#include <string>
#include <iostream>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/io/trace_json.h"
#include "core/model/model.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"
#include "core/study/match_memory.h"
#include "core/study/ranking.h"

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
    bool matchMemory = false;
};

// A metric as text: "n/a" where it could not be computed (NaN: no steps, a
// stopped run, free-running), never a number made of NaN.
std::string metric(double v, const char* format, double factor = 1.0) {
    if (!std::isfinite(v)) return "n/a";
    char out[32];
    std::snprintf(out, sizeof out, format, v * factor);
    return out;
}

// "12.3K 27%": bytes, and their share of the full cache's.
std::string bytesCell(double bytes, double fullBytes) {
    if (!std::isfinite(bytes)) return "n/a";
    char out[32];
    std::snprintf(out, sizeof out, "%.1fK %3.0f%%", bytes / 1024.0, fullBytes > 0 ? 100.0 * bytes / fullBytes : 0.0);
    return out;
}

// One row per run in the Session's order; `rank` ranks them by mean KL and
// the note below says whether they held equal memory over the run.
void printTable(const Trace& t, const Ranking& ranking) {
    // With the hindsight oracle: each run's retained attention mass as a share of the oracle's.
    const PolicyTrace* oracle = nullptr;
    for (const auto& p : t.policies)
        if (!oracle && findPolicy(p.id).hindsight) oracle = &p;
    std::printf("%-28s %-17s %7s %12s %12s %9s %7s %9s %8s %8s %8s %4s%s\n", "policy", "schedule", "budget", "KV mean",
                "KV peak", "mean KL", "top-1", "PPL", "mass", "out cos", "diverged", "rank", oracle ? "  of oracle" : "");
    const double fullMean = t.policies[0].meanBytesHeld();
    std::vector<const RankedRun*> byRun(t.policies.size(), nullptr);
    for (const RankedRun& row : ranking.rows) byRun.at(row.run) = &row;
    for (size_t r = 0; r < t.policies.size(); ++r) {
        const PolicyTrace& p = t.policies[r];
        const RankedRun& row = *byRun[r];
        char diverged[32], rank[16];
        std::snprintf(diverged, sizeof diverged, p.divergedAt >= 0 ? "%lld" : "-", static_cast<long long>(p.divergedAt));
        std::snprintf(rank, sizeof rank, row.rank ? "%d%s" : "-", row.rank, row.unequalMemory ? "*" : "");
        std::string share;
        if (oracle) share = "  " + metric(p.meanRetainedMass() / oracle->meanRetainedMass(), "%9.1f%%", 100.0);
        std::printf("%-28s %-17s %7s %12s %12s %9s %7s %9s %8s %8s %8s %4s%s\n", p.label.substr(0, 28).c_str(),
                    p.schedule.c_str(), r == 0 ? "-" : metric(row.budget, "%.0f").c_str(),
                    bytesCell(row.meanBytes, fullMean).c_str(),
                    bytesCell(static_cast<double>(row.peakBytes), fullMean).c_str(), metric(p.meanKl(), "%.4f").c_str(),
                    metric(p.top1Agreement(), "%.1f%%", 100.0).c_str(), metric(p.perplexity(), "%.3f").c_str(),
                    metric(p.meanRetainedMass(), "%.3f").c_str(), metric(p.meanOutputCosine(), "%.4f").c_str(), diverged,
                    rank, share.c_str());
        if (!p.budgetNote.empty()) std::printf("    note: %s\n", p.budgetNote.c_str());
        if (!p.failure.empty()) std::printf("    %s\n", p.failure.c_str());
    }
    std::printf("KV mean: held over the run (mean over its predictions), KV peak: the most held, prompt read included; "
                "%% of the full cache's mean. rank: by mean KL%s\n%s\n",
                ranking.unequal ? ", * held unequal memory" : "", ranking.note.c_str());
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

void printMatching(const MemoryMatching& m) {
    std::printf("matched memory: every policy's budget solved so that its mean KV held over the run is that of "
                "%lld entries per KV head (%.1fK)\n",
                static_cast<long long>(m.targetTokens), m.targetBytes / 1024.0);
    for (const MemoryMatch& p : m.policies)
        std::printf("  %-28s budget %-6s %6.1f%% of the target (%d runs)%s%s\n", p.label.substr(0, 28).c_str(),
                    p.budget.text().c_str(), 100.0 * p.meanBytes / m.targetBytes, p.runs, p.note.empty() ? "" : ": ",
                    p.note.c_str());
}

nlohmann::json matchingJson(const MemoryMatching& m) {
    nlohmann::json policies = nlohmann::json::array();
    for (const MemoryMatch& p : m.policies)
        policies.push_back({{"label", p.label}, {"budget", p.budget.text()}, {"mean_kv_bytes_held", p.meanBytes},
                            {"runs", p.runs}, {"note", p.note}});
    return {{"target_tokens", m.targetTokens}, {"target_kv_bytes", m.targetBytes}, {"policies", policies}};
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
    so.memoryBudget = a.model.memoryBytes();
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
    std::optional<MemoryMatching> matching;
    if (a.matchMemory) {
        matching = matchMemory(model, so, steps);
        so = withMatchedBudgets(std::move(so), *matching);
        if (a.json != "-") printMatching(*matching);
    }
    Session session(model, so);
    if (!session.memoryNote().empty()) std::cerr << "kvlens-cli: note: " << session.memoryNote() << "\n";
    std::shared_ptr<const Trace> trace = session.start();
    for (int64_t s = 0; s < steps; ++s) trace = session.step();
    const Ranking ranking = rankRuns(*trace, matching ? matching->targetBytes : std::nan(""));
    if (a.json != "-") {
        if (trace->slidingWindow > 0)
            std::printf("model: sliding-window attention over the last %lld positions (config.json sliding_window)\n",
                        static_cast<long long>(trace->slidingWindow));
        printTable(*trace, ranking);
        printAgreement(*trace);
    }
    if (a.json.empty()) return;
    nlohmann::json out = traceToJson(*trace);
    out["ranking"] = rankingJson(ranking);
    if (matching) out["matched_memory"] = matchingJson(*matching);
    writeOutput(a.json, out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

void addCompareCommand(CLI::App& app) {
    auto args = std::make_shared<CompareArgs>();
    auto* cmd = app.add_subcommand("compare", "run the full cache and eviction policies in lockstep; fidelity table");
    args->model.add(*cmd);
    args->model.addMemoryBudget(*cmd);
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
    cmd->add_flag("--match-memory", args->matchMemory,
                  "solve each policy's budget so that its mean KV held over the run equals that of --budget entries "
                  "per KV head (the schedules differ: at one budget they hold different memory)");
    cmd->add_option("--json", args->json, "write the traces as JSON to FILE (- for stdout, without the table)");
    cmd->callback([args] { runCompare(*args); });
}

}  // namespace kvlens::cli
