// kvlens-cli memory: KV bytes of the model's config against context length
// under MHA, its own GQA, MQA, CLA (k = 2, 3) and YOCO, each with the
// eviction budget given (core/eval/kv_memory.h). Reads config.json only.
#include <cmath>
#include <cstdio>
#include <optional>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/error.h"
#include "core/eval/kv_memory.h"
#include "core/model/config.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/study/what_if.h"

namespace kvlens::cli {
namespace {

struct MemoryArgs {
    ModelArgs model;
    PromptArgs prompt;
    int64_t whatIfKvHeads = 0, whatIfShareLayers = 0;
    std::string whatIfNeedle = "256";
    std::string contexts = "512,2048,8192,32768", budget, dtype = "f32";
    bool json = false;
};

void runMemory(const MemoryArgs& a) {
    const ModelConfig c = loadConfig(a.model.dir() / "config.json");
    KvShape shape{c.numLayers, c.numHeads, c.numKvHeads, c.headDim, 4};
    if (a.dtype == "bf16" || a.dtype == "f16") shape.elementBytes = 2;
    else if (a.dtype != "f32") throw ArgumentError("--dtype must be f32, bf16 or f16 (got '" + a.dtype + "')");
    const std::vector<int64_t> contexts = parseIdList(a.contexts, "--contexts", "context length");
    for (int64_t T : contexts)
        if (T < 1) throw ArgumentError("--contexts: " + std::to_string(T) + " is not a context length (expected >= 1)");
    const bool withBudget = !a.budget.empty();
    const BudgetSpec budget = withBudget ? parseBudget(a.budget) : BudgetSpec{};
    const std::vector<KvMemoryRow> rows = kvMemoryTable(shape, contexts, withBudget, budget);
    // The what-if: the model changed to share K/V, against itself, on the
    // prompt and on needle probes with the full cache.
    nlohmann::json whatIf = nullptr;
    std::string whatIfText;
    if (a.whatIfKvHeads > 0 || a.whatIfShareLayers > 0) {
        const char* option = a.whatIfKvHeads > 0 ? "--what-if-kv-heads" : "--what-if-share-layers";
        if (!a.prompt.given())
            throw ArgumentError(std::string(option) + " needs a prompt (--prompt, --prompt-file or --prompt-ids)");
        KvWhatIf w;
        w.kind = a.whatIfKvHeads > 0 ? KvWhatIf::Kind::MergeHeads : KvWhatIf::Kind::ShareLayers;
        w.value = a.whatIfKvHeads > 0 ? a.whatIfKvHeads : a.whatIfShareLayers;
        WhatIfNeedle needle;
        needle.contexts = a.whatIfNeedle == "none" ? std::vector<int64_t>{} : parseIdList(a.whatIfNeedle, "--what-if-needle", "context length");
        const std::shared_ptr<const Model> model = Model::load(a.model.dir());
        std::optional<Tokenizer> tok = tokenizerFor(a.model.dir());
        const std::vector<int64_t> ids = a.prompt.resolve(tok ? &*tok : nullptr);
        const auto tokenizer = tok ? std::make_shared<const Tokenizer>(std::move(*tok)) : nullptr;
        const WhatIfReport r = runWhatIf(model, tokenizer, w, ids, needle);
        auto share = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
        whatIf = {{"kind", w.kind == KvWhatIf::Kind::MergeHeads ? "merge_kv_heads" : "share_layers"},
                  {"value", w.value},
                  {"description", w.describe(c)},
                  {"positions", r.fidelity.positions},
                  {"mean_kl", r.fidelity.meanKl},
                  {"max_kl", r.fidelity.maxKl},
                  {"top1", r.fidelity.top1},
                  {"needle", {{"probes", r.needleProbes}, {"exact_model", share(r.needleModel)},
                              {"exact_what_if", share(r.needleWhatIf)}}}};
        whatIfText = "what-if: " + r.text(c) + "\n";
    }
    if (a.json) {
        nlohmann::json out{{"model", a.model.dir().string()},
                           {"layers", c.numLayers},
                           {"heads", c.numHeads},
                           {"kv_heads", c.numKvHeads},
                           {"head_dim", c.headDim},
                           {"element_bytes", shape.elementBytes},
                           {"contexts", contexts},
                           {"budget", withBudget ? nlohmann::json(budget.text()) : nlohmann::json(nullptr)},
                           {"designs", nlohmann::json::array()}};
        for (const KvMemoryRow& r : rows) {
            nlohmann::json d{{"id", r.design.id},
                             {"name", r.design.name},
                             {"explanation", r.design.explanation},
                             {"stored_layers", r.design.storedLayers},
                             {"kv_heads", r.design.kvHeads},
                             {"model_design", r.design.isModel},
                             {"bytes_per_token", r.design.bytesPerToken(shape)},
                             {"full_bytes", r.fullBytes}};
            if (withBudget) d["budget_bytes"] = r.budgetBytes;
            out["designs"].push_back(d);
        }
        out["what_if"] = whatIf;
        std::cout << out.dump(2) << "\n";
        return;
    }
    std::printf("KV memory of %s: %lld layers, %lld query heads, %lld KV heads of %lld, %s (%llu bytes an element)%s\n",
                a.model.dir().string().c_str(), static_cast<long long>(c.numLayers), static_cast<long long>(c.numHeads),
                static_cast<long long>(c.numKvHeads), static_cast<long long>(c.headDim), a.dtype.c_str(),
                static_cast<unsigned long long>(shape.elementBytes),
                withBudget ? (", eviction budget " + budget.text() + " per layer and KV head").c_str() : "");
    std::printf("%-38s %10s", "design", "per token");
    for (int64_t T : contexts) {
        std::printf(" %12s", (std::to_string(T) + " tok").c_str());
        if (withBudget) std::printf(" %12s", ("+ B " + budget.text()).c_str());
    }
    std::printf("\n");
    for (const KvMemoryRow& r : rows) {
        std::printf("%-38s %10s", (r.design.name + (r.design.isModel ? " *" : "")).c_str(),
                    formatBytes(r.design.bytesPerToken(shape)).c_str());
        for (size_t i = 0; i < contexts.size(); ++i) {
            std::printf(" %12s", formatBytes(r.fullBytes[i]).c_str());
            if (withBudget) std::printf(" %12s", formatBytes(r.budgetBytes[i]).c_str());
        }
        std::printf("\n");
    }
    std::printf("* the design the model was trained with. CLA and YOCO keep the model's KV heads; a model not trained "
                "to share K/V across layers or heads degrades when made to.\n");
    if (!budget.note.empty()) std::printf("note: %s\n", budget.note.c_str());
    std::printf("%s", whatIfText.c_str());
}

}  // namespace

void addMemoryCommand(CLI::App& app) {
    auto args = std::make_shared<MemoryArgs>();
    auto* cmd = app.add_subcommand(
        "memory", "KV-cache bytes vs context length under MHA, GQA, MQA, CLA and YOCO, with an eviction budget");
    args->model.add(*cmd, /*withDevice=*/false);
    args->prompt.add(*cmd);
    auto* heads = cmd->add_option("--what-if-kv-heads", args->whatIfKvHeads,
                                  "also run the model with its KV heads merged to N (mean-pooled K/V projections) on "
                                  "the prompt and report KL / top-1 and needle scores against the model as trained")
                      ->check(wholeNumber(1, kMaxIndex));
    cmd->add_option("--what-if-share-layers", args->whatIfShareLayers,
                    "the same with every K consecutive layers reading the K/V of their first layer (CLA-style)")
        ->excludes(heads)
        ->check(wholeNumber(1, kMaxIndex));
    cmd->add_option("--what-if-needle", args->whatIfNeedle,
                    "context lengths of the what-if's needle probes (3 depths x 2 seeds each), or none")
        ->capture_default_str();
    cmd->add_option("--contexts", args->contexts, "context lengths in tokens, comma-separated")->capture_default_str();
    cmd->add_option("--budget", args->budget, "an eviction budget on top: N tokens or R% of the context");
    cmd->add_option("--dtype", args->dtype, "element type of the cache: f32 | bf16 | f16")->capture_default_str();
    cmd->add_flag("--json", args->json, "print JSON");
    cmd->callback([args] { runMemory(*args); });
}

}  // namespace kvlens::cli
