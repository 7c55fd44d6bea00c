// kvlens-cli tokenize: the ids and pieces a tokenizer makes of a prompt.
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/error.h"

namespace kvlens::cli {
namespace {

struct TokenizeArgs {
    ModelArgs model;
    std::string tokenizer;
    PromptArgs prompt;
    bool json = false;
};

void runTokenize(const TokenizeArgs& a) {
    std::optional<Tokenizer> tok;
    if (!a.tokenizer.empty()) {
        tok = Tokenizer::fromFile(a.tokenizer);
    } else {
        tok = tokenizerFor(a.model.dir());
        if (!tok) throw ArgumentError("no tokenizer.json in '" + a.model.dir().string() + "' (use --tokenizer FILE)");
    }
    if (!a.prompt.given()) throw ArgumentError("give the text with --prompt, --prompt-file or --prompt-ids");
    const auto ids = a.prompt.resolve(&*tok);
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    for (int64_t id : ids)
        if (id >= tok->vocabSize())
            throw ArgumentError("--prompt-ids: id " + std::to_string(id) + " is outside the vocabulary (" +
                                std::to_string(tok->vocabSize()) + " tokens)");
    if (a.json) {
        nlohmann::json pieces = nlohmann::json::array();
        for (int64_t id : ids) pieces.push_back(tok->tokenString(static_cast<int32_t>(id)));
        nlohmann::json j = {{"ids", ids}, {"tokens", pieces}, {"count", ids.size()}, {"decoded", tok->decode(ids32)}};
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    for (int64_t id : ids) std::cout << id << "\t" << tok->tokenLabel(static_cast<int32_t>(id)) << "\n";
    std::cout << ids.size() << " tokens\n";
}

}  // namespace

void addTokenizeCommand(CLI::App& app) {
    auto args = std::make_shared<TokenizeArgs>();
    auto* cmd = app.add_subcommand("tokenize", "show the token ids of a prompt");
    args->model.add(*cmd, /*withDevice=*/false);
    cmd->add_option("--tokenizer", args->tokenizer, "a tokenizer.json file (instead of --model)");
    args->prompt.add(*cmd);
    cmd->add_flag("--json", args->json, "print JSON with the ids");
    cmd->callback([args] { runTokenize(*args); });
}

}  // namespace kvlens::cli
