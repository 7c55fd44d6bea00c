#include "app/cli/common.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/model/config.h"
#include "core/paths.h"
#include "core/policy/policy_info.h"
#include "core/run/context_limit.h"
#include "core/eval/kv_memory.h"

namespace kvlens::cli {
namespace fs = std::filesystem;

void ModelArgs::add(CLI::App& app, bool withDevice) {
    app.add_option("--model", model, "HF model directory (default: the bundled kvlens-tiny)");
    if (!withDevice) return;
    app.add_option("--device", run.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
    app.add_option("--dtype", run.dtype, "auto (f32 on CPU, bf16 on CUDA) | f32 | f16 | bf16")->capture_default_str();
    app.add_option("--threads", run.threads, "CPU threads (0: LibTorch default)")
        ->capture_default_str()
        ->check(wholeNumber(0, maxThreads(), "in [0, 2x CPUs]"));
    app.add_flag("--allow-long-context", allowLongContext,
                 "run past " + std::to_string(kHardContextFactor) + "x the model's max_position_embeddings (refused otherwise)");
}

void ModelArgs::addMemoryBudget(CLI::App& app) {
    app.add_option("--memory-budget", memoryBudget,
                   "memory a run may plan for, e.g. 8G or 512M (default: half the physical memory); past it the "
                   "attention map keeps the latest queries, and a run that cannot fit is refused");
}

uint64_t ModelArgs::memoryBytes() const { return memoryBudget.empty() ? 0 : parseMemorySize(memoryBudget); }

void ModelArgs::checkContext(const ModelConfig& config, int64_t tokens) const {
    const ContextCheck c = checkContextLength(tokens, config.maxPositions, config.family == Family::Gpt2, allowLongContext);
    if (c.level == ContextCheck::Level::Refuse) throw ArgumentError(c.message);
    if (c.level == ContextCheck::Level::Warn) std::cerr << "kvlens-cli: warning: " << c.message << "\n";
}

fs::path ModelArgs::dir() const { return model.empty() ? bundledModelDir() : fs::path(model); }

void PromptArgs::add(CLI::App& app) {
    auto* t = app.add_option("--prompt", text, "prompt text");
    auto* f = app.add_option("--prompt-file", file, "read the prompt text from a file");
    auto* i = app.add_option("--prompt-ids", ids, "prompt as token ids, e.g. 1,2,3 (used exactly: no BOS added)");
    t->excludes(f)->excludes(i);
    f->excludes(i);
    app.add_flag("--no-special", noSpecial, "add no special tokens (BOS …) when encoding the prompt");
}

void QuestionArgs::add(CLI::App& app) {
    auto* t = app.add_option("--question", text,
                             "a question about the prompt (kvpress's question; see --question-mode)");
    auto* i = app.add_option("--question-ids", ids, "the question as token ids")->excludes(t);
    app.add_option("--question-mode", mode,
                   "aware: the question ends the prompt and is the observation window of every policy whose window is at its default; agnostic: "
                   "the prompt is compressed without it, then every run reads it before generating")
        ->capture_default_str()
        ->check(CLI::IsMember({"aware", "agnostic"}));
    (void)i;
}

void QuestionArgs::apply(SessionOptions& so, const Tokenizer* tokenizer) const {
    so.questionMode = parseQuestionMode(mode);
    if (!ids.empty()) so.question = parseIdList(ids, "--question-ids");
    if (text.empty()) return;
    if (!tokenizer) throw ArgumentError("--question needs the model's tokenizer.json (or use --question-ids)");
    for (int32_t id : tokenizer->encode(text, false)) so.question.push_back(id);
}

void PolicyArgs::add(CLI::App& app, bool repeatable) {
    if (repeatable)
        app.add_option("--policy", policies, "eviction policy ID[:k=v,...] (repeatable; see the list below)");
    else
        app.add_option("--policy", policies, "eviction policy ID[:k=v,...] (default: full; see the list below)")
            ->expected(1);
    auto* b = app.add_option("--budget", budget, "cache budget per KV head: N tokens or R% of the prompt");
    app.add_option("--budgets", budgets, "per-layer budgets b0,b1,... (custom allocator)")->excludes(b);
    app.footer(policyHelp());
}

std::vector<PolicyConfig> PolicyArgs::configs() const {
    std::vector<PolicyConfig> out;
    for (const auto& p : policies) out.push_back(parsePolicySpec(p));
    return out;
}

BudgetSpec PolicyArgs::budgetSpec() const {
    if (!budgets.empty() || !budget.empty()) {
        BudgetSpec spec = budgets.empty() ? parseBudget(budget) : parseLayerBudgets(budgets);
        // A clamped budget runs, but the user is told (stderr: --json stays clean).
        if (!spec.note.empty()) std::cerr << "kvlens-cli: note: " << spec.note << "\n";
        return spec;
    }
    for (const auto& p : policies)
        if (!isFullCache(parsePolicySpec(p))) throw ArgumentError("--policy " + p + " needs --budget N|R% or --budgets");
    return BudgetSpec{};
}

void SamplingArgs::add(CLI::App& app) {
    auto* g = app.add_flag("--greedy", greedy, "argmax decoding (the default)");
    app.add_option("--temperature", temperature, "sample at this temperature (> 0)")->excludes(g)->check(finiteReal());
    app.add_option("--top-p", topP, "nucleus sampling mass in (0, 1]")->capture_default_str()->check(finiteReal());
    app.add_option("--seed", seed, "sampling seed")->capture_default_str();
}

SamplingOptions SamplingArgs::options() const {
    SamplingOptions o;
    o.greedy = greedy || temperature == 0;
    o.temperature = temperature == 0 ? 1.0 : temperature;
    o.topP = topP;
    o.seed = seed;
    return o;
}

std::string policyHelp() {
    std::string out = "\nPolicies (--policy ID[:k=v,...]; the rules: docs/policies.md, installed as "
                      "/usr/share/doc/kvlens/policies.md):\n";
    for (const auto& info : policyRegistry()) {
        out += "  " + info.id + std::string(info.id.size() < 10 ? 10 - info.id.size() : 1, ' ') + info.name +
               " - " + info.summary + "\n";
        std::string params;
        for (const auto& p : info.params) params += (params.empty() ? "" : ", ") + p.name + "=" + p.defaultValue;
        out += "            " + params + "\n";
    }
    return out + "  script:FILE.pt[:window=W,sinks=S,...]  a scorer you wrote: a TorchScript module saved with\n"
                 "            torch.jit.script(...).save(FILE.pt), composed with the window, sinks, GQA reduction,\n"
                 "            schedules and allocators (docs/plugins.md); it runs as policy script-STEM\n";
}

std::string readTextFile(const fs::path& path, const std::string& flag) {
    constexpr size_t kMaxBytes = size_t{64} << 20;
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw ArgumentError(flag + " " + path.string() + ": is a folder, not a text file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ArgumentError(flag + ": cannot read '" + path.string() + "'");
    std::string text;
    char buffer[1 << 16];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
        text.append(buffer, static_cast<size_t>(in.gcount()));
        if (text.size() > kMaxBytes)
            throw ArgumentError(flag + " " + path.string() + ": longer than 64 MiB (a device or an endless stream?)");
    }
    if (in.bad()) throw ArgumentError(flag + ": cannot read '" + path.string() + "'");
    return text;
}

void writeOutput(const std::string& path, const std::string& text) {
    if (path == "-") {
        std::cout << text;
        return;
    }
    writeFileAtomically(path, text);
}

std::string PromptArgs::promptText() const { return file.empty() ? text : readTextFile(file, "--prompt-file"); }

CLI::Validator wholeNumber(int64_t lo, int64_t hi, const std::string& shown) {
    const std::string range = "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
    return CLI::Validator(
        [lo, hi, range](std::string& text) -> std::string {
            int64_t v = 0;
            const char* end = text.data() + text.size();
            const auto [stop, ec] = std::from_chars(text.data(), end, v);
            if (ec != std::errc() || stop != end || v < lo || v > hi) return "expected " + range + ", got '" + text + "'";
            return {};
        },
        shown.empty() ? "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" : shown);
}

CLI::Validator finiteReal() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            double v = 0;
            const char* end = text.data() + text.size();
            const auto [stop, ec] = std::from_chars(text.data(), end, v);
            if (ec != std::errc() || stop != end || !std::isfinite(v)) return "expected a finite number, got '" + text + "'";
            return {};
        },
        "finite");
}

