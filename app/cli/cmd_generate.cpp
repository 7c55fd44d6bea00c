// kvlens-cli generate: run the model on a prompt and print what it writes.
#include <ATen/ATen.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/model/device_internal.h"
#include "core/model/model.h"
#include "core/run/generate.h"

namespace kvlens::cli {
namespace {

struct GenerateArgs {
    ModelArgs model;
    PromptArgs prompt;
    PolicyArgs policy;
    SamplingArgs sampling;
    int64_t steps = 32;
    bool ignoreEos = false;
    bool json = false;
};

std::vector<int64_t> stopIds(const Model& model, const std::optional<Tokenizer>& tok) {
    std::vector<int64_t> ids = model.config().eosTokenIds;
    if (ids.empty() && tok && tok->eosId()) ids.push_back(*tok->eosId());
    return ids;
}

void runGenerate(const GenerateArgs& a) {
    if (!a.prompt.given()) throw ArgumentError("give a prompt with --prompt, --prompt-file or --prompt-ids");
    const auto dir = a.model.dir();
    auto tok = tokenizerFor(dir);
    auto model = Model::load(dir, a.model.run);
    GenerateOptions opt;
    opt.steps = a.steps;
    opt.sampling = a.sampling.options();
    const auto policies = a.policy.configs();
    if (!policies.empty()) opt.policy = policies.front();
    opt.budget = a.policy.budgetSpec();
    if (!a.ignoreEos) opt.stopIds = stopIds(*model, tok);
    const auto prompt = a.prompt.resolve(tok ? &*tok : nullptr);
    a.model.checkContext(model->config(), static_cast<int64_t>(prompt.size()) + a.steps);

    // Stream text as it is produced; decode the whole continuation each time
    // so that multi-byte characters split over tokens print once complete.
    std::vector<int32_t> soFar;
    std::string printed;
    auto onToken = [&](int64_t id) {
        if (a.json) return;
        if (!tok) {
            std::cout << (soFar.empty() ? "" : " ") << id << std::flush;
            soFar.push_back(static_cast<int32_t>(id));
            return;
        }
        soFar.push_back(static_cast<int32_t>(id));
        std::string text = tok->decode(soFar, /*skipSpecialTokens=*/true);
        if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
            std::cout << text.substr(printed.size()) << std::flush;
            printed = text;
        }
    };
    GenerateResult r = generate(*model, prompt, opt, onToken);
    const std::string device = model->device().str() + "/" + dtypeLabel(model->dtype());
    if (a.json) {
        std::vector<int32_t> gen(r.generatedIds.begin(), r.generatedIds.end());
        nlohmann::json j = {{"prompt_ids", r.promptIds},
                            {"generated_ids", r.generatedIds},
                            {"prefill_seconds", r.prefillSeconds},
                            {"decode_tokens_per_second", r.decodeTokensPerSecond()},
                            {"kv_bytes_held", r.kvBytesHeld},
                            {"kv_bytes_full", r.kvBytesFull},
                            {"policy", opt.policy.label()},
                            {"device", device}};
        if (tok) j["text"] = tok->decode(gen, true);
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    std::cout << "\n";
    std::fprintf(stderr,
                 "[%s; %zu prompt tokens, prefill %.1f ms; %zu generated, %.1f tokens/s decode; KV held %.1f KiB of "
                 "%.1f KiB; %s]\n",
                 opt.policy.label().c_str(), r.promptIds.size(), r.prefillSeconds * 1e3, r.generatedIds.size(),
                 r.decodeTokensPerSecond(), r.kvBytesHeld / 1024.0, r.kvBytesFull / 1024.0, device.c_str());
}

}  // namespace

void addGenerateCommand(CLI::App& app) {
    auto args = std::make_shared<GenerateArgs>();
    auto* cmd = app.add_subcommand("generate", "generate a continuation of a prompt (full cache, or one eviction policy)");
    args->model.add(*cmd);
    args->prompt.add(*cmd);
    args->policy.add(*cmd, /*repeatable=*/false);
    cmd->add_option("--steps", args->steps, "tokens to generate")->capture_default_str()->check(wholeNumber(0, kMaxDecodeSteps));
    args->sampling.add(*cmd);
    cmd->add_flag("--ignore-eos", args->ignoreEos, "keep generating after the end-of-sequence token");
    cmd->add_flag("--json", args->json, "print JSON with the prompt and generated ids");
    cmd->callback([args] { runGenerate(*args); });
}

}  // namespace kvlens::cli
