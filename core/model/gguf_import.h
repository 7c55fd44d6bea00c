#pragma once
// A GGUF model (llama.cpp's format) as a Hugging Face model directory that
// every command and the GUI open. Torch-free.
//
// importGguf reads the GGUF (core/model/gguf.h), dequantises every tensor to
// f32 (or bf16 on request), maps llama.cpp's tensor names to HF's, undoes
// the Q/K row permutation llama.cpp's converter applies to Llama-family
// models, and writes config.json (from the llama.* / qwen2.* / qwen3.*
// metadata), tokenizer.json and tokenizer_config.json (from tokenizer.ggml.*,
// core/model/gguf_tokenizer.h) and model.safetensors. OUT_DIR is written
// whole or not at all (StagingFolder): a malformed file gives one sentence
// naming what is wrong, and nothing is written.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

namespace kvlens {

struct GgufImportOptions {
    bool bf16 = false;  // write bf16 (rounded to nearest even) instead of f32
    // Called after each tensor: done of total tensors, and the tensor's name.
    // Returning false cancels the import (ArgumentError "cancelled"; nothing written).
    std::function<bool(int64_t done, int64_t total, const std::string& tensor)> progress;
};

struct GgufImportReport {
    std::string architecture;  // general.architecture
    std::string name;          // general.name, when present
    uint32_t version = 0;      // GGUF version
    int64_t parameters = 0;    // elements written
    int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, vocab = 0, context = 0;
    bool tied = false;                       // no output.weight: lm_head is the embedding
    std::map<std::string, int64_t> types;    // ggml type name -> tensor count in the file
};

// Throws FormatError (malformed file, naming it and the key or tensor),
// ModelError (an architecture or feature we cannot run), ArgumentError
// (OUT_DIR in use), IoError.
GgufImportReport importGguf(const std::filesystem::path& gguf, const std::filesystem::path& outDir,
                            const GgufImportOptions& options = {});

}  // namespace kvlens