std::vector<int64_t> parseIdList(const std::string& text, const std::string& flag, const std::string& what) {
    std::vector<int64_t> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        const std::string t = b == std::string::npos ? "" : item.substr(b, e - b + 1);
        if (t.empty() || t.size() > 12 || t.find_first_not_of("0123456789") != std::string::npos)
            throw ArgumentError(flag + ": '" + t + "' is not a " + what + " (expected whole numbers from 0 to 999999999999, separated by commas)");
        out.push_back(std::stoll(t));
    }
    if (out.empty()) throw ArgumentError(flag + ": nothing given (expected whole numbers separated by commas)");
    return out;
}

std::optional<Tokenizer> tokenizerFor(const fs::path& modelDir) {
    const fs::path file = modelDir / "tokenizer.json";
    if (!fs::exists(file)) return std::nullopt;
    return Tokenizer::fromFile(file);
}

std::vector<int64_t> PromptArgs::resolve(const Tokenizer* tokenizer) const {
    if (!ids.empty()) return parseIdList(ids, "--prompt-ids");
    if (!tokenizer) throw ArgumentError("the model has no tokenizer.json: give the prompt with --prompt-ids");
    std::vector<int64_t> out;
    for (int32_t id : tokenizer->encode(promptText(), !noSpecial)) out.push_back(id);
    return out;
}

}  // namespace kvlens::cli
