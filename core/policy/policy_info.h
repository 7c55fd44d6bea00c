#pragma once
// The policy registry as plain data (torch-free): ids, names, parameters
// with defaults, ranges and one-line help. The CLI builds --help and parses
// `--policy id:k=v,...` from it; the GUI builds its controls from it.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvlens {

// EveryStep: strict online, trimmed after every token, the prompt included.
// PrefillOnce: the prompt read with full attention, compressed once.
// EveryN: as EveryStep, trimming every n tokens.
// PrefillThenStep: as PrefillOnce for the prompt (scores from the prefill's
// attention), then trimmed after every decode step: what the H2O (real
// drop) and TOVA reference implementations run.
enum class Schedule { EveryStep, PrefillOnce, EveryN, PrefillThenStep };
enum class GqaReduce { Mean, Max, Sum };

const char* scheduleName(Schedule s);

struct ParamSpec {
    enum class Type { Int, Real, Bool, Choice, IntList };
    std::string name;
    Type type = Type::Int;
    // Default as text. A default that depends on the budget (h2o's recent =
    // B/2) is written as it reads in POLICIES.md ("B/2") and resolved by the policy.
    std::string defaultValue;
    double min = 0, max = 0;             // Int / Real / IntList elements (inclusive)
    std::vector<std::string> choices;    // Choice
    std::string help;                    // one line
};

struct PolicyInfo {
    std::string id;          // "snapkv"
    std::string name;        // "SnapKV"
    std::string reference;   // paper and reference repository
    std::string summary;     // one line: the rule
    Schedule defaultSchedule = Schedule::EveryStep;
    bool usesAttention = false;   // needs captured attention (costs memory/time)
    bool usesKeys = false;        // reads the keys/values of LayerState (SnapKV family, knorm)
    // The full cache: keeps everything, runs as run 0 of every Session, and
    // is what every metric compares with. Exactly one registered policy.
    bool fullCache = false;
    std::vector<ParamSpec> params;  // the policy's own, then the common ones
    // A TorchScript scorer's file (absolute), empty for the built-in policies.
    std::string file;
    // Scored by the Session, which runs the model ahead for it (the
    // hindsight oracle's future attention, KVzip's reconstruction): left out
    // where policies run without a Session (benches, plan-level and
    // engine-level sweeps of the registry).
    bool sessionScored = false;
    // Reads what no deployed cache can know (the hindsight oracle): shown as
    // a bound, not a policy.
    bool hindsight = false;
    // What the Session prepares before the policy plans: a hook chosen by
    // this trait, never by the policy's id. The calibration prompt's queries
    // (Q-Filters), the full cache's attention of the coming steps (the
    // hindsight oracle), the attention of the prompt's reconstruction (KVzip).
    enum class Preparation { None, CalibrationQueries, FutureAttention, Reconstruction };
    Preparation preparation = Preparation::None;
    // Keeps by its own rule whatever the budget (DuoAttention's retrieval and
    // streaming heads): what it holds is the outcome, as with select=threshold.
    bool budgetFree = false;
    // SPEC's overhead targets as `bench --quick` judges this policy: a decode
    // step at most `stepTarget` times the full cache's (every_step and
    // prefill_then_step), the prompt's scoring at most `promptShareTarget` of
    // a prompt read plus 256 decode steps (prefill_once). SPEC's 1.10x and 2 %
    // unless the policy's own rule costs more on the bundled model; then
    // re-stated in registry.cpp, each reason in docs/performance.md.
    double stepTarget = 1.10;
    double promptShareTarget = 0.02;
};

// A policy with every parameter resolved (defaults filled in, values checked).
struct PolicyConfig {
    std::string id;
    Schedule schedule = Schedule::EveryStep;
    int64_t everyN = 1;              // for Schedule::EveryN
    GqaReduce gqa = GqaReduce::Mean;
    std::map<std::string, std::string> values;  // name -> value text, all params

    bool has(const std::string& name) const { return values.count(name) != 0; }
    const std::string& text(const std::string& name) const;  // throws ArgumentError if unknown
    int64_t getInt(const std::string& name) const;
    double getReal(const std::string& name) const;
    bool getBool(const std::string& name) const;
    std::vector<int64_t> getIntList(const std::string& name) const;
    // "snapkv:window=16" — the id plus the parameters that differ from their defaults.
    std::string label() const;
    // What parsePolicySpec reads back to this config anywhere: the label, a
    // TorchScript scorer's as "script:FILE.pt[:k=v,...]".
    std::string spec() const;
    // The registered policy this config is of: its traits are one hop away.
    const PolicyInfo& info() const;

private:
    friend PolicyConfig parsePolicySpec(const std::string& spec);
    const PolicyInfo* m_info = nullptr;  // set by parsePolicySpec (infos never move)
};

