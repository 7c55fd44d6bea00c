#include "core/sweep/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json_error.h"
#include "core/study/needle_grid.h"
#include "core/io/json_fields.h"
#include "core/io/session_file.h"
#include "core/read_file.h"
#include "core/run/context_limit.h"
#include "core/study/needle_io.h"
#include "core/safe_file.h"
#include "core/paths.h"

namespace kvlens::sweep {
namespace fs = std::filesystem;
using nlohmann::json;

const char* taskName(Task t) { return t == Task::Needle ? "needle" : "fidelity"; }

namespace {

std::string number(double v) {
    char out[40];
    std::snprintf(out, sizeof out, "%.17g", v);
    return out;
}

std::string hex64(uint64_t h) {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
    return out;
}

uint64_t fnv1a(std::string_view bytes) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : bytes) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

// A model folder's fingerprint as a session file keeps it, or "unreadable"
// (a model that does not load fails its probes, naming the folder).
std::string modelDigest(const std::filesystem::path& dir) {
    try {
        return modelFingerprint(dir);
    } catch (const FormatError&) {
        return "unreadable";
    }
}

// NaN and infinities are null in JSON: never a number made of NaN.
json metric(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double metricFrom(const json& j, const char* name) {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) return std::nan("");
    return it->get<double>();
}

fs::path resolveAgainst(const fs::path& base, const std::string& p) {
    const fs::path path(p);
    return (path.is_absolute() ? path : base / path).lexically_normal();
}

// Each axis lists a value once, however it is spelled ("25%" and "25.0%",
// "snapkv" and "snapkv:window=32" at its default, "m" and "./m"): the
// same cells would run twice and be counted twice.
void refuseRepeats(const SweepSpec& s) {
    auto axis = [](const char* name, const auto& values, auto key) {
        std::set<std::string> seen;
        for (const auto& v : values)
            if (const std::string k = key(v); !seen.insert(k).second)
                throw ArgumentError("\"" + std::string(name) + "\" lists " + k + " twice (perhaps spelled differently)");
    };
    axis("contexts", s.contexts, [](int64_t c) { return std::to_string(c); });
    axis("depths", s.depths, [](double d) { return number(d * 100.0); });
    axis("seeds", s.seeds, [](uint64_t v) { return std::to_string(v); });
    axis("policies", s.policies, [](const PolicyConfig& p) { return p.spec(); });
    axis("budgets", s.budgets, [](const BudgetSpec& b) { return b.text(); });
    axis("models", s.modelDirs, [](const fs::path& d) { return fs::weakly_canonical(d).string(); });
}

}  // namespace

SweepSpec readSweepFile(const fs::path& file) {
    const std::string text = readRegularFile(file);
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw FormatError(file.string(), jsonErrorText(e.what()));
    }
    return parseSweep(j, file);
}

