#pragma once
// llama2.c checkpoints (the tinyllamas story models workshops use) as a
// normal HF model directory. Torch-free.
//
// A llama2.c model file (the legacy "v0" export run.c reads) is a header of
// seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; a negative vocab_size means the classifier is not tied to the
// embedding) and then f32 weights in a fixed order. Its tokenizer.bin holds
// an int32 max_token_length, then per id an f32 score, an int32 length and
// the piece's bytes; run.c encodes by adding a dummy-prefix space, looking up
// each UTF-8 character (byte fallback: id = byte + 3), then merging, again
// and again, the adjacent pair whose merged piece scores highest.
//
// importLlama2c writes config.json, model.safetensors (wq and wk permuted
// from llama2.c's interleaved RoPE pairs to HF's rotated halves) and a
// tokenizer.json that encodes exactly as run.c does: a byte-fallback BPE
// whose merges are every split of every piece into two pieces, ranked by
// the merged piece's score, with SentencePiece's "▁" for the space.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kvlens {

struct Llama2cHeader {
    int32_t dim = 0, hiddenDim = 0, layers = 0, heads = 0, kvHeads = 0, vocabSize = 0, seqLen = 0;
    bool tiedClassifier = true;  // vocab_size > 0 in the file
};

struct Llama2cPiece {
    std::string text;  // as stored (a space is ' ')
    float score = 0;
};

// Throws FormatError naming the file and what was expected.
Llama2cHeader readLlama2cHeader(const std::filesystem::path& model);
std::vector<Llama2cPiece> readLlama2cTokenizer(const std::filesystem::path& tokenizer, int64_t vocabSize);

// The tokenizer.json text for a llama2.c vocabulary (ids 0-2: <unk>, <s>,
// </s>; 3-258: the bytes <0x00>-<0xFF>; then pieces).
std::string llama2cTokenizerJson(const std::vector<Llama2cPiece>& pieces, const std::string& file);

struct ImportReport {
    Llama2cHeader header;
    int64_t parameters = 0;  // in model.safetensors
};

// Writes OUT_DIR whole or not at all: the files go to a staging folder
// beside it, renamed into place when every one is written. OUT_DIR must not
// exist or be an empty folder (nothing the user has is written over).
// Throws FormatError (bad or truncated input, naming the file), ArgumentError
// (OUT_DIR in use) or IoError.
ImportReport importLlama2c(const std::filesystem::path& model, const std::filesystem::path& tokenizer,
                           const std::filesystem::path& outDir);

}  // namespace kvlens
