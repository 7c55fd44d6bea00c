// The policy registry (POLICIES.md "The policies" and "Parameter names") and
// the `--policy id:k=v,...` parser. Values are stored normalised ("0.2",
// "true", "0,1") so that a config compares equal to its defaults and its
// label() parses back to the same config.
#include "core/policy/policy_info.h"

#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/policy/param_default.h"
#include "core/policy/text_util.h"

namespace kvlens {
namespace {

using Type = ParamSpec::Type;
using text::parseInt;
using text::parseReal;
using text::split;
using text::trimmed;

ParamSpec intParam(std::string name, std::string def, double lo, double hi, std::string help) {
    return {std::move(name), Type::Int, std::move(def), lo, hi, {}, std::move(help)};
}
ParamSpec realParam(std::string name, std::string def, double lo, double hi, std::string help) {
    return {std::move(name), Type::Real, std::move(def), lo, hi, {}, std::move(help)};
}
ParamSpec choiceParam(std::string name, std::string def, std::vector<std::string> choices, std::string help) {
    return {std::move(name), Type::Choice, std::move(def), 0, 0, std::move(choices), std::move(help)};
}

// Upper bound for counts of tokens: far above any context a laptop runs,
// low enough that budgets and sums of them never overflow.
constexpr double kMaxTokens = 1e7;

// Defaults of the parameters every policy has; they differ per policy so
// that e.g. pyramidkv is SnapKV scoring with alloc=pyramid.
struct CommonDefaults {
    const char* schedule;
    const char* alloc = "uniform";
    const char* heads = "uniform";
    const char* alpha = "0";
};

// Appends the parameters shared by every policy: when it acts, how GQA
// groups reduce, and the allocators that compose with any scorer.
std::vector<ParamSpec> withCommon(std::vector<ParamSpec> own, const CommonDefaults& d) {
    own.push_back(choiceParam("schedule", d.schedule, {"every_step", "prefill_once", "every_n", "prefill_then_step"},
                              "when the policy trims: every token, once after the prompt, every n tokens, or once "
                              "after the prompt and then every decode step"));
    own.push_back(intParam("n", "1", 1, kMaxTokens, "trim every n tokens (schedule=every_n)"));
    own.push_back(choiceParam("gqa", "mean", {"mean", "max", "sum"},
                              "how the query heads of a KV group combine their scores"));
    own.push_back(choiceParam("alloc", d.alloc, {"uniform", "pyramid"},
                              "per-layer budgets: the same everywhere, or PyramidKV's schedule"));
    own.push_back(realParam("beta", "20", 1, 1e6, "PyramidKV's beta: the top layer keeps about b/beta"));
    own.push_back(choiceParam("heads", d.heads, {"uniform", "adaptive"},
                              "per-head budgets: the same for every KV head, or Ada-KV's allocation"));
    own.push_back(realParam("alpha", d.alpha, 0, 1,
                            "adaptive heads: share of the scored budget each head keeps for itself"));
    own.push_back({"critical", Type::Bool, "false", 0, 0, {},
                   "CriticalKV: after a first stage by score, rank the rest by (score + 1e-4) x |W_O v|"});
    own.push_back(realParam("first_stage", "0.5", 0, 1, "CriticalKV: share of the scored budget kept by score alone"));
    own.push_back(choiceParam("select", "budget", {"budget", "threshold"},
                              "budget: keep the best entries up to the budget; threshold: keep every entry scoring "
                              "at least `threshold` (the budget only sizes sinks/window/recent)"));
    own.push_back(realParam("threshold", "0", -1e30, 1e30,
                            "select=threshold: entries scoring below this are evicted (in the policy's score units)"));
    own.push_back(intParam("chunk_length", "1", 1, 4096,
                           "ChunkKV: keep whole chunks of this many positions by their mean score over the KV heads "
                           "(1: token by token)"));
    return own;
}

// The observation window of the policies that score by their last queries
// (the SnapKV family, R-KV, CAKE).
ParamSpec windowParam(const char* def) {
    return intParam("window", def, 1, kMaxTokens, "observation window: the last W queries, whose keys are always kept");
}

std::vector<ParamSpec> snapParams(std::vector<ParamSpec> extra = {}) {
    std::vector<ParamSpec> p = {
        windowParam("32"),
        intParam("kernel", "7", 1, 1001, "pooling kernel along the keys (stride 1, padding ignored)"),
        choiceParam("pool", "max", {"max", "avg"}, "pooling of the window's attention along the keys"),
    };
    p.insert(p.end(), extra.begin(), extra.end());
    return p;
}

// What a policy reads besides its parameters: captured attention, or the
// keys and values (gathered only for the policies that score from them).
enum Reads { Nothing = 0, Attention = 1, Keys = 2 };

PolicyInfo info(std::string id, std::string name, std::string ref, std::string summary, Schedule s, int reads,
                std::vector<ParamSpec> params) {
    return {std::move(id), std::move(name), std::move(ref), std::move(summary), s, (reads & Attention) != 0,
            (reads & Keys) != 0, false, std::move(params)};
}

PolicyInfo sessionScored(PolicyInfo p, PolicyInfo::Preparation preparation) {
    p.sessionScored = true;
    p.hindsight = preparation == PolicyInfo::Preparation::FutureAttention;
    p.preparation = preparation;
    return p;
}

PolicyInfo calibrated(PolicyInfo p) {
    p.preparation = PolicyInfo::Preparation::CalibrationQueries;
    return p;
}

PolicyInfo budgetFree(PolicyInfo p) {
    p.budgetFree = true;
    return p;
}

// SPEC's overhead target re-stated for a rule that costs more by its
// definition (docs/performance.md, "Targets per policy", says why for each).
PolicyInfo costlier(PolicyInfo p, double stepTarget, double promptShareTarget) {
    p.stepTarget = stepTarget;
    p.promptShareTarget = promptShareTarget;
    return p;
}

PolicyInfo referenceInfo(std::vector<ParamSpec> params) {
    PolicyInfo full = info("full", "Full cache", "-", "keep everything (the reference for every metric)",
                           Schedule::PrefillOnce, Nothing, std::move(params));
    full.fullCache = true;
    return full;
}

// The table of built-in policies, one entry each (each one's maker is in its
// own file, core/policy/<id>.cpp: factory.h BuiltinMaker), in four groups.
const Schedule every = Schedule::EveryStep, prefill = Schedule::PrefillOnce, prefillThenStep = Schedule::PrefillThenStep;
const CommonDefaults onEvery{"every_step"}, onPrefill{"prefill_once"}, onPrefillThenStep{"prefill_then_step"};

ParamSpec sinksParam() { return intParam("sinks", "4", 0, kMaxTokens, "attention sinks: the first S tokens, always kept"); }

// The reference, the position rules and the attention-driven online policies.
std::vector<PolicyInfo> baselinePolicies() {
    const auto sinks = sinksParam();
    const auto tau = realParam("tau", "1", 0, 1e6, "a key is used when its attention is at least tau/n");
    return {
        referenceInfo(withCommon({}, {"prefill_once"})),
        info("window", "Sliding window", "FIFO", "keep the last B tokens", every, Nothing, withCommon({}, onEvery)),
        info("streaming", "StreamingLLM", "Xiao et al. 2023, mit-han-lab/streaming-llm",
             "keep S sinks + the last B-S tokens", every, Nothing,
             withCommon({sinks, {"rerotate", Type::Bool, "false", 0, 0, {}, "re-rotate kept keys to their cache index"}},
                        onEvery)),
        info("random", "Random", "seeded baseline", "keep a seeded uniform sample of B tokens (plus a window)", every,
             Nothing,
             withCommon({intParam("seed", "0", 0, 4294967295.0, "random seed"),
                         intParam("window", "0", 0, kMaxTokens, "the last W tokens are always kept")},
                        onEvery)),
        costlier(info("lru", "LRU", "least recently used",
             "keep the B keys used most recently (attention >= tau/n)", every, Attention, withCommon({tau}, onEvery)), 1.15, 0.02),
        costlier(info("lfu", "LFU", "least frequently used", "keep the B keys used most often (attention >= tau/n)", every,
             Attention, withCommon({tau}, onEvery)), 1.15, 0.02),
        info("h2o", "H2O", "Zhang et al., NeurIPS 2023, FMInference/H2O",
             "keep the last `recent` tokens + the top heavy hitters by accumulated attention", prefillThenStep, Attention,
             withCommon({intParam("recent", "B/2", 0, kMaxTokens, "recent tokens always kept (default B/2)")},
                        onPrefillThenStep)),
        info("tova", "TOVA", "Oren et al. 2024, schwartz-lab-NLP/TOVA",
             "keep the top B by the current query's attention, averaged over all heads; one set per layer",
             prefillThenStep, Attention, withCommon({}, onPrefillThenStep))
    };
}

// The SnapKV family: pooled attention of an observation window of queries.
std::vector<PolicyInfo> windowScoredPolicies() {
    const auto sinks = sinksParam();
    return {
        info("snapkv", "SnapKV", "Li et al. 2024, FasterDecoding/SnapKV",
             "pooled attention of the last W prompt queries; keep the top B-W + the window", prefill, Keys,
             withCommon(snapParams(), onPrefill)),
        info("pyramidkv", "PyramidKV", "Cai et al. 2024, Zefan-Cai/KVCache-Factory",
             "SnapKV scoring with budgets decreasing from the lowest layer to the top", prefill, Keys,
             withCommon(snapParams(), {"prefill_once", "pyramid"})),
        info("adakv", "Ada-KV", "Feng et al. 2024, FFY0/AdaKV; kvpress AdaKVPress",
             "SnapKV scores; per-head budgets from a layer-wide top-k with a per-head floor", prefill, Keys,
             withCommon(snapParams(), {"prefill_once", "uniform", "adaptive", "0.2"})),
        costlier(info("andpro", "AnDPro", "Geng et al., NeurIPS 2025, MIRALab-USTC/LLM-AnDPro",
             "project each token's attention output onto the window's anchor direction; global top-k", prefill, Keys,
             withCommon(snapParams({sinks, intParam("chunk", "1", 1, 4096, "score chunks of this many tokens")}),
                        {"prefill_once", "uniform", "adaptive", "0"})), 1.10, 0.04)
    };
}

// Scored from the keys, values and queries themselves.
std::vector<PolicyInfo> keyScoredPolicies() {
    const auto sinks = sinksParam();
    return {
        info("knorm", "Key norm", "Devoto et al., EMNLP 2024", "keep the B keys with the lowest L2 norm", prefill,
             Keys,
             withCommon({{"skip_layers", Type::IntList, "0,1", 0, 1e5, {}, "layers that keep everything"}},
                        onPrefill)),
        info("keydiff", "KeyDiff", "Park et al. 2025, arXiv 2504.15364; kvpress KeyDiffPress",
             "keep the B keys least similar to the mean direction of the head's keys", prefill, Keys,
             withCommon({}, onPrefill)),
        info("cur", "CUR", "kvpress CURPress",
             "keep the entries with the largest share of their head's key x value energy (block-normalised)", prefill,
             Keys,
             withCommon({sinks,
                         intParam("local_window", "16", 0, kMaxTokens,
                                  "norms shared out within blocks of this many entries (0: over the whole head)"),
                         choiceParam("leverage", "kv_product", {"kv_product", "key", "value", "kv_avg"},
                                     "what scores an entry: key energy x value energy, key, value, or their mean")},
                        onPrefill)),
        costlier(info("lagkv", "LagKV", "Liang et al. 2025, AI-Lab-China-Merchants-Bank/LagKV; kvpress LagKVPress",
             "rank entries within partitions of `lag` by how they stand out against the next partition's range",
             prefill, Keys,
             withCommon({sinks, intParam("lag", "128", 1, kMaxTokens, "partition length (lag) in entries"),
                         {"cross", Type::Bool, "false", 0, 0, {},
                          "compare the softmaxed scores across partitions instead of ranks within each"}},
                        onPrefill)), 1.10, 0.06),
        costlier(info("rkv", "R-KV", "Cai et al. 2025, Zefan-Cai/R-KV",
             "importance (pooled window attention) minus redundancy (key cosine similarity); keep the top B-W + "
             "the window",
             prefill, Keys,
             withCommon({windowParam("8"),
                         intParam("kernel", "7", 1, 1001, "max-pooling kernel of the importance along the keys"),
                         realParam("lambda", "0.07", 0, 1, "weight of importance against redundancy")},
                        onPrefill)), 1.10, 0.10),
        costlier(calibrated(info("qfilter", "Q-Filters", "Godey et al. 2025, NathanGodey/qfilters; kvpress QFilterPress",
             "keep the keys that project most on the main direction of the head's prompt queries", prefill, Keys,
             withCommon({intParam("samples", "3000", 1, kMaxTokens,
                                  "prompt queries per head the filter is computed from (evenly spaced)"),
                         intParam("window", "0", 0, kMaxTokens, "the last W tokens are always kept")},
                        onPrefill))), 1.10, 0.08),
        costlier(info("expected_attention", "Expected Attention", "Devoto et al. 2025; kvpress ExpectedAttentionPress",
             "keep the keys the coming queries are expected to attend to (prompt query statistics rotated to the "
             "next positions), times the value norm",
             prefill, Keys,
             withCommon({sinks, intParam("n_future", "512", 1, 1e6, "future positions the query statistics are rotated over"),
                         {"covariance", Type::Bool, "true", 0, 0, {}, "add the queries' covariance term kᵀΣk/(2d)"},
                         {"vnorm", Type::Bool, "true", 0, 0, {}, "multiply by the value's L2 norm"},
                         realParam("epsilon", "0", 0, 1e6, "added to the expected attention before the value norm")},
                        onPrefill)), 1.10, 0.10),
        costlier(info("cake", "CAKE", "Qin et al., ICLR 2025, antgroup/cakekv",
             "window attention's mean + gamma x variance over the window queries, pooled; layer budgets by each "
             "layer's attention entropy and variance",
             prefill, Keys,
             withCommon({windowParam("32"),
                         intParam("kernel", "5", 1, 1001, "pooling kernel along the keys (stride 1, padding ignored)"),
                         choiceParam("pool", "avg", {"max", "avg"}, "pooling of the scores along the keys"),
                         realParam("gamma", "200", 0, 1e9, "weight of the attention's variance over the window queries"),
                         realParam("tau1", "1", 1e-3, 1e3, "layer preference: entropy to the power 1/tau1"),
                         realParam("tau2", "1", 1e-3, 1e3, "layer preference: variance to the power 1/tau2"),
                         {"layer_budgets", Type::Bool, "true", 0, 0, {},
                          "share the layers' budgets out by preference (prefill schedules); false: the alloc "
                          "parameter's"}},
                        onPrefill)), 1.10, 0.12),
        costlier(budgetFree(info("duo", "DuoAttention (on the fly)",
                        "Xiao et al. 2024, mit-han-lab/duo-attention; kvpress DuoAttentionPress",
                        "the KV heads that look least far back stream (sinks + recent), the others keep everything; "
                        "the budget does not apply",
                        prefill, Keys,
                        withCommon({intParam("sinks", "128", 0, kMaxTokens, "a streaming head's first entries kept"),
                                    intParam("recent", "256", 0, kMaxTokens, "a streaming head's newest entries kept"),
                                    realParam("ratio", "0.5", 0, 1,
                                              "share of all KV heads (every layer) made streaming heads"),
                                    intParam("q_len", "500", 2, 65536,
                                             "positions the mean query and key are placed over to score a head")},
                                   onPrefill))), 1.10, 0.04)
    };
}

// Scored by the Session, which runs the model ahead for them.
std::vector<PolicyInfo> sessionScoredPolicies() {
    const auto sinks = sinksParam();
    return {
        sessionScored(info("oracle", "Hindsight oracle (not deployable)",
             "upper bound: reads the full cache's future attention, which no deployed cache can",
             "keep, per KV head, the entries the next predictions will attend to most (the full cache's attention "
             "of the last prompt query and the next `horizon` decode queries)",
             prefill, Nothing,
             withCommon({intParam("horizon", "0", 0, kMaxTokens,
                                  "decode steps whose queries decide (0: the steps the Session plans, or 16)")},
                        onPrefill)),
                      PolicyInfo::Preparation::FutureAttention),
        sessionScored(info("kvzip", "KVzip", "Kim et al. 2025, snu-mllab/KVzip; kvpress KVzipPress",
                           "keep the entries the model attends to most when asked to repeat the prompt",
                           prefill, Nothing,
                           withCommon({sinks, intParam("chunk", "2048", 16, kMaxTokens,
                                                       "prompt tokens repeated per reconstruction pass")},
                                      {"prefill_once", "uniform", "adaptive", "0"})),
                      PolicyInfo::Preparation::Reconstruction)
    };
}

std::deque<PolicyInfo> buildRegistry() {
    std::deque<PolicyInfo> all;
    for (auto group : {baselinePolicies(), windowScoredPolicies(), keyScoredPolicies(), sessionScoredPolicies()})
        for (auto& info : group) all.push_back(std::move(info));
    return all;
}

std::string joined(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
    return out;
}

std::string numberText(double v) {
    // The shortest text that reads back as the same double.
    char buf[64];
    for (int precision = 6; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

bool parseBool(const std::string& s, bool* out) {
    for (const char* t : {"true", "1", "yes", "on"})
        if (s == t) {
            *out = true;
            return true;
        }
    for (const char* f : {"false", "0", "no", "off"})
        if (s == f) {
            *out = false;
            return true;
        }
    return false;
}

std::string rangeText(const ParamSpec& p) {
    return "[" + numberText(p.min) + ", " + numberText(p.max) + "]";
}

// The normalised text of `value` for parameter p, or ArgumentError naming
// the policy, the parameter, the value and what would be valid.
std::string normalise(const std::string& id, const ParamSpec& p, const std::string& value) {
    // A budget-relative default ("B/2") is accepted as written.
    if (value == p.defaultValue) return value;
    const std::string what = id + ": " + p.name + "=" + value;
    auto inRange = [&](double v) {
        if (v < p.min || v > p.max) throw ArgumentError(what + " is outside " + rangeText(p));
    };
    switch (p.type) {
    case Type::Int: {
        int64_t v = 0;
        if (!parseInt(value, &v)) throw ArgumentError(what + " is not an integer in " + rangeText(p));
        inRange(static_cast<double>(v));
        return std::to_string(v);
    }
    case Type::Real: {
        double v = 0;
        if (!parseReal(value, &v)) throw ArgumentError(what + " is not a number in " + rangeText(p));
        inRange(v);
        return numberText(v);
    }
    case Type::Bool: {
        bool v = false;
        if (!parseBool(value, &v)) throw ArgumentError(what + " is not true or false");
        return v ? "true" : "false";
    }
    case Type::Choice:
        for (const auto& c : p.choices)
            if (c == value) return c;
        throw ArgumentError(what + " is not one of " + joined(p.choices, ", "));
    case Type::IntList: {
        std::vector<std::string> items;
        for (const auto& part : split(value, ',')) {
            if (part.empty()) continue;
            int64_t v = 0;
            if (!parseInt(part, &v))
                throw ArgumentError(what + ": '" + part + "' is not an integer in " + rangeText(p));
            inRange(static_cast<double>(v));
            items.push_back(std::to_string(v));
        }
        return joined(items, ",");
    }
    }
    return value;
}

const ParamSpec* findParam(const PolicyInfo& info, const std::string& name) {
    for (const auto& p : info.params)
        if (p.name == name) return &p;
    return nullptr;
}

std::string paramNames(const PolicyInfo& info) {
    std::vector<std::string> names;
    for (const auto& p : info.params) names.push_back(p.name);
    return joined(names, ", ");
}

// "k=v,k=v" -> pairs; a piece without '=' continues the previous value, so
// list parameters read naturally: "skip_layers=0,1,5".
std::vector<std::pair<std::string, std::string>> splitAssignments(const std::string& spec, const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& piece : split(text, ',')) {
        const auto eq = piece.find('=');
        if (eq == std::string::npos) {
            if (out.empty()) throw ArgumentError("policy spec '" + spec + "': expected name=value, got '" + piece + "'");
            out.back().second += "," + trimmed(piece);
            continue;
        }
        out.emplace_back(trimmed(piece.substr(0, eq)), trimmed(piece.substr(eq + 1)));
    }
    return out;
}

Schedule scheduleFromName(const std::string& s) {
    if (s == "prefill_once") return Schedule::PrefillOnce;
    if (s == "every_n") return Schedule::EveryN;
    if (s == "prefill_then_step") return Schedule::PrefillThenStep;
    return Schedule::EveryStep;
}

GqaReduce gqaFromName(const std::string& s) {
    if (s == "max") return GqaReduce::Max;
    if (s == "sum") return GqaReduce::Sum;
    return GqaReduce::Mean;
}

}  // namespace

const char* scheduleName(Schedule s) {
    switch (s) {
    case Schedule::EveryStep: return "every_step";
    case Schedule::PrefillOnce: return "prefill_once";
    case Schedule::EveryN: return "every_n";
    case Schedule::PrefillThenStep: return "prefill_then_step";
    }
    return "every_step";
}

namespace {

// Copy-on-write: the infos live in a deque that only grows (their addresses
// never change); readers take the published list of pointers, which a
// registration replaces under the lock and never changes in place.
struct Registry {
    std::mutex mutex;
    std::deque<PolicyInfo> infos;
    std::shared_ptr<const std::vector<const PolicyInfo*>> published;