SweepSpec parseSweep(const json& j, const fs::path& file) {
    SweepSpec s;
    s.file = file;
    const fs::path base = file.has_parent_path() ? file.parent_path() : fs::path(".");
    try {
        if (!j.is_object()) throw ArgumentError("a sweep file is a JSON object");
        if (jsonField<std::string>(j, "", "format", "") != "kvlens-sweep")
            throw ArgumentError("\"format\" must be \"kvlens-sweep\"");
        if (jsonField<int>(j, "", "version", 0, true) != 1)
            throw ArgumentError("\"version\" " + j.at("version").dump() + " is not supported (this KVLens reads 1)");
        static const std::set<std::string> known{"format", "version", "name", "output", "models", "task",
                                                 "policies", "budgets", "contexts", "depths", "seeds", "needle",
                                                 "fidelity", "run", "shards"};
        for (const auto& [k, v] : j.items())
            if (!known.count(k)) throw ArgumentError("unknown field \"" + k + "\"");
        s.name = jsonField<std::string>(j, "", "name", file.stem().string());
        // The name reaches file names, logs and a Slurm script: a line break
        // there would end a directive and run the rest as a command.
        for (unsigned char c : s.name)
            if (c < 0x20 || c == 0x7f)
                throw ArgumentError("\"name\" holds a control character (such as a line break): expected one line of text");
        const std::string out = jsonField<std::string>(j, "", "output", file.stem().string() + ".sweep");
        if (out.empty()) throw ArgumentError("\"output\" is empty: expected a folder");
        s.output = resolveAgainst(base, out);
        s.models = jsonField<std::vector<std::string>>(j, "", "models", {"bundled"});
        if (s.models.empty()) throw ArgumentError("\"models\" is empty: expected \"bundled\" or model folders");
        for (const auto& m : s.models)
            s.modelDirs.push_back(m == "bundled" ? bundledModelDir() : resolveAgainst(base, m));
        const std::string task = jsonField<std::string>(j, "", "task", "needle");
        if (task == "needle") s.tasks = {Task::Needle};
        else if (task == "fidelity") s.tasks = {Task::Fidelity};
        else if (task == "both") s.tasks = {Task::Needle, Task::Fidelity};
        else throw ArgumentError("\"task\" is \"" + task + "\": expected needle, fidelity or both");
        for (const auto& p : jsonField<std::vector<std::string>>(j, "", "policies", {}, true)) {
            try {
                PolicyConfig c = parsePolicySpec(p);
                if (isFullCache(c)) continue;  // always run
                s.policies.push_back(std::move(c));
            } catch (const ArgumentError& e) {
                throw ArgumentError("\"policies\": " + std::string(e.what()));
            }
        }
        for (const auto& b : jsonField<std::vector<std::string>>(j, "", "budgets", {})) {
            try {
                s.budgets.push_back(b.find(',') != std::string::npos ? parseLayerBudgets(b) : parseBudget(b));
            } catch (const ArgumentError& e) {
                throw ArgumentError("\"budgets\": " + std::string(e.what()));
            }
        }
        if (!s.policies.empty() && s.budgets.empty()) throw ArgumentError("\"budgets\" is missing: the policies need a budget");
        if (s.policies.empty()) s.budgets.clear();
        s.contexts = jsonField<std::vector<int64_t>>(j, "", "contexts", {}, true);
        if (s.contexts.empty()) throw ArgumentError("\"contexts\" is empty: expected prompt lengths in tokens");
        for (int64_t c : s.contexts)
            if (c < 2) throw ArgumentError("\"contexts\": " + std::to_string(c) + " is not a prompt length (at least 2)");
        for (double d : jsonField<std::vector<double>>(j, "", "depths", {0, 25, 50, 75, 100})) {
            if (!(d >= 0 && d <= 100)) throw ArgumentError("\"depths\": " + number(d) + " is not a percentage in [0, 100]");
            s.depths.push_back(d / 100.0);
        }
        if (s.depths.empty()) throw ArgumentError("\"depths\" is empty");
        s.seeds = jsonField<std::vector<uint64_t>>(j, "", "seeds", {1});
        if (s.seeds.empty()) throw ArgumentError("\"seeds\" is empty");
        refuseRepeats(s);

        json fingerprint = json::object();
        const json needle = jsonField<json>(j, "", "needle", json::object());
        if (!needle.is_object()) throw ArgumentError("\"needle\" is not an object");
        s.maxNewTokens = jsonField<int64_t>(needle, "needle.", "max_new_tokens", 0);
        if (s.maxNewTokens < 0 || s.maxNewTokens > kMaxDecodeSteps)
            throw ArgumentError("\"needle.max_new_tokens\" is " + std::to_string(s.maxNewTokens) + ": expected 0 to " +
                                std::to_string(kMaxDecodeSteps));
        fingerprint["max_new_tokens"] = s.maxNewTokens;
        const std::string hay = jsonField<std::string>(needle, "needle.", "haystack_file", "");
        if (!hay.empty() || needle.contains("needle") || needle.contains("question") || needle.contains("answer")) {
            eval::UserNeedle u;
            if (hay.empty()) throw ArgumentError("\"needle.haystack_file\" is missing: a user needle needs it");
            u.haystack = readRegularFile(resolveAgainst(base, hay), 64ull << 20);
            u.needle = jsonField<std::string>(needle, "needle.", "needle", "", true);
            u.question = jsonField<std::string>(needle, "needle.", "question", "", true);
            u.answer = jsonField<std::string>(needle, "needle.", "answer", "", true);
            fingerprint["user"] = {hex64(fnv1a(u.haystack)), u.needle, u.question, u.answer};
            s.userNeedle = std::move(u);
        }
        const json fid = jsonField<json>(j, "", "fidelity", json::object());
        if (!fid.is_object()) throw ArgumentError("\"fidelity\" is not an object");
        s.fidelitySteps = jsonField<int64_t>(fid, "fidelity.", "steps", 32);
        if (s.fidelitySteps < 1 || s.fidelitySteps > kMaxDecodeSteps)
            throw ArgumentError("\"fidelity.steps\" is " + std::to_string(s.fidelitySteps) + ": expected 1 to " +
                                std::to_string(kMaxDecodeSteps));
        const std::string text = jsonField<std::string>(fid, "fidelity.", "text_file", "");
        const bool fidelity = std::find(s.tasks.begin(), s.tasks.end(), Task::Fidelity) != s.tasks.end();
        if (fidelity) {
            if (text.empty()) throw ArgumentError("\"fidelity.text_file\" is missing: the fidelity task reads a text");
            s.fidelityText = resolveAgainst(base, text);
            fingerprint["fidelity"] = {hex64(fnv1a(readRegularFile(s.fidelityText, 64ull << 20))), s.fidelitySteps};
        }
        const json run = jsonField<json>(j, "", "run", json::object());
        if (!run.is_object()) throw ArgumentError("\"run\" is not an object");
        s.run.device = jsonField<std::string>(run, "run.", "device", "auto");
        s.run.dtype = jsonField<std::string>(run, "run.", "dtype", "auto");
        s.run.threads = jsonField<int>(run, "run.", "threads", 1);
        checkThreads(s.run.threads, "\"run.threads\"");
        fingerprint["run"] = {s.run.device, s.run.dtype, s.run.threads};
        // The weights and every TorchScript scorer's bytes change results too.
        for (const auto& dir : s.modelDirs) fingerprint["models"].push_back(modelDigest(dir));
        for (const auto& p : s.policies)
            if (!p.info().file.empty()) fingerprint["scripts"][p.label()] = scriptFingerprint(p.info().file);
        s.shards = jsonField<int>(j, "", "shards", 1);
        if (s.shards < 1 || s.shards > kMaxShards)
            throw ArgumentError("\"shards\" is " + std::to_string(s.shards) + ": expected 1 to " + std::to_string(kMaxShards));
        s.fingerprint = hex64(fnv1a(fingerprint.dump()));
    } catch (const ArgumentError& e) {
        throw FormatError(file.string(), e.what());
    } catch (const FormatError&) {
        throw;
    }
    return s;
}

