// kvlens-cli import llama2c MODEL.bin TOKENIZER.bin OUT_DIR: a llama2.c
// checkpoint (the tinyllamas story models) as an HF model directory that
// every other command and the GUI open (core/model/llama2c.h).
#include <cstdio>
#include <memory>
#include <string>

#include "app/cli/common.h"
#include "core/model/llama2c.h"

namespace kvlens::cli {
namespace {

struct ImportArgs {
    std::string model, tokenizer, out;
};

void runImport(const ImportArgs& a) {
    const ImportReport r = importLlama2c(a.model, a.tokenizer, a.out);
    const Llama2cHeader& h = r.header;
    std::printf("imported %s: %lld parameters, %d layers, dim %d, %d query / %d KV heads, vocabulary %d, context %d "
                "(%s classifier)\n  -> %s (config.json, model.safetensors, tokenizer.json)\n",
                a.model.c_str(), static_cast<long long>(r.parameters), h.layers, h.dim, h.heads, h.kvHeads,
                std::abs(h.vocabSize), h.seqLen, h.tiedClassifier ? "tied" : "own", a.out.c_str());
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
}

}  // namespace kvlens::cli
