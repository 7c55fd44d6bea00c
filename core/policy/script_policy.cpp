// TorchScript scorers (docs/plugins.md): a policy whose scores come from a
// module the user wrote in Python and saved with torch.jit.script(...).save.
// It is a scorer like the built-in ones: the engine keeps its sinks and its
// window, reduces per-query-head scores over GQA groups, applies the
// schedule and the layer / head allocators; the module only ranks entries.
#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/policy/attention.h"
#include "core/policy/factory.h"
#include "core/policy/scorer.h"
#include "core/policy/select.h"

namespace kvlens {
namespace {

namespace fs = std::filesystem;

// What went wrong, in one line: TorchScript's message opens with "The
// following operation failed in the TorchScript interpreter." and a
// traceback, and ends with the cause ("RuntimeError: mat1 and mat2 shapes
// cannot be multiplied ..."), which the first line alone never showed. The
// traceback's indented lines are dropped, the rest joined; at most 600 chars.
std::string causeOf(const std::string& text) {
    std::vector<std::string> kept;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        start = end + 1;
        const bool header = line.rfind("The following operation failed", 0) == 0 || line.rfind("Traceback of", 0) == 0;
        if (line.rfind("Exception raised from", 0) == 0) break;  // c10's C++ backtrace follows
        if (line.empty() || line[0] == ' ' || header) continue;
        kept.push_back(line);
    }
    if (kept.empty()) return text.substr(0, text.find('\n'));
    std::string out;
    for (const auto& line : kept) out += (out.empty() ? "" : " ") + line;
    return out.size() > 600 ? out.substr(0, 597) + "..." : out;
}

// The loaded modules by policy id (a Module is a shared handle), with the
// file's size and time when loaded: a file rewritten since is loaded again.
struct Loaded {
    torch::jit::Module module;
    std::string stamp;
};

std::map<std::string, Loaded>& modules() {
    static std::map<std::string, Loaded> m;
    return m;
}

std::string stampOf(const fs::path& file) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    const auto time = fs::last_write_time(file, ec).time_since_epoch().count();
    return std::to_string(size) + "@" + std::to_string(time);
}

std::mutex& modulesMutex() {
    static std::mutex m;
    return m;
}

// forward(keys, values, queries, attention, positions) -> scores; checks
// the result's shape and that it is finite where `mask` holds entries.
at::Tensor callScorer(torch::jit::Module& module, const std::string& file, const at::Tensor& keys,
                      const at::Tensor& values, const at::Tensor& queries, const at::Tensor& attention,
                      const at::Tensor& positions, const at::Tensor& mask) {
    at::Tensor out;
    try {
        at::NoGradGuard noGrad;  // a learned scorer's parameters need no graph
        const c10::IValue r = module.forward({keys, values, queries, attention, positions});
        if (!r.isTensor()) throw Error(file + ": the scorer's forward must return a Tensor, not " + r.tagKind());
        out = r.toTensor();
    } catch (const c10::Error& e) {
        throw Error(file + ": the scorer's forward failed: " + causeOf(e.what_without_backtrace()));
    } catch (const std::runtime_error& e) {  // TorchScript's own errors
        throw Error(file + ": the scorer's forward failed: " + causeOf(e.what()));
    }
    const int64_t Hkv = keys.size(0), Hq = queries.size(0), L = keys.size(1);
    if (out.dim() != 2 || out.size(1) != L || (out.size(0) != Hkv && out.size(0) != Hq))
        throw Error(file + ": the scorer returned a tensor of shape " + c10::str(out.sizes()) + "; expected [" +
                    std::to_string(Hkv) + ", " + std::to_string(L) + "] (per KV head) or [" + std::to_string(Hq) + ", " +
                    std::to_string(L) + "] (per query head)");
    if (!at::isFloatingType(out.scalar_type()))
        throw Error(file + ": the scorer returned " + std::string(c10::toString(out.scalar_type())) +
                    " scores; expected a floating-point tensor");
    out = out.to(at::kFloat).to(keys.device());
    const at::Tensor held = out.size(0) == Hkv ? mask : mask.repeat_interleave(Hq / Hkv, 0);
    if (!at::isfinite(out).logical_or(held.logical_not()).all().item<bool>())
        throw Error(file + ": the scorer returned NaN or infinite scores for held entries");
    return out;
}

class ScriptPolicy : public ScorerPolicy {
public:
    ScriptPolicy(const PolicyInfo& info, PolicyConfig config, torch::jit::Module module)
        : ScorerPolicy(info, std::move(config)),
          m_module(std::move(module)),
          m_window(this->config().getInt("window")),
          m_sinks(this->config().getInt("sinks")),
          m_queries(m_window) {}

    void observe(const LayerState& state, const Observation& obs) override {
        if (m_window > 0) m_queries.add(state.layer, obs);
    }
    // A plug-in's module may keep state of its own across calls: its layers
    // are read in the order of decode steps.
    bool layerLocal() const override { return false; }

protected:
    int64_t sinks(const LayerState&) const override { return m_sinks; }
    int64_t window(const LayerState&) const override { return m_window; }