std::string Probe::key(const SweepSpec& spec) const {
    std::string k = std::string(taskName(task)) + "|" + spec.models[model] + "|" + std::to_string(context);
    if (task == Task::Needle) k += "|" + number(depth);
    return k + "|" + std::to_string(seed);
}

std::vector<Probe> probes(const SweepSpec& s) {
    std::vector<Probe> out;
    for (size_t m = 0; m < s.models.size(); ++m)
        for (Task t : s.tasks)
            for (int64_t c : s.contexts) {
                const std::vector<double> depths = t == Task::Needle ? s.depths : std::vector<double>{0};
                for (double d : depths)
                    for (uint64_t seed : s.seeds) out.push_back({t, m, c, d, seed});
            }
    return out;
}

std::vector<std::pair<std::string, std::string>> probeCells(const SweepSpec& s) {
    std::vector<std::pair<std::string, std::string>> out{{fullCachePolicy().id, "-"}};
    for (const auto& b : s.budgets)
        for (const auto& p : s.policies) out.emplace_back(p.label(), b.text());
    return out;
}

int64_t cellCount(const SweepSpec& s) { return static_cast<int64_t>(probes(s).size() * probeCells(s).size()); }

std::string Shard::text() const { return std::to_string(index) + "/" + std::to_string(count); }

