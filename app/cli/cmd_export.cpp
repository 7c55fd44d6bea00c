// kvlens-cli export: run a prompt (or a saved session) and write one table
// of the resulting trace — attention map, kept/evicted status, scores,
// budgets or metrics — as CSV, JSON or NPY, chosen by the file extension.
// Figures (PNG/SVG/PDF) are rendered by the GUI's widgets; see
// app/cli/figure_hook.h.
#include <fstream>
#include <iostream>

#include "app/cli/common.h"
#include "app/cli/figure_hook.h"
#include "core/error.h"
#include "core/io/export_data.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "core/run/session_setup.h"

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
    int64_t layer = 0, head = 0, kvHead = -1;
    int64_t steps = 0;
    std::string out;
    double scale = 2.0;
};

size_t runIndex(const Trace& t, const std::string& show) {
    if (show.empty()) return t.policies.size() > 1 ? 1 : 0;
    for (size_t i = 0; i < t.policies.size(); ++i)
        if (t.policies[i].label == show || t.policies[i].id == show) return i;
    std::string known;
    for (const auto& p : t.policies) known += (known.empty() ? "" : ", ") + p.label;
    throw ArgumentError("--show: no run '" + show + "' (runs: " + known + ")");
}

std::shared_ptr<const Trace> runTrace(const ExportArgs& a, SessionOptions so, const fs::path& dir) {
    auto model = std::shared_ptr<const Model>(Model::load(dir, a.model.run));
    Session session(model, std::move(so));
    std::shared_ptr<const Trace> trace = session.start();
    for (int64_t s = 0; s < a.steps; ++s) trace = session.step();
    return trace;
}

void runExport(ExportArgs a) {
    if (a.out.empty()) throw ArgumentError("give the output file with --out FILE.{csv,json,npy,png,svg,pdf}");
    const std::string ext = fs::path(a.out).extension().string();
    SessionOptions so;
    fs::path dir;
    if (!a.session.empty()) {
        if (a.prompt.given() || !a.policy.policies.empty())
            throw ArgumentError("--session replaces --prompt/--policy: give one or the other");
        const SessionFile file = loadSession(a.session);
        dir = sessionModelDir(file);
        const std::string note = fingerprintNote(file, dir);
        if (!note.empty()) std::cerr << "kvlens-cli: note: " << note << "\n";
        auto tok = tokenizerFor(dir);
        if (!tok) throw ArgumentError("the session's model has no tokenizer.json: " + dir.string());
        so = sessionOptionsFrom(file, std::make_shared<const Tokenizer>(std::move(*tok)));
        if (a.steps == 0) a.steps = file.decodeSteps;
        so.attention = {true, a.layer, a.head};
    } else {
        if (!a.prompt.given()) throw ArgumentError("give a prompt (--prompt, --prompt-file, --prompt-ids) or --session");
        dir = a.model.dir();
        std::shared_ptr<const Tokenizer> tok;
        if (auto t = tokenizerFor(dir)) tok = std::make_shared<const Tokenizer>(std::move(*t));
        so.prompt = a.prompt.resolve(tok.get());
        so.policies = a.policy.configs();
        so.budget = a.policy.budgetSpec();
        so.tokenizer = tok;
        so.attention = {true, a.layer, a.head};
    }
    const auto trace = runTrace(a, std::move(so), dir);
    ExportSelection sel{runIndex(*trace, a.show), a.layer,
                        a.kvHead >= 0 ? a.kvHead : a.head / std::max<int64_t>(1, trace->numHeads / trace->numKvHeads)};
    const ExportTable table = parseExportTable(a.table);
    if (ext == ".png" || ext == ".svg" || ext == ".pdf") {
        FigureRequest req{trace, sel.policy, a.layer, a.head, a.scale, dir.filename().string()};
        return exportFigure(req, a.out);
    }
    if (ext == ".npy") {
        if (table != ExportTable::Attention) throw ArgumentError("--out .npy holds the attention matrix: use --table attention");
        return writeAttentionNpy(a.out, *trace, sel.policy);
    }
    std::string text;
    if (ext == ".csv")
        text = exportCsv(*trace, table, sel);
    else if (ext == ".json")
        text = exportJson(*trace, table, sel).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    else
        throw ArgumentError("--out: unknown extension '" + ext + "' (csv, json, npy, png, svg, pdf)");
    std::ofstream out(a.out);
    if (!out || !(out << text)) throw ArgumentError("--out: cannot write '" + a.out + "'");
}

}  // namespace

void addExportCommand(CLI::App& app) {
    auto args = std::make_shared<ExportArgs>();
    auto* cmd = app.add_subcommand("export", "run a prompt or a session and export a heatmap or its data (csv, json, npy, png, svg, pdf)");
    args->model.add(*cmd);
    args->prompt.add(*cmd);
    args->policy.add(*cmd, /*repeatable=*/true);
    cmd->add_option("--session", args->session, "a saved session (.kvlens.json) instead of --prompt/--policy");
    cmd->add_option("--show", args->show, "the run to export: a policy id or label, or full (default: the first policy)");
    cmd->add_option("--table", args->table, "attention | status | scores | budgets | metrics (data formats)")->capture_default_str();
    cmd->add_option("--layer", args->layer, "layer")->capture_default_str();
    cmd->add_option("--head", args->head, "query head (the attention map's)")->capture_default_str();
    cmd->add_option("--kv-head", args->kvHead, "KV head for status/scores (default: the query head's group)");
    cmd->add_option("--steps", args->steps, "decode steps before the snapshot (default 0, or the session's)");
    cmd->add_option("--scale", args->scale, "PNG scale factor (device pixels per point)")->capture_default_str();
    cmd->add_option("--out", args->out, "output file; the extension picks the format")->required();
    cmd->callback([args] { runExport(*args); });
}

}  // namespace kvlens::cli