    at::Tensor score(const LayerState& state) override {
        const at::Tensor mask = entryMask(state);                     // [Hkv, L]
        const at::Tensor held = mask.unsqueeze(-1).to(at::kFloat);
        const at::Tensor keys = state.keys.to(at::kFloat) * held;      // padding reads 0
        const at::Tensor values = state.values.to(at::kFloat) * held;
        const int64_t Hkv = keys.size(0), L = keys.size(1), D = keys.size(2), Hq = state.numHeads;
        at::Tensor queries = m_window > 0 ? m_queries.queries(state.layer) : at::Tensor();
        at::Tensor attention;
        if (queries.defined()) {
            attention = attentionOver(state, queries, m_queries.positions(state.layer));  // [Hkv, G, m, L]
            attention = attention.reshape({Hq, attention.size(2), L});
            queries = queries.to(keys.device());
        } else {
            queries = at::zeros({Hq, 0, D}, keys.options());
            attention = at::zeros({Hq, 0, L}, keys.options());
        }
        const at::Tensor positions = at::where(mask, entryPositions(state), at::full({}, -1, at::kLong).to(mask.device()));
        at::Tensor out = callScorer(m_module, info().file, keys, values, queries, attention, positions, mask);
        if (out.size(0) != Hkv) out = reduceGroups(out, Hkv, config().gqa);
        return out;
    }

private:
    torch::jit::Module m_module;
    int64_t m_window, m_sinks;
    QueryWindow m_queries;
};

std::unique_ptr<Policy> makeScript(const PolicyInfo& info, PolicyConfig config) {
    torch::jit::Module module;
    {
        std::lock_guard<std::mutex> lock(modulesMutex());
        module = modules().at(info.id).module;
    }
    return std::unique_ptr<Policy>(new ScriptPolicy(info, std::move(config), std::move(module)));
}

// A call on a tiny made-up layer (2 query heads over 1 KV head, 3 entries,
// 1 window query): the module must run and return a score per entry. The
// model is not known when a scorer loads, and a learned scorer (an
// nn.Linear over the keys) runs at one head_dim only: the probe tries the
// head_dims real models have, 64 first, and the scorer passes if one of
// them runs. A scorer that fits none is refused with the cause at 64; one
// that fits another model than the one it runs on fails there, naming the
// cause (callScorer).
void probe(torch::jit::Module& module, const std::string& file) {
    static constexpr int64_t kHeadDims[] = {64, 128, 8, 16, 32, 48, 80, 96, 112, 256, 4};
    std::string first;
    for (const int64_t D : kHeadDims) {
        const at::Tensor keys = at::linspace(-1, 1, 3 * D).reshape({1, 3, D});
        const at::Tensor queries = at::linspace(0, 1, 2 * D).reshape({2, 1, D});
        const at::Tensor attention = at::full({2, 1, 3}, 1.0 / 3);
        const at::Tensor positions = at::arange(3, at::kLong).reshape({1, 3});
        try {
            callScorer(module, file, keys, keys.flip(-1), queries, attention, positions, at::ones({1, 3}, at::kBool));
            return;
        } catch (const Error& e) {
            if (first.empty()) first = e.what();
        }
    }
    throw Error(first);
}

// The module in `file`, checked: it loads, has a forward, and scores a probe.
torch::jit::Module loadModule(const std::string& file, const std::string& path) {
    torch::jit::Module module;
    try {
        module = torch::jit::load(path);
    } catch (const c10::Error& e) {
        throw ArgumentError(file + " is not a TorchScript module (save one with torch.jit.script(scorer).save(...)): " +
                            causeOf(e.what_without_backtrace()));
    } catch (const std::exception& e) {
        throw ArgumentError(file + " is not a TorchScript module (save one with torch.jit.script(scorer).save(...)): " +
                            causeOf(e.what()));
    }
    if (!module.find_method("forward")) throw ArgumentError(file + ": the TorchScript module has no forward method");
    try {
        probe(module, file);
    } catch (const Error& e) {
        throw ArgumentError(e.what());
    }
    return module;
}

// Loads a TorchScript scorer and registers its policy; the registry's
// "script:FILE.pt" specs call it.
std::string loadScriptPolicy(const std::string& file) {
    std::error_code ec;
    const fs::path abs = fs::absolute(fs::path(file), ec).lexically_normal();
    const std::string path = abs.string();
    if (!fs::is_regular_file(abs, ec)) throw ArgumentError("policy script:" + file + ": no such file");
    std::lock_guard<std::mutex> lock(modulesMutex());
    for (const auto& info : policyRegistry()) {
        if (info.file != path) continue;
        Loaded& loaded = modules()[info.id];
        const std::string stamp = stampOf(abs);
        if (loaded.stamp != stamp) loaded = {loadModule(file, path), stamp};  // rewritten: runs from now on as it is
        return info.id;
    }
    torch::jit::Module module = loadModule(file, path);
    const std::string id = scriptPolicyIdFor(path);
    modules()[id] = {module, stampOf(abs)};
    PolicyInfo info = makePolicyInfo(
        id, abs.filename().string() + " (TorchScript)", path, "scores [Hkv or Hq, L] from the TorchScript module " + path,
        Schedule::PrefillOnce, /*usesAttention=*/false, /*usesKeys=*/true,
        {{"window", ParamSpec::Type::Int, "32", 0, 1e7, {},
          "observation window: the last W queries the scorer sees; their keys are always kept"},
         {"sinks", ParamSpec::Type::Int, "0", 0, 1e7, {}, "attention sinks: the first S tokens, always kept"}});
    info.file = path;
    registerPolicy(std::move(info), makeScript);
    return id;
}

// parsePolicySpec's "script:FILE.pt" (the registry is torch-free; loading a
// module is not).
[[maybe_unused]] const bool kScriptLoaderSet = (setScriptPolicyLoader(&loadScriptPolicy), true);
}  // namespace

}  // namespace kvlens