Shard parseShard(const std::string& text, const std::string& flag) {
    const auto slash = text.find('/');
    auto bad = [&] { return ArgumentError(flag + ": '" + text + "' is not I/N (shard I of N, 0 <= I < N)"); };
    if (slash == std::string::npos) throw bad();
    try {
        size_t a = 0, b = 0;
        const std::string i = text.substr(0, slash), n = text.substr(slash + 1);
        const long index = std::stol(i, &a), count = std::stol(n, &b);
        if (a != i.size() || b != n.size() || count < 1 || index < 0 || index >= count || count > 100000) throw bad();
        return {static_cast<int>(index), static_cast<int>(count)};
    } catch (const std::logic_error&) {
        throw bad();
    }
}

std::vector<size_t> shardProbes(size_t n, const Shard& s) {
    std::vector<size_t> out;
    for (auto i = static_cast<size_t>(s.index); i < n; i += static_cast<size_t>(s.count)) out.push_back(i);
    return out;
}

namespace {

// One cell's fields, as result lines and merged.json both hold them: the
// needle task's or the fidelity task's metrics.
json cellJson(const CellResult& c, Task task) {
    json o{{"policy", c.policy}, {"budget", c.budget}, {"prompt_tokens", c.promptTokens},
           {"budget_tokens", metric(c.budgetTokens)}};
    if (task == Task::Needle) {
        o["exact"] = metric(c.exact);
        o["overlap"] = metric(c.overlap);
        o["answer"] = c.answer;
        o["expected"] = c.expected;
    } else {
        o["kl"] = metric(c.kl);
        o["top1"] = metric(c.top1);
        o["perplexity"] = metric(c.perplexity);
        o["retained_mass"] = metric(c.retainedMass);
        o["output_cosine"] = metric(c.outputCosine);
    }
    return o;
}

// A metric read back must lie where a run can put it (a result file is
// data from a shared folder: a forged or corrupted one is refused, naming
// the field, rather than merged); NaN (null) is a metric not computed.
void checkRange(double v, double lo, double hi, const char* name, const std::string& where) {
    if (std::isnan(v) || (v >= lo && v <= hi)) return;
    std::ostringstream text;
    text << "a cell's \"" << name << "\" is " << v << ": expected ";
    if (std::isinf(hi)) text << "at least " << lo;
    else text << lo << " to " << hi;
    throw FormatError(where, text.str() + " (or null)");
}

CellResult cellFromJson(const json& c, Task task, const std::string& where) {
    CellResult cell;
    cell.policy = c.at("policy").get<std::string>();
    cell.budget = c.at("budget").get<std::string>();
    cell.promptTokens = c.value("prompt_tokens", int64_t{0});
    cell.budgetTokens = metricFrom(c, "budget_tokens");
    cell.exact = metricFrom(c, "exact");
    cell.overlap = metricFrom(c, "overlap");
    cell.answer = c.value("answer", "");
    cell.expected = c.value("expected", "");
    cell.kl = metricFrom(c, "kl");
    cell.top1 = metricFrom(c, "top1");
    cell.perplexity = metricFrom(c, "perplexity");
    cell.retainedMass = metricFrom(c, "retained_mass");
    cell.outputCosine = metricFrom(c, "output_cosine");
    constexpr double kSlack = 1e-6, kAny = std::numeric_limits<double>::infinity();
    if (cell.promptTokens < 0) throw FormatError(where, "a cell's \"prompt_tokens\" is negative");
    checkRange(cell.budgetTokens, 0, kAny, "budget_tokens", where);
    if (task == Task::Needle) {
        checkRange(cell.exact, 0, 1, "exact", where);
        checkRange(cell.overlap, 0, 1, "overlap", where);
    } else {
        checkRange(cell.kl, -kSlack, kAny, "kl", where);
        checkRange(cell.top1, 0, 1, "top1", where);
        checkRange(cell.perplexity, 1 - kSlack, kAny, "perplexity", where);
        checkRange(cell.retainedMass, 0, 1 + kSlack, "retained_mass", where);
        checkRange(cell.outputCosine, -1 - kSlack, 1 + kSlack, "output_cosine", where);
    }
    return cell;
}

Task taskFrom(const json& j, const std::string& where) {
    const std::string task = j.at("task").get<std::string>();
    if (task != "needle" && task != "fidelity") throw FormatError(where, "\"task\" is \"" + task + "\"");
    return task == "needle" ? Task::Needle : Task::Fidelity;
}

}  // namespace