// A snapshot of the registry: every policy registered when it was taken, the
// full cache first. Safe to hold and walk while another thread registers a
// plug-in (that one shows in the next snapshot). A PolicyInfo is never moved
// nor removed, so references to it stay valid for the life of the program.
class PolicyList {
public:
    class Iterator {
    public:
        using value_type = PolicyInfo;
        using reference = const PolicyInfo&;
        using difference_type = std::ptrdiff_t;
        using iterator_category = std::forward_iterator_tag;
        explicit Iterator(const PolicyInfo* const* at) : m_at(at) {}
        const PolicyInfo& operator*() const { return **m_at; }
        const PolicyInfo* operator->() const { return *m_at; }
        Iterator& operator++() { ++m_at; return *this; }
        bool operator==(const Iterator& o) const { return m_at == o.m_at; }
        bool operator!=(const Iterator& o) const { return m_at != o.m_at; }
    private:
        const PolicyInfo* const* m_at;
    };
    explicit PolicyList(std::shared_ptr<const std::vector<const PolicyInfo*>> infos) : m_infos(std::move(infos)) {}
    Iterator begin() const { return Iterator(m_infos->data()); }
    Iterator end() const { return Iterator(m_infos->data() + m_infos->size()); }
    size_t size() const { return m_infos->size(); }
    const PolicyInfo& front() const { return *m_infos->front(); }

private:
    std::shared_ptr<const std::vector<const PolicyInfo*>> m_infos;
};

// Every registered policy, the full cache first (see PolicyList).
PolicyList policyRegistry();
// Adds a policy (ArgumentError if its id is taken, or it claims to be a
// second full cache). core/policy/factory.h registerPolicy() also gives it a
// maker: one call adds a policy to the CLI, the GUI and the tests.
void registerPolicyInfo(PolicyInfo info);
// A PolicyInfo for registerPolicy(): its own parameters, then those every
// policy has (schedule with this default, n, gqa, alloc, beta, heads, alpha).
PolicyInfo makePolicyInfo(std::string id, std::string name, std::string reference, std::string summary,
                          Schedule defaultSchedule, bool usesAttention, bool usesKeys, std::vector<ParamSpec> own = {});
// The full cache: its info, a config of it, and whether a config or id is it.
const PolicyInfo& fullCachePolicy();
PolicyConfig fullCacheConfig();
bool isFullCache(const PolicyConfig& config);
bool isFullCache(const std::string& id);
// Whether a config's KV heads get different budgets (heads=adaptive: Ada-KV,
// AnDPro, or any scorer with that allocator).
bool adaptiveHeads(const PolicyConfig& config);
// Whether a config keeps by threshold (select=threshold: every entry scoring
// at least `threshold`, however many that is; DMS-style): its budget only
// sizes the protected sets, and what each layer and head holds is the outcome.
bool thresholdSelect(const PolicyConfig& config);
// Whether what a config holds is an outcome, not a budget: select=threshold,
// or a policy that keeps by its own rule (PolicyInfo::budgetFree).
bool budgetIsOutcome(const PolicyConfig& config);
// Throws ArgumentError listing the known ids.
const PolicyInfo& findPolicy(const std::string& id);
// "id" or "id:k=v,k=v". Throws ArgumentError naming the unknown id, the
// unknown parameter (listing the valid ones) or the bad value and its range.
// "script:FILE.pt" or "script:FILE.pt:k=v,..." loads a TorchScript scorer
// (docs/plugins.md) once and registers it as policy "script-STEM" (another
// file of the same stem gets "script-STEM-2"); the config has that id.
PolicyConfig parsePolicySpec(const std::string& spec);

// The loader of TorchScript scorers: core's (LibTorch) installs it. It
// loads and checks FILE, registers its policy and returns the id; an id
// already registered for the same file is returned as it is.
using ScriptPolicyLoader = std::string (*)(const std::string& file);
void setScriptPolicyLoader(ScriptPolicyLoader load);
// "script-mine" for ".../mine.pt" unless that id is another file's.
std::string scriptPolicyIdFor(const std::string& absoluteFile);

}  // namespace kvlens
