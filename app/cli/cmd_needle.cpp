// kvlens-cli needle: the needle-in-a-haystack grid (context length × depth)
// for the full cache and each policy at each budget; a table, JSON and CSV.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "app/cli/common.h"
#include "app/cli/figure_hook.h"
#include "core/error.h"
#include "core/study/needle_grid.h"
#include "core/study/needle_io.h"
#include "core/model/model.h"

namespace kvlens::cli {
namespace {
namespace fs = std::filesystem;

struct NeedleArgs {
    ModelArgs model;
    PolicyArgs policy;
    std::string contexts = "512,1024";
    std::string depths = "0,25,50,75,100";
    int64_t samples = 1;
    uint64_t seed = 1;
    int64_t maxNew = 0;
    std::string haystackFile, needle, question, answer;
    std::string json, csv, figure;
    double scale = 2.0;
    bool quiet = false;
};

std::vector<std::string> splitCommas(const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = std::min(text.find(',', start), text.size());
        out.push_back(text.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

std::vector<BudgetSpec> budgets(const PolicyArgs& p) {
    std::vector<BudgetSpec> out;
    if (p.budgets.empty() && p.budget.empty()) {
        p.budgetSpec();  // names the policy that needs a budget
        return out;
    }
    if (!p.budgets.empty()) out.push_back(parseLayerBudgets(p.budgets));
    if (!p.budget.empty())
        for (const auto& b : splitCommas(p.budget)) out.push_back(parseBudget(b));
    return out;
}

eval::NeedleGridOptions gridOptions(const NeedleArgs& a) {
    eval::NeedleGridOptions o;
    o.contexts = parseIdList(a.contexts, "--contexts", "context length");
    for (int64_t c : o.contexts)
        if (c < 1) throw ArgumentError("--contexts: a context length must be positive, got " + std::to_string(c));
    o.depths.clear();
    for (const auto& d : splitCommas(a.depths)) {
        char* end = nullptr;
        const double v = std::strtod(d.c_str(), &end);
        if (d.empty() || *end != '\0' || !(v >= 0 && v <= 100))
            throw ArgumentError("--depths: '" + d + "' is not a percentage in [0, 100]");
        o.depths.push_back(v / 100.0);
    }
    o.policies = a.policy.configs();
    o.budgets = budgets(a.policy);
    o.samples = a.samples;
    o.seed = a.seed;
    o.maxNewTokens = a.maxNew;
    const bool anyUser = !a.haystackFile.empty() || !a.needle.empty() || !a.question.empty() || !a.answer.empty();
    if (anyUser) {
        if (a.haystackFile.empty() || a.needle.empty() || a.question.empty() || a.answer.empty())
            throw ArgumentError("a user needle needs all of --haystack-file, --needle, --question and --answer");
        o.user = eval::UserNeedle{readTextFile(a.haystackFile, "--haystack-file"), a.needle, a.question, a.answer};
    }
    return o;
}

// One block per policy/budget: depth rows × context columns, exact match (overlap).
void printGrid(const eval::NeedleGridResult& g) {
    std::vector<std::pair<std::string, std::string>> runs;
    for (const auto& c : g.cells)
        if (std::find(runs.begin(), runs.end(), std::make_pair(c.policy, c.budget)) == runs.end())
            runs.emplace_back(c.policy, c.budget);
    for (const auto& [policy, budget] : runs) {
        std::printf("%s%s%s   exact match (word overlap), %lld sample(s) per cell\n", policy.c_str(),
                    budget == "-" ? "" : "  budget ", budget == "-" ? "" : budget.c_str(),
                    static_cast<long long>(g.options.samples));
        std::printf("  %6s", "depth");
        for (int64_t c : g.options.contexts) std::printf(" %15lld", static_cast<long long>(c));
        std::printf("\n");
        for (double d : g.options.depths) {
            std::printf("  %5.0f%%", d * 100);
            for (int64_t ctx : g.options.contexts)
                for (const auto& c : g.cells)
                    if (c.policy == policy && c.budget == budget && c.context == ctx && c.depth == d)
                        std::printf("     %4.2f (%4.2f)", c.exact, c.overlap);
            std::printf("\n");
        }
        std::printf("  %6s", "mean");
        for (int64_t ctx : g.options.contexts) std::printf("     %4.2f       ", g.meanExact(policy, budget, ctx));
        std::printf("\n\n");
    }
}

void runNeedle(const NeedleArgs& a) {
    OutputGuard guard;
    a.model.readBy(guard);
    guard.input(a.haystackFile);
    for (const auto& [file, flag] : {std::pair{a.json, "--json"}, {a.csv, "--csv"}, {a.figure, "--figure"}})
        if (!file.empty()) guard.output(file, flag);
    if (a.json == "-" && a.csv == "-") throw ArgumentError("--json - and --csv -: only one of them can go to stdout");
    const eval::NeedleGridOptions o = gridOptions(a);
    if (!a.figure.empty()) {  // refused before the grid runs, not after
        std::string ext = fs::path(a.figure).extension().string();
        for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (ext != ".png" && ext != ".svg" && ext != ".pdf")
            throw ArgumentError("--figure " + a.figure + ": a figure is .png, .svg or .pdf");
    }
    const auto dir = a.model.dir();
    auto tok = tokenizerFor(dir);
    if (!tok) throw ArgumentError("the needle grid needs a tokenizer.json in " + dir.string());
    auto tokenizer = std::make_shared<const Tokenizer>(std::move(*tok));
    auto model = std::shared_ptr<const Model>(Model::load(dir, a.model.run));
    a.model.checkContext(model->config(), *std::max_element(o.contexts.begin(), o.contexts.end()) + a.maxNew);
    const bool toStdout = a.json == "-" || a.csv == "-";
    auto progress = [&](int64_t done, int64_t total) {
        if (!a.quiet) std::fprintf(stderr, "\rneedle: cell %lld of %lld", static_cast<long long>(done), static_cast<long long>(total));
        if (!a.quiet && done == total) std::fprintf(stderr, "\n");
    };
    eval::NeedleGridResult grid = eval::runNeedleGrid(model, tokenizer, o, progress);
    grid.model = dir.filename().string();
    if (grid.model.empty()) grid.model = dir.parent_path().filename().string();
    if (!toStdout) printGrid(grid);
    if (!a.json.empty()) writeOutput(a.json, needleGridToJson(grid).dump(1) + "\n");
    if (!a.csv.empty()) writeOutput(a.csv, needleGridToCsv(grid));
    if (!a.figure.empty()) exportNeedleFigure(grid, a.scale, a.figure);
}

}  // namespace

void addNeedleCommand(CLI::App& app) {
    auto args = std::make_shared<NeedleArgs>();
    auto* cmd = app.add_subcommand("needle", "needle-in-a-haystack grid: context length x depth, per policy and budget");
    args->model.add(*cmd);
    args->policy.add(*cmd, /*repeatable=*/true);
    cmd->get_option("--budget")->description("cache budget(s) per KV head: N tokens or R% of the prompt; a comma list runs each");
    cmd->add_option("--contexts", args->contexts, "context lengths in tokens, e.g. 512,1024")->capture_default_str();
    cmd->add_option("--depths", args->depths, "needle depths in percent of the haystack, e.g. 0,50,100")->capture_default_str();
    cmd->add_option("--samples", args->samples, "probes per cell (seeds --seed, --seed+1, ...)")->capture_default_str()->check(wholeNumber(1, 100000));
    cmd->add_option("--seed", args->seed, "seed of the first probe")->capture_default_str();
    cmd->add_option("--max-new-tokens", args->maxNew, "tokens each run answers with (0: the answer's length + 2)")
        ->capture_default_str()
        ->check(wholeNumber(0, kMaxDecodeSteps));
    cmd->add_option("--haystack-file", args->haystackFile, "real models: text to hide the needle in (repeated to fill)");
    cmd->add_option("--needle", args->needle, "real models: the needle sentence");
    cmd->add_option("--question", args->question, "real models: the question asked at the end");
    cmd->add_option("--answer", args->answer, "real models: the expected answer");
    cmd->add_option("--json", args->json, "write the grid as JSON to FILE (- for stdout, without the table)");
    cmd->add_option("--csv", args->csv, "write the grid as CSV to FILE (- for stdout, without the table)");
    cmd->add_option("--figure", args->figure,
                    "draw the grid to FILE.png|svg|pdf (x = depth, y = context, colour = exact match; one panel "
                    "per policy and budget), as the GUI's Export needle grid");
    cmd->add_option("--scale", args->scale, "PNG device pixels per point for --figure")->capture_default_str()->check(finiteReal());
    cmd->add_flag("--quiet", args->quiet, "no progress on stderr");
    cmd->callback([args] { runNeedle(*args); });
}

}  // namespace kvlens::cli