    Registry() : infos(buildRegistry()) { publish(); }
    void publish() {
        auto list = std::make_shared<std::vector<const PolicyInfo*>>();
        for (const auto& info : infos) list->push_back(&info);
        published = std::move(list);
    }
};

Registry& registryStorage() {
    static Registry registry;
    return registry;
}

}  // namespace

PolicyList policyRegistry() {
    Registry& r = registryStorage();
    std::lock_guard<std::mutex> lock(r.mutex);
    return PolicyList(r.published);
}

void registerPolicyInfo(PolicyInfo info) {
    if (info.id.empty() || info.id.find_first_of(":,= ") != std::string::npos)
        throw ArgumentError("a policy id must be non-empty, without ':', ',', '=' or spaces (got '" + info.id + "')");
    if (info.fullCache) throw ArgumentError("policy '" + info.id + "': the full cache is the only policy that keeps everything as the reference");
    Registry& r = registryStorage();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto& known : r.infos)
        if (known.id == info.id) throw ArgumentError("policy '" + info.id + "' is already registered");
    r.infos.push_back(std::move(info));
    r.publish();
}

PolicyInfo makePolicyInfo(std::string id, std::string name, std::string reference, std::string summary,
                          Schedule defaultSchedule, bool usesAttention, bool usesKeys, std::vector<ParamSpec> own) {
    const CommonDefaults defaults{scheduleName(defaultSchedule)};
    return info(std::move(id), std::move(name), std::move(reference), std::move(summary), defaultSchedule,
                (usesAttention ? Attention : Nothing) | (usesKeys ? Keys : Nothing),
                withCommon(std::move(own), defaults));
}

const PolicyInfo& fullCachePolicy() {
    for (const auto& info : policyRegistry())
        if (info.fullCache) return info;
    throw Error("the policy registry has no full cache");  // buildRegistry() always adds it
}

PolicyConfig fullCacheConfig() { return parsePolicySpec(fullCachePolicy().id); }

bool isFullCache(const std::string& id) { return id == fullCachePolicy().id; }

bool isFullCache(const PolicyConfig& config) { return config.info().fullCache; }

bool adaptiveHeads(const PolicyConfig& config) { return config.has("heads") && config.text("heads") == "adaptive"; }

bool thresholdSelect(const PolicyConfig& config) { return config.has("select") && config.text("select") == "threshold"; }

bool budgetIsOutcome(const PolicyConfig& config) {
    return thresholdSelect(config) || config.info().budgetFree;
}

const PolicyInfo& findPolicy(const std::string& id) {
    std::vector<std::string> ids;
    for (const auto& info : policyRegistry()) {
        if (info.id == id) return info;
        ids.push_back(info.id);
    }
    throw ArgumentError("unknown policy '" + id + "'; known: " + joined(ids, ", "));
}

namespace {

ScriptPolicyLoader& scriptLoader() {
    static ScriptPolicyLoader load = nullptr;
    return load;
}

constexpr const char* kScriptPrefix = "script:";

}  // namespace

void setScriptPolicyLoader(ScriptPolicyLoader load) { scriptLoader() = load; }

std::string scriptPolicyIdFor(const std::string& absoluteFile) {
    std::string stem = std::filesystem::path(absoluteFile).stem().string();
    for (char& c : stem)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    const std::string base = "script-" + (stem.empty() ? std::string("scorer") : stem);
    for (int n = 1;; ++n) {
        const std::string id = n == 1 ? base : base + "-" + std::to_string(n);
        bool taken = false;
        for (const auto& info : policyRegistry())
            if (info.id == id) taken = info.file != absoluteFile;
        if (!taken) return id;
    }
}

PolicyConfig parsePolicySpec(const std::string& spec) {
    std::string id;
    std::string::size_type colon = std::string::npos;
    if (spec.rfind(kScriptPrefix, 0) == 0) {
        // script:FILE.pt[:k=v,...]: the file ends at the first ".pt" that ends the spec or meets a ':'.
        const std::string rest = spec.substr(std::char_traits<char>::length(kScriptPrefix));
        std::string::size_type end = rest.find(".pt:");
        end = end != std::string::npos ? end + 3 : rest.size();
        if (!scriptLoader())
            throw ArgumentError("policy " + spec + ": TorchScript scorers need the LibTorch part of KVLens (core)");
        id = scriptLoader()(rest.substr(0, end));
        if (end < rest.size()) colon = std::char_traits<char>::length(kScriptPrefix) + end;
    } else {
        colon = spec.find(':');
        id = trimmed(spec.substr(0, colon));
    }
    const PolicyInfo& info = findPolicy(id);
    PolicyConfig config;
    config.id = info.id;
    config.m_info = &info;
    for (const auto& p : info.params) config.values[p.name] = p.defaultValue;
    if (colon != std::string::npos) {
        std::map<std::string, bool> seen;
        for (const auto& [name, value] : splitAssignments(spec, spec.substr(colon + 1))) {
            const ParamSpec* p = findParam(info, name);
            if (!p)
                throw ArgumentError("policy " + info.id + " has no parameter '" + name + "'; valid: " +
                                    paramNames(info));
            if (seen[name]) throw ArgumentError("policy " + info.id + ": parameter '" + name + "' given twice");
            seen[name] = true;
            config.values[name] = normalise(info.id, *p, value);
        }
    }
    config.schedule = scheduleFromName(config.values["schedule"]);
    config.everyN = config.getInt("n");
    config.gqa = gqaFromName(config.values["gqa"]);
    return config;
}

const std::string& PolicyConfig::text(const std::string& name) const {
    const auto it = values.find(name);
    if (it == values.end()) throw ArgumentError("policy " + id + " has no parameter '" + name + "'");
    return it->second;
}

int64_t PolicyConfig::getInt(const std::string& name) const {
    int64_t v = 0;
    if (!parseInt(text(name), &v)) throw ArgumentError(id + ": " + name + "=" + text(name) + " is not an integer");
    return v;
}

double PolicyConfig::getReal(const std::string& name) const {
    double v = 0;
    if (!parseReal(text(name), &v)) throw ArgumentError(id + ": " + name + "=" + text(name) + " is not a number");
    return v;
}

bool PolicyConfig::getBool(const std::string& name) const {
    bool v = false;
    if (!parseBool(text(name), &v)) throw ArgumentError(id + ": " + name + "=" + text(name) + " is not true or false");
    return v;
}

std::vector<int64_t> PolicyConfig::getIntList(const std::string& name) const {
    std::vector<int64_t> out;
    for (const auto& part : split(text(name), ',')) {
        int64_t v = 0;
        if (part.empty()) continue;
        if (!parseInt(part, &v)) throw ArgumentError(id + ": " + name + "=" + text(name) + " is not a list of integers");
        out.push_back(v);
    }
    return out;
}

const PolicyInfo& PolicyConfig::info() const {
    return m_info && m_info->id == id ? *m_info : findPolicy(id);
}

std::string PolicyConfig::spec() const {
    const std::string& file = info().file;
    const std::string l = label();
    return file.empty() ? l : kScriptPrefix + file + l.substr(id.size());
}

bool atDefault(const PolicyConfig& config, const std::string& param) {
    for (const auto& p : config.info().params)
        if (p.name == param) return config.has(param) && config.text(param) == p.defaultValue;
    return false;
}

std::string PolicyConfig::label() const {
    std::vector<std::string> changed;
    for (const auto& p : info().params) {
        const auto it = values.find(p.name);
        if (it != values.end() && it->second != p.defaultValue) changed.push_back(p.name + "=" + it->second);
    }
    return changed.empty() ? id : id + ":" + joined(changed, ",");
}

}  // namespace kvlens
