#pragma once
// Options shared by kvlens-cli subcommands: which model, where it runs, and
// where the prompt comes from.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/safe_file.h"
#include "core/model/device.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/context_limit.h"
#include "core/run/sampler_options.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens {
struct ModelConfig;
}

namespace kvlens::cli {

struct ModelArgs {
    std::string model;  // empty: the bundled model
    RunSettings run;
    bool allowLongContext = false;
    std::string memoryBudget;  // --memory-budget as typed; empty: half the physical memory
    void add(CLI::App& app, bool withDevice = true);
    // --memory-budget SIZE, for the commands that run a Session (compare, export).
    void addMemoryBudget(CLI::App& app);
    uint64_t memoryBytes() const;  // 0: the default (SessionOptions::memoryBudget)
    std::filesystem::path dir() const;
    // The model folder is an input: no output may be written into it.
    void readBy(OutputGuard& guard) const { guard.inputFolder(dir()); }
    // A run that ends at `tokens` tokens: a note on stderr past the model's
    // context, an ArgumentError past the hard limit (core/run/context_limit.h)
    // unless --allow-long-context.
    void checkContext(const ModelConfig& config, int64_t tokens) const;
};

struct PromptArgs {
    std::string text, file, ids;
    bool noSpecial = false;
    void add(CLI::App& app);
    bool given() const { return !text.empty() || !file.empty() || !ids.empty(); }
    // The prompt as token ids: --prompt-ids exactly as given, otherwise the
    // text encoded (with the tokenizer's special tokens unless --no-special).
    std::vector<int64_t> resolve(const Tokenizer* tokenizer) const;
    std::string promptText() const;  // --prompt or the file's content
    void readBy(OutputGuard& guard) const { guard.input(file); }
};

// --question TEXT | --question-ids IDS, --question-mode aware|agnostic:
// a question about the prompt (SessionOptions::question).
struct QuestionArgs {
    std::string text, ids, mode = "agnostic";
    void add(CLI::App& app);
    // Sets so.question and so.questionMode (the text encoded without special tokens).
    void apply(SessionOptions& so, const Tokenizer* tokenizer) const;
};

// --policy ID[:k=v,...] (repeatable or single) and --budget N|R% / --budgets b0,b1,...
struct PolicyArgs {
    std::vector<std::string> policies;
    std::string budget, budgets;
    void add(CLI::App& app, bool repeatable);
    std::vector<PolicyConfig> configs() const;  // parsed and validated
    BudgetSpec budgetSpec() const;               // requires --budget or --budgets when a policy evicts
};

// --greedy | --temperature T [--top-p P] [--seed S]
struct SamplingArgs {
    bool greedy = false;
    double temperature = 0;  // 0: greedy
    double topP = 1.0;
    uint64_t seed = 0;
    void add(CLI::App& app);
    SamplingOptions options() const;
};

// Checks of numeric options on the text as typed, before CLI11 converts it
// (it saturates 99999999999999999999 to 2^63-1, and takes nan and inf):
// a whole number in [lo, hi], or a finite real. A refusal reads
// "--steps: expected a whole number from 0 to 1000000, got '…'".
// `shown` replaces "in [lo, hi]" in --help where the bound depends on the machine.
CLI::Validator wholeNumber(int64_t lo, int64_t hi, const std::string& shown = "");
// The bound of a layer or head index as typed; the model's own range is
// checked once it is loaded.
constexpr int64_t kMaxIndex = 1000000;
CLI::Validator finiteReal();

// The registry as --help text: every policy with its parameters and defaults.
std::string policyHelp();

// "1, 2,3" -> {1,2,3}; throws ArgumentError naming the bad element as not
// a `what` ("token id", "context length").
std::vector<int64_t> parseIdList(const std::string& text, const std::string& flag, const std::string& what = "token id");
// The tokenizer.json beside a model, or nullopt when the directory has none.
std::optional<Tokenizer> tokenizerFor(const std::filesystem::path& modelDir);
// A text input (--prompt-file, --haystack-file): a regular file or a pipe
// (`<(cmd)`), at most 64 MiB; a folder or an endless device is refused.
std::string readTextFile(const std::filesystem::path& path, const std::string& flag);
// `text` to the file `path` (atomically: core/safe_file.h), or to stdout for "-".
void writeOutput(const std::string& path, const std::string& text);

void addInfoCommand(CLI::App& app);
void addTokenizeCommand(CLI::App& app);
void addGenerateCommand(CLI::App& app);
void addCompareCommand(CLI::App& app);
void addBenchCommand(CLI::App& app);
void addTrainCommand(CLI::App& app);
void addNeedleCommand(CLI::App& app);
void addExportCommand(CLI::App& app);
void addImportCommand(CLI::App& app);
void addMemoryCommand(CLI::App& app);
void addSweepCommand(CLI::App& app);

}  // namespace kvlens::cli
