// kvlens-cli import llama2c MODEL.bin TOKENIZER.bin OUT_DIR: a llama2.c
// checkpoint (the tinyllamas story models) as an HF model directory that
// every other command and the GUI open (core/model/llama2c.h).
// kvlens-cli import gguf FILE.gguf OUT_DIR: a llama.cpp GGUF model
// (core/model/gguf_import.h), dequantised to f32 (or --bf16).
#include <cstdio>
#include <memory>
#include <string>

#include "app/cli/common.h"
#include "core/model/gguf_import.h"
#include "core/model/llama2c.h"

namespace kvlens::cli {
namespace {

struct ImportArgs {
    std::string model, tokenizer, out;
    bool bf16 = false, quiet = false;
};

void runImport(const ImportArgs& a) {
    const ImportReport r = importLlama2c(a.model, a.tokenizer, a.out);
    const Llama2cHeader& h = r.header;
    std::printf("imported %s: %lld parameters, %d layers, dim %d, %d query / %d KV heads, vocabulary %d, context %d "
                "(%s classifier)\n  -> %s (config.json, model.safetensors, tokenizer.json)\n",
                a.model.c_str(), static_cast<long long>(r.parameters), h.layers, h.dim, h.heads, h.kvHeads,
                std::abs(h.vocabSize), h.seqLen, h.tiedClassifier ? "tied" : "own", a.out.c_str());
}

void runImportGguf(const ImportArgs& a) {
    GgufImportOptions options;
    options.bf16 = a.bf16;
    if (!a.quiet)
        options.progress = [](int64_t done, int64_t total, const std::string&) {
            if (done == total || done % 16 == 0) std::fprintf(stderr, "\rimporting: %lld / %lld tensors", (long long)done, (long long)total);
            if (done == total) std::fprintf(stderr, "\n");
            return true;
        };
    const GgufImportReport r = importGguf(a.model, a.out, options);
    std::string types;
    for (const auto& [type, count] : r.types) types += (types.empty() ? "" : ", ") + std::to_string(count) + " " + type;
    std::printf("imported %s%s%s (GGUF v%u, %s): %lld parameters, %lld layers, hidden %lld, %lld query / %lld KV heads, "
                "vocabulary %lld, context %lld (%s classifier; tensors: %s)\n  -> %s (config.json, model.safetensors "
                "in %s, tokenizer.json, tokenizer_config.json)\n",
                a.model.c_str(), r.name.empty() ? "" : ": ", r.name.c_str(), r.version, r.architecture.c_str(),
                static_cast<long long>(r.parameters), static_cast<long long>(r.layers), static_cast<long long>(r.hidden),
                static_cast<long long>(r.heads), static_cast<long long>(r.kvHeads), static_cast<long long>(r.vocab),
                static_cast<long long>(r.context), r.tied ? "tied" : "own", types.c_str(), a.out.c_str(),
                a.bf16 ? "bf16" : "f32");
}

}  // namespace

void addImportCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("import", "convert a model from another format into an HF model directory");
    cmd->require_subcommand(1);
    auto args = std::make_shared<ImportArgs>();
    auto* l2c = cmd->add_subcommand(
        "llama2c",
        "a llama2.c checkpoint (e.g. the tinyllamas stories15M/42M/110M or stories260K) and its tokenizer.bin; the "
        "tokenizer.json written encodes exactly as llama2.c does");
    l2c->add_option("MODEL", args->model, "the llama2.c model file (.bin, legacy v0 format)")->required();
    l2c->add_option("TOKENIZER", args->tokenizer, "llama2.c's tokenizer.bin (or tok512.bin for stories260K)")->required();
    l2c->add_option("OUT_DIR", args->out, "a new (or empty) folder for config.json, model.safetensors, tokenizer.json")
        ->required();
    l2c->callback([args] { runImport(*args); });
    auto* gguf = cmd->add_subcommand(
        "gguf",
        "a llama.cpp GGUF model (llama, qwen2, qwen3; F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K "
        "tensors), dequantised; Q/K rows back in HF order; the tokenizer and chat template from its metadata");
    gguf->add_option("FILE", args->model, "the .gguf file")->required();
    gguf->add_option("OUT_DIR", args->out,
                     "a new (or empty) folder for config.json, model.safetensors, tokenizer.json, tokenizer_config.json")
        ->required();
    gguf->add_flag("--bf16", args->bf16, "write bf16 weights (half the size; f32 by default)");
    gguf->add_flag("--quiet", args->quiet, "no progress on stderr");
    gguf->callback([args] { runImportGguf(*args); });
}

}  // namespace kvlens::cli
