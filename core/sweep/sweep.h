#pragma once
// Sweeps: a grid of runs (models × tasks × contexts × needle depths × seeds,
// each with the full cache and every policy × budget) described by a sweep
// file (format "kvlens-sweep", version 1; docs/sweeps.md), split into shards
// that run anywhere — in this process, a local pool of processes, a Slurm
// job array — and write their results into the sweep's output folder.
//
// Words: a *cell* is one grid point (model, task, context, depth, seed,
// policy, budget) and one result. A *probe* is the cells that share model,
// task, context, depth and seed: one prompt, read by the full cache and every
// policy × budget in lockstep Sessions (as `kvlens-cli needle` does), so a
// probe's cells are computed together and written together. Shards split
// the probes, never a probe, so a cell's numbers do not depend on how the
// sweep was sharded. Torch-free: the GUI and the CLI read results through it.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/eval/needle.h"
#include "core/model/device.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"

namespace kvlens::eval {
struct NeedleGridResult;
}

namespace kvlens::sweep {

// The most shards a sweep splits into (the file's "shards", --shards).
constexpr int kMaxShards = 100000;

enum class Task { Needle, Fidelity };
const char* taskName(Task t);  // "needle" | "fidelity"

struct SweepSpec {
    std::filesystem::path file;          // the sweep file; relative paths in it resolve against its folder
    std::string name;                    // "name", default: the file's stem
    std::filesystem::path output;        // "output", resolved; default: <file stem>.sweep beside the file
    std::vector<std::string> models;     // "models": "bundled" or model folders, as written
    std::vector<std::filesystem::path> modelDirs;  // resolved ("bundled": the bundled model)
    std::vector<Task> tasks;             // "task": needle | fidelity | both
    std::vector<PolicyConfig> policies;  // "policies": evicting policies (the full cache is always run)
    std::vector<BudgetSpec> budgets;     // "budgets"
    std::vector<int64_t> contexts;       // "contexts": prompt lengths in tokens
    std::vector<double> depths;          // "depths": needle depths, percent in the file, fractions here
    std::vector<uint64_t> seeds;         // "seeds"
    int64_t maxNewTokens = 0;            // "needle.max_new_tokens" (0: the answer's tokens + 2)
    std::optional<eval::UserNeedle> userNeedle;  // "needle.haystack_file|needle|question|answer"
    std::filesystem::path fidelityText;  // "fidelity.text_file"
    int64_t fidelitySteps = 32;          // "fidelity.steps": teacher-forced tokens after the prompt
    RunSettings run;                     // "run.device|dtype|threads"
    int shards = 1;                      // "shards": how plan and submit split it by default (1 to kMaxShards)
    // A hash of everything besides the grid axes that changes a result (run
    // settings, needle and fidelity settings and texts, the models' files,
    // each TorchScript scorer's bytes): results written under another
    // fingerprint are stale and run again.
    std::string fingerprint;
};

// Reads and checks a sweep file; FormatError names the file and the field.
SweepSpec readSweepFile(const std::filesystem::path& file);
SweepSpec parseSweep(const nlohmann::json& j, const std::filesystem::path& file);

struct Probe {
    Task task = Task::Needle;
    size_t model = 0;  // index into SweepSpec::models
    int64_t context = 0;
    double depth = 0;  // needle only
    uint64_t seed = 0;
    std::string key(const SweepSpec& spec) const;  // "needle|bundled|512|0.25|1"
};

// The probes in their canonical order: model, task, context, depth, seed.
std::vector<Probe> probes(const SweepSpec& spec);
// The (policy, budget) of every cell of one probe: ("full", "-") first,
// then each budget's policies.
std::vector<std::pair<std::string, std::string>> probeCells(const SweepSpec& spec);
int64_t cellCount(const SweepSpec& spec);

struct Shard {
    int index = 0, count = 1;  // 0 ≤ index < count
    std::string text() const;  // "2/4"
};
// "I/N" (0-based I); ArgumentError naming `flag` otherwise.
Shard parseShard(const std::string& text, const std::string& flag = "--shard");
// The indices (into probes()) of a shard's probes: every count-th one from
// its index, so that each shard gets its share of every context length
// (contiguous blocks would give one shard all the long prompts). Shard sizes
// differ by at most one.
std::vector<size_t> shardProbes(size_t probeCount, const Shard& shard);

// One cell's result. Needle cells have exact/overlap/answer, fidelity cells
// the teacher-forced metrics; a metric that could not be computed is NaN
// (null in JSON, "n/a" or empty in text), never a number.
struct CellResult {
    std::string policy, budget;
    int64_t promptTokens = 0;
    double budgetTokens = 0;  // mean per-layer budget the run had (the prompt length for the full cache)
    // needle
    double exact = 0, overlap = 0;
    std::string answer, expected;
    // fidelity
    double kl = 0, top1 = 0, perplexity = 0, retainedMass = 0, outputCosine = 0;
};

struct ProbeResult {
    Probe probe;
    std::string key, fingerprint;
    bool failed = false;
    std::string error;  // why it failed
    std::vector<CellResult> cells;
    double seconds = 0;
    std::string host;
};

nlohmann::json toJson(const ProbeResult& r, const SweepSpec& spec);
// Throws FormatError naming `where` and the field.
ProbeResult probeResultFromJson(const nlohmann::json& j, const SweepSpec& spec, const std::string& where);

// OUTPUT/results/shard-I-of-N.jsonl: one JSON line per probe.
std::filesystem::path shardFile(const SweepSpec& spec, const Shard& shard);
// Every result in OUTPUT/results (any shard count), in file order; a file
// that is not a results file throws FormatError naming it and the line.
std::vector<ProbeResult> readResults(const SweepSpec& spec);
// Adds `result` to the shard's file: the file is written again whole to a
// temporary file and renamed into place (core/safe_file.h), so a reader
// or a killed writer sees the old results or the new ones, never half a probe.
void appendResult(const SweepSpec& spec, const Shard& shard, const ProbeResult& result);

struct SweepStatus {
    int64_t probes = 0, cells = 0;
    int64_t doneProbes = 0, doneCells = 0;
    std::vector<std::string> missing;  // keys of probes without a result
    std::vector<std::pair<std::string, std::string>> failed;  // key, error (failed and not done since)
    int64_t stale = 0;                 // results under another fingerprint or without every cell of the plan (ignored)
    int64_t foreign = 0;               // results of probes this sweep no longer has (ignored)
    bool complete() const { return doneProbes == probes; }
};
// `results` as readResults gives them: for each probe the first result that
// is done under the current fingerprint counts.
SweepStatus sweepStatus(const SweepSpec& spec, const std::vector<ProbeResult>& results);
// The probes of a shard that have no current result yet.
std::vector<Probe> pendingProbes(const SweepSpec& spec, const Shard& shard, const std::vector<ProbeResult>& results);
// The shards (of `count`) that still have a probe to run.
std::vector<int> shardsWithWork(const SweepSpec& spec, int count, const std::vector<ProbeResult>& results);

// The merged sweep: every done cell (with its axes), the probes missing, and
// per model the needle grid (seeds averaged, in the needle command's
// format) and the fidelity table.
struct MergedCell {
    Probe probe;
    CellResult cell;
};
struct Merged {
    std::vector<MergedCell> cells;  // canonical order
    SweepStatus status;
    nlohmann::json toJson(const SweepSpec& spec) const;  // format "kvlens-sweep-result", version 1
    std::string toCsv(const SweepSpec& spec) const;      // one row per cell
    // The needle cells of one model as a needle grid (empty cells when none).
    eval::NeedleGridResult needleGrid(const SweepSpec& spec, size_t model) const;
    bool hasTask(Task t, size_t model) const;
};
Merged mergeResults(const SweepSpec& spec, const std::vector<ProbeResult>& results);
// A merged.json read back (the GUI opens one without its sweep file): the
// cells, with Probe::model an index into `models` (the file's "models"), and
// the counts and missing/failed probes. Throws FormatError naming `where`.
Merged mergedFromJson(const nlohmann::json& j, const std::string& where, std::vector<std::string>* models = nullptr);

// Fidelity against budget, for the figure: one curve per policy and metric,
// x = the run's mean budget as a share of the prompt (%), y = the metric's
// mean over contexts and seeds at that budget.
struct FidelityCurve {
    std::string policy;
    std::vector<double> x, kl, top1, retainedMass;
};
std::vector<FidelityCurve> fidelityCurves(const Merged& merged, size_t model);

// A model's short name for titles and file names: its folder's name.
std::string modelName(const SweepSpec& spec, size_t model);

}  // namespace kvlens::sweep
