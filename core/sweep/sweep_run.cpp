#include "core/sweep/sweep_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"
#include "core/study/needle_grid.h"
#include "core/read_file.h"
#include "core/model/model.h"
#include "core/policy/budget.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens::sweep {
namespace fs = std::filesystem;

namespace {

std::string hostName() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return {};
    return name;
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

std::vector<int64_t> encode(const Tokenizer& tok, std::string_view text, bool special) {
    std::vector<int64_t> ids;
    for (int32_t id : tok.encode(text, special)) ids.push_back(id);
    return ids;
}

std::vector<int64_t> textTokens(const SweepSpec& spec, const Tokenizer& tok) {
    return encode(tok, readRegularFile(spec.fidelityText, 64ull << 20), false);
}

double meanBudget(const PolicyTrace& p) {
    if (p.layers.empty()) return std::nan("");
    double sum = 0;
    for (const auto& l : p.layers) sum += static_cast<double>(l.budget);
    return sum / static_cast<double>(p.layers.size());
}

std::vector<CellResult> needleCells(const SweepSpec& spec, const Probe& probe, const LoadedModel& m,
                                    const std::atomic<bool>* cancel) {
    eval::NeedleGridOptions o;
    o.contexts = {probe.context};
    o.depths = {probe.depth};
    o.policies = spec.policies;
    o.budgets = spec.budgets;
    o.samples = 1;
    o.seed = probe.seed;
    o.maxNewTokens = spec.maxNewTokens;
    o.user = spec.userNeedle;
    const eval::NeedleGridResult g = eval::runNeedleGrid(m.model, m.tokenizer, o, {}, cancel);
    std::vector<CellResult> out;
    for (const auto& c : g.cells) {
        CellResult r;
        r.policy = c.policy;
        r.budget = c.budget;
        r.promptTokens = c.promptTokens;
        if (c.budget == "-") {
            r.budgetTokens = static_cast<double>(c.promptTokens);
        } else {
            const auto b = std::find_if(spec.budgets.begin(), spec.budgets.end(),
                                        [&](const BudgetSpec& s) { return s.text() == c.budget; });
            r.budgetTokens = static_cast<double>(std::min(resolveBudget(*b, c.promptTokens), c.promptTokens));
        }
        r.exact = c.exact;
        r.overlap = c.overlap;
        if (!c.answers.empty()) {
            r.answer = c.answers.front().answer;
            r.expected = c.answers.front().expected;
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<CellResult> fidelityCells(const SweepSpec& spec, const Probe& probe, const LoadedModel& m,
                                      const std::atomic<bool>* cancel) {
    if (!m.tokenizer) throw ArgumentError("the fidelity task needs the model's tokenizer.json");
    const std::vector<int64_t> prefix = encode(*m.tokenizer, "", true);  // what the tokenizer puts first (<bos>)
    const std::vector<int64_t> body = m.textTokens ? *m.textTokens : textTokens(spec, *m.tokenizer);
    const int64_t fromText = probe.context - static_cast<int64_t>(prefix.size());
    const int64_t need = fromText + spec.fidelitySteps;
    const auto have = static_cast<int64_t>(body.size());
    if (fromText < 1 || have < need)
        throw ArgumentError(spec.fidelityText.string() + " has " + std::to_string(have) + " tokens; context " +
                            std::to_string(probe.context) + " and " + std::to_string(spec.fidelitySteps) +
                            " steps need " + std::to_string(need));
    // The seed picks where in the text the window starts.
    const auto start = static_cast<int64_t>(splitmix64(probe.seed) % static_cast<uint64_t>(have - need + 1));
    SessionOptions so;
    so.prompt = prefix;
    so.prompt.insert(so.prompt.end(), body.begin() + start, body.begin() + start + fromText);
    so.continuation.assign(body.begin() + start + fromText, body.begin() + start + need);
    so.teacherForced = true;
    so.policies = spec.policies;
    so.tokenizer = m.tokenizer;
    std::vector<CellResult> out;
    const std::vector<BudgetSpec> budgets = spec.policies.empty() ? std::vector<BudgetSpec>{BudgetSpec{}} : spec.budgets;
    for (size_t bi = 0; bi < budgets.size(); ++bi) {
        so.budget = budgets[bi];
        Session session(m.model, so);
        session.setCancelFlag(cancel);
        std::shared_ptr<const Trace> trace = session.start();
        for (int64_t k = 0; k < spec.fidelitySteps; ++k) trace = session.step();
        for (size_t pi = bi == 0 ? 0 : 1; pi < trace->policies.size(); ++pi) {
            const PolicyTrace& p = trace->policies[pi];
            CellResult r;
            r.policy = pi == 0 ? fullCachePolicy().id : p.label;
            r.budget = pi == 0 ? "-" : budgets[bi].text();
            r.promptTokens = static_cast<int64_t>(so.prompt.size());
            r.budgetTokens = pi == 0 ? static_cast<double>(r.promptTokens) : meanBudget(p);
            r.kl = p.meanKl();
            r.top1 = p.top1Agreement();
            r.perplexity = p.perplexity();
            r.retainedMass = p.meanRetainedMass();
            r.outputCosine = p.meanOutputCosine();
            out.push_back(std::move(r));
        }
    }
    // The cells in probeCells order (full, then each budget's policies): already so.
    return out;
}

}  // namespace

ModelLoader folderLoader(const SweepSpec& spec) {
    return [spec](size_t index) {
        const fs::path& dir = spec.modelDirs.at(index);
        LoadedModel m;
        m.model = std::shared_ptr<const Model>(Model::load(dir, spec.run));
        const fs::path tok = dir / "tokenizer.json";
        if (fs::exists(tok)) m.tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromFile(tok));
        return m;
    };
}

ProbeResult runProbe(const SweepSpec& spec, const Probe& probe, const LoadedModel& model,
                     const std::atomic<bool>* cancel) {
    ProbeResult r;
    r.probe = probe;
    r.key = probe.key(spec);
    r.fingerprint = spec.fingerprint;
    r.host = hostName();
    const auto t0 = std::chrono::steady_clock::now();
    try {
        r.cells = probe.task == Task::Needle ? needleCells(spec, probe, model, cancel)
                                             : fidelityCells(spec, probe, model, cancel);
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception& e) {
        r.failed = true;
        r.error = e.what();
        r.cells.clear();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

ShardReport runShard(const SweepSpec& spec, const Shard& shard, const ModelLoader& load,
                     const ShardProgress& progress, const std::atomic<bool>* cancel) {
    const std::vector<Probe> pending = pendingProbes(spec, shard, readResults(spec));
    ShardReport report;
    report.pending = static_cast<int64_t>(pending.size());
    std::map<size_t, LoadedModel> models;
    std::map<size_t, std::string> loadErrors;
    for (size_t i = 0; i < pending.size(); ++i) {
        if (cancel && cancel->load()) {
            report.cancelled = true;
            break;
        }
        const Probe& p = pending[i];
        if (progress) progress(static_cast<int64_t>(i), report.pending, p.key(spec));
        ProbeResult r;
        if (!models.count(p.model) && !loadErrors.count(p.model)) {
            try {
                LoadedModel m = load(p.model);
                if (!spec.fidelityText.empty() && m.tokenizer)
                    m.textTokens = std::make_shared<const std::vector<int64_t>>(textTokens(spec, *m.tokenizer));
                models[p.model] = std::move(m);
            } catch (const std::exception& e) {
                loadErrors[p.model] = spec.modelDirs[p.model].string() + ": " + e.what();
            }
        }
        if (loadErrors.count(p.model)) {
            r.probe = p;
            r.key = p.key(spec);
            r.fingerprint = spec.fingerprint;
            r.failed = true;
            r.error = loadErrors[p.model];
        } else {
            try {
                r = runProbe(spec, p, models[p.model], cancel);
            } catch (const Cancelled&) {
                report.cancelled = true;
                break;
            }
        }
        appendResult(spec, shard, r);
        if (r.failed) {
            if (report.firstFailure.empty()) report.firstFailure = r.key + ": " + r.error;
            ++report.failed;
        } else {
            ++report.done;
        }
    }
    return report;
}

}  // namespace kvlens::sweep
