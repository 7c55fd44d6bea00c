// libFuzzer target: kvlens-cli's shared options (--model, --prompt*,
// --policy, --budget(s), sampling) as CLI11 parses them, then what the
// subcommands derive from them: policy configs, the budget, prompt ids.
// The input is the argument list, one argument per line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/cli/common.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> args{"kvlens-cli"};
    std::string cur;
    for (size_t i = 0; i < size; ++i) {
        if (data[i] == '\n') {
            args.push_back(cur);
            cur.clear();
        } else {
            cur.push_back(static_cast<char>(data[i]));
        }
    }
    if (!cur.empty()) args.push_back(cur);
    if (args.size() > 64) return 0;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());

    CLI::App app("fuzz");
    kvlens::cli::ModelArgs model;
    kvlens::cli::PromptArgs prompt;
    kvlens::cli::PolicyArgs policy;
    kvlens::cli::SamplingArgs sampling;
    model.add(app);
    prompt.add(app);
    policy.add(app, /*repeatable=*/true);
    sampling.add(app);
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::Error&) {
        return 0;  // CLI11 prints these as usage errors
    }
    try {
        (void)policy.configs();
        (void)policy.budgetSpec();
        (void)sampling.options();
        if (!prompt.ids.empty()) {
            for (int64_t id : kvlens::cli::parseIdList(prompt.ids, "--prompt-ids"))
                if (id < 0) __builtin_trap();
        }
    } catch (const kvlens::Error&) {
    }
    return 0;
}
