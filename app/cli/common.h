#pragma once
// Options shared by kvlens-cli subcommands: which model, where it runs, and
// where the prompt comes from.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/device.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens::cli {

struct ModelArgs {
    std::string model;  // empty: the bundled model
    RunSettings run;
    void add(CLI::App& app, bool withDevice = true);
    std::filesystem::path dir() const;
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
};

// "1, 2,3" -> {1,2,3}; throws ArgumentError naming the bad element.
std::vector<int64_t> parseIdList(const std::string& text, const std::string& flag);
// The tokenizer.json beside a model, or nullopt when the directory has none.
std::optional<Tokenizer> tokenizerFor(const std::filesystem::path& modelDir);
std::string readTextFile(const std::filesystem::path& path, const std::string& flag);

void addInfoCommand(CLI::App& app);
void addTokenizeCommand(CLI::App& app);
void addGenerateCommand(CLI::App& app);

}  // namespace kvlens::cli