json toJson(const ProbeResult& r, const SweepSpec& spec) {
    json cells = json::array();
    for (const auto& c : r.cells) cells.push_back(cellJson(c, r.probe.task));
    json j{{"probe", r.key},
           {"task", taskName(r.probe.task)},
           {"model", spec.models[r.probe.model]},
           {"context", r.probe.context},
           {"seed", r.probe.seed},
           {"fingerprint", r.fingerprint},
           {"status", r.failed ? "failed" : "done"},
           {"seconds", r.seconds},
           {"host", r.host}};
    if (r.probe.task == Task::Needle) j["depth"] = r.probe.depth;
    if (r.failed) j["error"] = r.error;
    else j["cells"] = std::move(cells);
    return j;
}

ProbeResult probeResultFromJson(const json& j, const SweepSpec& spec, const std::string& where) {
    try {
        ProbeResult r;
        r.key = j.at("probe").get<std::string>();
        r.probe.task = taskFrom(j, where);
        const std::string model = j.at("model").get<std::string>();
        const auto m = std::find(spec.models.begin(), spec.models.end(), model);
        r.probe.model = static_cast<size_t>(m - spec.models.begin());  // == size(): not this sweep's model
        r.probe.context = j.at("context").get<int64_t>();
        r.probe.seed = j.at("seed").get<uint64_t>();
        r.probe.depth = j.value("depth", 0.0);
        r.fingerprint = j.at("fingerprint").get<std::string>();
        const std::string status = j.at("status").get<std::string>();
        if (status != "done" && status != "failed") throw FormatError(where, "\"status\" is \"" + status + "\"");
        r.failed = status == "failed";
        r.error = j.value("error", "");
        r.seconds = j.value("seconds", 0.0);
        r.host = j.value("host", "");
        for (const auto& c : j.value("cells", json::array())) r.cells.push_back(cellFromJson(c, r.probe.task, where));
        // The key names the probe; fields that say another are a forged or
        // garbled line (a result of a model this sweep no longer has is
        // only ignored, as foreign).
        if (r.probe.model < spec.models.size() && r.key != r.probe.key(spec))
            throw FormatError(where, "\"probe\" is \"" + r.key + "\" but its fields are those of \"" + r.probe.key(spec) + "\"");
        return r;
    } catch (const json::exception& e) {
        throw FormatError(where, jsonErrorText(e.what()));
    }
}

fs::path shardFile(const SweepSpec& spec, const Shard& shard) {
    char name[64];
    std::snprintf(name, sizeof name, "shard-%04d-of-%04d.jsonl", shard.index, shard.count);
    return spec.output / "results" / name;
}

std::vector<ProbeResult> readResults(const SweepSpec& spec) {
    std::vector<ProbeResult> out;
    const fs::path dir = spec.output / "results";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".jsonl" && e.path().filename().string().rfind("shard-", 0) == 0) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
        std::istringstream in(readRegularFile(f));
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            if (line.empty()) continue;
            const std::string where = f.string() + " line " + std::to_string(n);
            json j;
            try {
                j = json::parse(line);
            } catch (const json::exception& e) {
                throw FormatError(where, "not a result line: " + jsonErrorText(e.what()));
            }
            out.push_back(probeResultFromJson(j, spec, where));
        }
    }
    return out;
}

void appendResult(const SweepSpec& spec, const Shard& shard, const ProbeResult& result) {
    const fs::path file = shardFile(spec, shard);
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    if (ec) throw IoError("cannot create " + file.parent_path().string() + ": " + ec.message());
    std::string text;
    if (fs::exists(file)) text = readRegularFile(file);
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += toJson(result, spec).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    writeFileAtomically(file, text);
}

