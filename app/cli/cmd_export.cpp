// kvlens-cli export: run a prompt (or a saved session) and write one table
// of the resulting trace — attention map, kept/evicted status, scores,
// budgets or metrics — as CSV, JSON or NPY, chosen by the file extension.
// Figures (PNG/SVG/PDF) are rendered by the GUI's widgets; see
// app/cli/figure_hook.h.
#include <iostream>

#include "app/cli/common.h"
#include "app/cli/figure_hook.h"
#include "core/error.h"
#include "core/io/export_data.h"
#include "core/io/export_names.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "core/io/session_setup.h"

namespace kvlens::cli {
namespace {

namespace fs = std::filesystem;

struct ExportArgs {
    ModelArgs model;
    PromptArgs prompt;
    PolicyArgs policy;
    std::string session;
    std::string show;   // which run to export: a policy label or id (default: the first policy)
    std::string table = "attention";
    int64_t layer = -1, head = -1, kvHead = -1;  // -1: the session's view, or 0
    int64_t steps = 0;
    std::string out;
    double scale = 2.0;
    std::string colourScale;  // empty: the session's view, or power
    // Export all: every policy / layer / query head (combined), one file
    // each in the --out folder, plus grid.<format> for figures.
    bool allPolicies = false, allLayers = false, allHeads = false;
    std::string format = "png";
};

size_t runIndex(const Trace& t, const std::string& show) {
    if (show.empty()) return t.policies.size() > 1 ? 1 : 0;
    for (size_t i = 0; i < t.policies.size(); ++i)
        if (t.policies[i].label == show || t.policies[i].id == show) return i;
    std::string known;
    for (const auto& p : t.policies) known += (known.empty() ? "" : ", ") + p.label;
    throw ArgumentError("--show: no run '" + show + "' (runs: " + known + ")");
}

std::shared_ptr<const Trace> runTrace(const ExportArgs& a, const std::shared_ptr<const Model>& model,
                                      SessionOptions so, int64_t layer, int64_t head) {
    so.attention = {true, layer, head};
    Session session(model, std::move(so));
    if (!session.memoryNote().empty()) std::cerr << "kvlens-cli: note: " << session.memoryNote() << "\n";
    std::shared_ptr<const Trace> trace = session.start();
    for (int64_t s = 0; s < a.steps; ++s) trace = session.step();
    return trace;
}

bool isFigure(const std::string& ext) { return ext == ".png" || ext == ".svg" || ext == ".pdf"; }

// One table or figure of one run of `trace` into `file` (the extension picks the format).
void writeOne(const ExportArgs& a, const std::shared_ptr<const Trace>& trace, size_t run, int64_t layer,
              int64_t head, const std::string& model, const std::string& file) {
    const std::string ext = fs::path(file).extension().string();
    const ExportTable table = parseExportTable(a.table);
    if (isFigure(ext)) {
        if (table != ExportTable::Attention && table != ExportTable::Status)
            throw ArgumentError("a figure shows --table attention or status, not " + a.table);
        FigureRequest req{trace, run, layer, head, a.scale, model, a.colourScale,
                          table == ExportTable::Status ? "status" : "attention"};
        return exportFigure(req, file);
    }
    if (ext == ".npy") {
        if (table != ExportTable::Attention) throw ArgumentError("--out .npy holds the attention matrix: use --table attention");
        return writeAttentionNpy(file, *trace, run);
    }
    const ExportSelection sel{run, layer,
                              a.kvHead >= 0 ? a.kvHead : head / std::max<int64_t>(1, trace->numHeads / trace->numKvHeads)};
    std::string text;
    if (ext == ".csv")
        text = exportCsv(*trace, table, sel);
    else if (ext == ".json")
        text = exportJson(*trace, table, sel).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    else
        throw ArgumentError("--out: unknown extension '" + ext + "' (csv, json, npy, png, svg, pdf)");
    writeOutput(file, text);
}

// Export all: the runs × layers × heads asked for, one file each in the
// folder --out, named RUN_LLL_HHH.FORMAT, and grid.FORMAT with every panel.
void exportAll(const ExportArgs& a, const std::shared_ptr<const Model>& model, const SessionOptions& so,
               const std::string& modelName, OutputGuard& guard) {
    std::string fmt = a.format;
    if (!fmt.empty() && fmt[0] == '.') fmt.erase(0, 1);
    const std::string ext = "." + fmt;
    if (!isFigure(ext) && ext != ".csv" && ext != ".json" && ext != ".npy")
        throw ArgumentError("--format: '" + a.format + "' is not png, svg, pdf, csv, json or npy");
    std::error_code ec;
    fs::create_directories(a.out, ec);
    if (!fs::is_directory(a.out)) throw ArgumentError("--out: cannot create the folder '" + a.out + "'");
    const auto first = runTrace(a, model, so, a.layer, a.head);
    std::vector<int64_t> layers{a.layer}, heads{a.head};
    if (a.allLayers) layers.clear();
    if (a.allHeads) heads.clear();
    for (int64_t l = 0; a.allLayers && l < first->numLayers; ++l) layers.push_back(l);
    for (int64_t h = 0; a.allHeads && h < first->numHeads; ++h) heads.push_back(h);
    std::vector<size_t> runs;
    if (a.allPolicies)
        for (size_t i = 0; i < first->policies.size(); ++i) runs.push_back(i);
    else
        runs.push_back(runIndex(*first, a.show));
    const auto names = exportRunNames(*first);
    std::vector<FigureRequest> panels;
    for (int64_t l : layers)
        for (int64_t h : heads) {
            // A trace captures one (layer, head): run again for each other one.
            const auto trace = l == a.layer && h == a.head ? first : runTrace(a, model, so, l, h);
            for (size_t r : runs) {
                const std::string file = (fs::path(a.out) / exportFileName(names[r], l, h, ext)).string();
                guard.output(file, "--out");
                writeOne(a, trace, r, l, h, modelName, file);
                std::cout << file << "\n";
                panels.push_back({trace, r, l, h, a.scale, modelName, a.colourScale, "attention"});
            }
        }
    if (!isFigure(ext) || parseExportTable(a.table) != ExportTable::Attention) return;
    const int columns = a.allHeads ? static_cast<int>(heads.size()) : static_cast<int>(runs.size() > 1 ? runs.size() : 0);
    std::string title = modelName;
    if (!a.allPolicies) title += " · " + first->policies[runs[0]].label;
    title += " · step " + std::to_string(first->step);
    if (!a.allLayers) title += " · layer " + std::to_string(a.layer);
    if (!a.allHeads) title += " · head " + std::to_string(a.head);
    const std::string grid = (fs::path(a.out) / ("grid" + ext)).string();
    guard.output(grid, "--out");
    exportGridFigure(panels, columns, title, grid);
    std::cout << grid << "\n";
}

void runExport(ExportArgs a) {
    if (a.out.empty()) throw ArgumentError("give the output file with --out FILE.{csv,json,npy,png,svg,pdf}");
    const bool all = a.allPolicies || a.allLayers || a.allHeads;
    OutputGuard guard;
    guard.input(a.session);
    a.prompt.readBy(guard);
    SessionOptions so;
    fs::path dir;
    std::string notes;  // printed once the output is known to be allowed
    std::optional<SessionFile> session;
    if (!a.session.empty()) {
        if (a.prompt.given() || !a.policy.policies.empty())
            throw ArgumentError("--session replaces --prompt/--policy: give one or the other");
        const SessionFile& file = session.emplace(loadSession(a.session));
        // --model runs the session on that model instead of the one it was
        // saved with; the guard below protects the model that runs.
        const fs::path saved = sessionModelDir(file);
        dir = a.model.model.empty() ? saved : a.model.dir();
        notes = a.model.model.empty() ? fingerprintNote(file, dir)
                                      : "running the session on --model " + dir.string() + " (it was saved with " +
                                            saved.string() + ")";
        auto tok = tokenizerFor(dir);
        if (!tok) throw ArgumentError("the session's model has no tokenizer.json: " + dir.string());
        so = sessionOptionsFrom(file, std::make_shared<const Tokenizer>(std::move(*tok)));
        if (a.steps == 0) a.steps = file.decodeSteps;
        a.steps += questionSteps(so);  // an agnostic question is read before the steps asked for
        if (a.layer < 0) a.layer = file.view.layer;
        if (a.head < 0) a.head = file.view.head;
        if (a.colourScale.empty()) a.colourScale = file.view.colourScale;
    } else {
        if (!a.prompt.given()) throw ArgumentError("give a prompt (--prompt, --prompt-file, --prompt-ids) or --session");
        dir = a.model.dir();
        std::shared_ptr<const Tokenizer> tok;
        if (auto t = tokenizerFor(dir)) tok = std::make_shared<const Tokenizer>(std::move(*t));
        so.prompt = a.prompt.resolve(tok.get());
        so.policies = a.policy.configs();
        so.budget = a.policy.budgetSpec();
        so.tokenizer = tok;
    }
    guard.inputFolder(dir);
    guard.output(a.out, "--out");
    so.memoryBudget = a.model.memoryBytes();
    if (!notes.empty()) std::cerr << "kvlens-cli: note: " << notes << "\n";
    a.layer = std::max<int64_t>(a.layer, 0);
    a.head = std::max<int64_t>(a.head, 0);
    if (a.colourScale.empty()) a.colourScale = "power";
    const auto model = std::shared_ptr<const Model>(Model::load(dir, a.model.run));
    if (session) checkSessionView(*session, model->config());  // its layer and head, on the model that runs
    a.model.checkContext(model->config(), static_cast<int64_t>(so.prompt.size()) + a.steps);
    // The bundled model's folder is named after it; a user's folder names theirs.
    fs::path named = fs::absolute(dir).lexically_normal();
    if (named.filename().empty()) named = named.parent_path();  // "…/kvlens-tiny/"
    const std::string modelName = named.filename().string();
    if (all) return exportAll(a, model, so, modelName, guard);
    const auto trace = runTrace(a, model, std::move(so), a.layer, a.head);
    writeOne(a, trace, runIndex(*trace, a.show), a.layer, a.head, modelName, a.out);
}

}  // namespace

void addExportCommand(CLI::App& app) {
    auto args = std::make_shared<ExportArgs>();
    auto* cmd = app.add_subcommand("export", "run a prompt or a session and export a heatmap or its data (csv, json, npy, png, svg, pdf)");
    args->model.add(*cmd);
    args->model.addMemoryBudget(*cmd);
    args->prompt.add(*cmd);
    args->policy.add(*cmd, /*repeatable=*/true);
    cmd->add_option("--session", args->session, "a saved session (.kvlens.json) instead of --prompt/--policy (with --model: run on that model)");
    cmd->add_option("--show", args->show, "the run to export: a policy id or label, or full (default: the first policy)");
    cmd->add_option("--table", args->table, "attention | status | scores | budgets | metrics (a figure: attention heatmap or status strips)")->capture_default_str();
    cmd->add_option("--layer", args->layer, "layer (default: the session's view, or 0)")->check(wholeNumber(0, kMaxIndex));
    cmd->add_option("--head", args->head, "query head of the attention map (default: the session's view, or 0)")
        ->check(wholeNumber(0, kMaxIndex));
    cmd->add_option("--kv-head", args->kvHead, "KV head for status/scores (default: the query head's group)")
        ->check(wholeNumber(0, kMaxIndex));
    cmd->add_option("--steps", args->steps, "decode steps before the snapshot (default 0, or the session's)")
        ->check(wholeNumber(0, kMaxDecodeSteps));
    cmd->add_option("--scale", args->scale, "PNG scale factor (device pixels per point)")->capture_default_str()->check(finiteReal());
    cmd->add_option("--colour-scale", args->colourScale, "figure colour scale: linear | log | power (default: the session's, or power)");
    cmd->add_flag("--all-policies", args->allPolicies, "export every run (full and each policy): --out is a folder");
    cmd->add_flag("--all-layers", args->allLayers, "export every layer (with --all-heads: every layer x head): --out is a folder");
    cmd->add_flag("--all-heads", args->allHeads, "export every query head: --out is a folder");
    cmd->add_option("--format", args->format, "file format of an export-all: png | svg | pdf | csv | json | npy")->capture_default_str();
    cmd->add_option("--out", args->out, "output file (the extension picks the format), or the folder of an export-all")->required();
    cmd->callback([args] { runExport(*args); });
}

}  // namespace kvlens::cli