namespace {

// Whether a result holds every cell the plan asks of its probe (a policy or
// a budget added to a finished sweep's file makes its results incomplete).
bool holdsEveryCell(const ProbeResult& r, const std::vector<std::pair<std::string, std::string>>& cells) {
    std::set<std::pair<std::string, std::string>> held;
    for (const auto& c : r.cells) held.emplace(c.policy, c.budget);
    return std::all_of(cells.begin(), cells.end(), [&](const auto& c) { return held.count(c) > 0; });
}

// Whether a result counts for the current plan: done, under its
// fingerprint, with every cell.
bool counts(const SweepSpec& spec, const ProbeResult& r, const std::vector<std::pair<std::string, std::string>>& cells) {
    return !r.failed && r.fingerprint == spec.fingerprint && holdsEveryCell(r, cells);
}

// For each probe key, the result that counts: the first that does.
std::map<std::string, const ProbeResult*> current(const SweepSpec& spec, const std::vector<ProbeResult>& results) {
    const auto cells = probeCells(spec);
    std::map<std::string, const ProbeResult*> out;
    for (const auto& r : results)
        if (counts(spec, r, cells) && !out.count(r.key)) out[r.key] = &r;
    return out;
}

}  // namespace

SweepStatus sweepStatus(const SweepSpec& spec, const std::vector<ProbeResult>& results) {
    SweepStatus st;
    const auto all = probes(spec);
    const auto cells = probeCells(spec);
    const auto perProbe = static_cast<int64_t>(cells.size());
    st.probes = static_cast<int64_t>(all.size());
    st.cells = st.probes * perProbe;
    const auto done = current(spec, results);
    std::set<std::string> keys;
    for (const auto& p : all) {
        const std::string k = p.key(spec);
        keys.insert(k);
        if (done.count(k)) {
            ++st.doneProbes;
            st.doneCells += perProbe;
        } else {
            st.missing.push_back(k);
        }
    }
    std::map<std::string, std::string> failed;
    for (const auto& r : results) {
        if (!keys.count(r.key)) ++st.foreign;
        else if (r.fingerprint != spec.fingerprint || (!r.failed && !holdsEveryCell(r, cells))) ++st.stale;
        else if (r.failed && !done.count(r.key)) failed[r.key] = r.error;
    }
    st.failed.assign(failed.begin(), failed.end());
    return st;
}

std::vector<Probe> pendingProbes(const SweepSpec& spec, const Shard& shard, const std::vector<ProbeResult>& results) {
    const auto all = probes(spec);
    const auto done = current(spec, results);
    std::vector<Probe> out;
    for (size_t i : shardProbes(all.size(), shard))
        if (!done.count(all[i].key(spec))) out.push_back(all[i]);
    return out;
}

std::vector<int> shardsWithWork(const SweepSpec& spec, int count, const std::vector<ProbeResult>& results) {
    std::vector<int> out;
    for (int i = 0; i < count; ++i)
        if (!pendingProbes(spec, {i, count}, results).empty()) out.push_back(i);
    return out;
}

Merged mergeResults(const SweepSpec& spec, const std::vector<ProbeResult>& results) {
    Merged m;
    m.status = sweepStatus(spec, results);
    const auto done = current(spec, results);
    for (const auto& p : probes(spec)) {
        const auto it = done.find(p.key(spec));
        if (it == done.end()) continue;
        for (const auto& c : it->second->cells) m.cells.push_back({p, c});
    }
    return m;
}

Merged mergedFromJson(const json& j, const std::string& where, std::vector<std::string>* modelsOut) {
    try {
        if (j.value("format", "") != "kvlens-sweep-result") throw FormatError(where, "\"format\" is not \"kvlens-sweep-result\"");
        if (j.at("version").get<int>() != 1)
            throw FormatError(where, "version " + j.at("version").dump() + " is not supported (this KVLens reads 1)");
        const auto models = j.at("models").get<std::vector<std::string>>();
        Merged m;
        m.status.cells = j.at("cells_total").get<int64_t>();
        m.status.doneCells = j.at("cells_done").get<int64_t>();
        m.status.missing = j.value("missing_probes", std::vector<std::string>{});
        for (const auto& f : j.value("failed_probes", json::array()))
            m.status.failed.emplace_back(f.at("probe").get<std::string>(), f.at("error").get<std::string>());
        for (const auto& c : j.at("cells")) {
            MergedCell mc;
            mc.probe.task = taskFrom(c, where);
            const auto it = std::find(models.begin(), models.end(), c.at("model").get<std::string>());
            if (it == models.end()) throw FormatError(where, "a cell's model " + c.at("model").dump() + " is not in \"models\"");
            mc.probe.model = static_cast<size_t>(it - models.begin());
            mc.probe.context = c.at("context").get<int64_t>();
            mc.probe.seed = c.at("seed").get<uint64_t>();
            mc.probe.depth = c.value("depth", 0.0);
            mc.cell = cellFromJson(c, mc.probe.task, where);
            m.cells.push_back(std::move(mc));
        }
        std::set<std::string> done;
        for (const auto& mc : m.cells)
            done.insert(std::string(taskName(mc.probe.task)) + "|" + std::to_string(mc.probe.model) + "|" +
                        std::to_string(mc.probe.context) + "|" + number(mc.probe.depth) + "|" + std::to_string(mc.probe.seed));
        m.status.doneProbes = static_cast<int64_t>(done.size());
        m.status.probes = m.status.doneProbes + static_cast<int64_t>(m.status.missing.size());
        if (modelsOut) *modelsOut = models;
        return m;
    } catch (const json::exception& e) {
        throw FormatError(where, e.what());
    }
}

std::string modelName(const SweepSpec& spec, size_t model) {
    const fs::path& d = spec.modelDirs[model];
    std::string name = d.filename().string();
    if (name.empty()) name = d.parent_path().filename().string();
    return name;
}

bool Merged::hasTask(Task t, size_t model) const {
    return std::any_of(cells.begin(), cells.end(),
                       [&](const MergedCell& c) { return c.probe.task == t && c.probe.model == model; });
}

eval::NeedleGridResult Merged::needleGrid(const SweepSpec& spec, size_t model) const {
    eval::NeedleGridResult g;
    g.model = modelName(spec, model);
    g.options.contexts = spec.contexts;
    g.options.depths = spec.depths;
    g.options.policies = spec.policies;
    g.options.budgets = spec.budgets;
    g.options.samples = static_cast<int64_t>(spec.seeds.size());
    g.options.seed = spec.seeds.front();
    g.options.maxNewTokens = spec.maxNewTokens;
    g.options.user = spec.userNeedle;
    for (int64_t ctx : spec.contexts)
        for (double d : spec.depths)
            for (const auto& [policy, budget] : probeCells(spec)) {
                eval::NeedleCell cell{ctx, d, policy, budget};
                for (const auto& mc : cells) {
                    const Probe& p = mc.probe;
                    if (p.task != Task::Needle || p.model != model || p.context != ctx || p.depth != d ||
                        mc.cell.policy != policy || mc.cell.budget != budget)
                        continue;
                    const double n = static_cast<double>(cell.answers.size());
                    cell.exact = (cell.exact * n + mc.cell.exact) / (n + 1);
                    cell.overlap = (cell.overlap * n + mc.cell.overlap) / (n + 1);
                    cell.promptTokens = mc.cell.promptTokens;
                    cell.answers.push_back({p.seed, mc.cell.answer, mc.cell.expected, mc.cell.exact == 1.0, mc.cell.overlap});
                }
                if (!cell.answers.empty()) g.cells.push_back(std::move(cell));
            }
    return g;
}

json Merged::toJson(const SweepSpec& spec) const {
    json out = json::array();
    for (const auto& mc : cells) {
        json c = cellJson(mc.cell, mc.probe.task);
        c["model"] = spec.models[mc.probe.model];
        c["task"] = taskName(mc.probe.task);
        c["context"] = mc.probe.context;
        c["seed"] = mc.probe.seed;
        if (mc.probe.task == Task::Needle) c["depth"] = mc.probe.depth;
        out.push_back(std::move(c));
    }
    json needle = json::object();
    for (size_t m = 0; m < spec.models.size(); ++m)
        if (hasTask(Task::Needle, m)) needle[spec.models[m]] = needleGridToJson(needleGrid(spec, m));
    json failed = json::array();
    for (const auto& [k, e] : status.failed) failed.push_back({{"probe", k}, {"error", e}});
    return {{"format", "kvlens-sweep-result"},
            {"version", 1},
            {"name", spec.name},
            {"models", spec.models},
            {"fingerprint", spec.fingerprint},
            {"cells_total", status.cells},
            {"cells_done", status.doneCells},
            {"complete", status.complete()},
            {"missing_probes", status.missing},
            {"failed_probes", failed},
            {"cells", out},
            {"needle_grids", needle}};
}

std::string Merged::toCsv(const SweepSpec& spec) const {
    std::ostringstream out;
    out << "model,task,context,depth,seed,policy,budget,prompt_tokens,budget_tokens,exact,overlap,kl,top1,perplexity,"
           "retained_mass,output_cosine\n";
    // Empty where a metric does not apply or could not be computed (NaN).
    auto num = [](double v) { return std::isfinite(v) ? number(v) : std::string(); };
    for (const auto& mc : cells) {
        const bool needle = mc.probe.task == Task::Needle;
        const CellResult& c = mc.cell;
        out << '"' << spec.models[mc.probe.model] << "\"," << taskName(mc.probe.task) << ',' << mc.probe.context << ','
            << (needle ? number(mc.probe.depth) : "") << ',' << mc.probe.seed << ",\"" << c.policy << "\",\"" << c.budget
            << "\"," << c.promptTokens << ',' << num(c.budgetTokens) << ',' << (needle ? num(c.exact) : "") << ','
            << (needle ? num(c.overlap) : "") << ',' << (needle ? "" : num(c.kl)) << ',' << (needle ? "" : num(c.top1))
            << ',' << (needle ? "" : num(c.perplexity)) << ',' << (needle ? "" : num(c.retainedMass)) << ','
            << (needle ? "" : num(c.outputCosine)) << "\n";
    }
    return out.str();
}

std::vector<FidelityCurve> fidelityCurves(const Merged& merged, size_t model) {
    // policy -> budget text -> sums
    struct Sum {
        double x = 0, kl = 0, top1 = 0, mass = 0;
        int n = 0, nKl = 0, nTop1 = 0, nMass = 0;
    };
    std::vector<std::string> order;
    std::map<std::string, std::map<std::string, Sum>> sums;
    for (const auto& mc : merged.cells) {
        if (mc.probe.task != Task::Fidelity || mc.probe.model != model || mc.cell.budget == "-") continue;
        if (!sums.count(mc.cell.policy)) order.push_back(mc.cell.policy);
        Sum& s = sums[mc.cell.policy][mc.cell.budget];
        const CellResult& c = mc.cell;
        if (!(std::isfinite(c.budgetTokens) && c.promptTokens > 0)) continue;
        s.x += 100.0 * std::min(1.0, c.budgetTokens / static_cast<double>(c.promptTokens));
        ++s.n;
        if (std::isfinite(c.kl)) s.kl += c.kl, ++s.nKl;
        if (std::isfinite(c.top1)) s.top1 += c.top1, ++s.nTop1;
        if (std::isfinite(c.retainedMass)) s.mass += c.retainedMass, ++s.nMass;
    }
    std::vector<FidelityCurve> out;
    const double nan = std::nan("");
    for (const auto& policy : order) {
        std::vector<std::pair<double, const Sum*>> points;
        for (const auto& [budget, s] : sums[policy])
            if (s.n > 0) points.emplace_back(s.x / s.n, &s);
        std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        FidelityCurve c;
        c.policy = policy;
        for (const auto& [x, s] : points) {
            c.x.push_back(x);
            c.kl.push_back(s->nKl ? s->kl / s->nKl : nan);
            c.top1.push_back(s->nTop1 ? s->top1 / s->nTop1 : nan);
            c.retainedMass.push_back(s->nMass ? s->mass / s->nMass : nan);
        }
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace kvlens::sweep
