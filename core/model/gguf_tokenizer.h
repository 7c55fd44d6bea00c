#pragma once
// The Hugging Face tokenizer files of a GGUF model, from its tokenizer.ggml.*
// metadata. Torch-free.
//
// tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges, token types,
// the pre-tokenizer named by tokenizer.ggml.pre) and "llama" (SentencePiece
// BPE with byte fallback: tokens, scores, token types) become a
// tokenizer.json that core/tokenizer (and HF's tokenizers) encode exactly
// as llama.cpp does; tokenizer_config.json carries the chat template,
// BOS/EOS/UNK/PAD and add_bos_token.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model/gguf.h"

namespace kvlens {

struct GgufTokenizerFiles {
    std::string tokenizerJson;
    std::string tokenizerConfigJson;
};

// Throws FormatError naming `file` and the metadata key at fault (absent,
// wrong type, arrays of different lengths, a merge naming an unknown token),
// or TokenizerError for a tokenizer.ggml.model / .pre we do not know.
GgufTokenizerFiles ggufTokenizerFiles(const std::map<std::string, GgufValue>& metadata, const std::string& file);

// A SentencePiece-style vocabulary: llama.cpp's "llama" (SPM) tokenizer, and
// llama2.c's tokenizer.bin (core/model/llama2c.h), which encodes the same way.
struct SentencePieceVocab {
    std::vector<std::string> pieces;  // id -> piece as the vocabulary spells it ("▁" a space, "<0xXX>" a byte)
    std::vector<float> scores;        // id -> score: the pair whose merged piece scores highest merges first
    std::vector<bool> mergeable;      // id -> may be a merge's part or result (false: control pieces)
    std::vector<std::pair<int32_t, bool>> added;  // (id, special): cut out of the raw text before the BPE
    std::optional<int32_t> unk;                   // what a byte without a byte piece becomes
    std::optional<int32_t> bos, eos;              // put before / after the text by the post-processor
    bool addSpacePrefix = true;                   // SentencePiece's "▁" before each run of text
};

// The tokenizer.json text of a byte-fallback BPE that encodes as llama.cpp's
// SPM tokenizer and llama2.c's run.c do: add the dummy prefix, spell spaces
// "▁", start from UTF-8 characters and merge, again and again, the adjacent
// pair whose merged piece scores highest (the leftmost of equal scores).
// Its merges are every split of every piece into two pieces, ranked by the
// merged piece's score (ties: the lower id first). A piece repeated in
// `pieces` is looked up by its first id.
std::string sentencePieceTokenizerJson(const SentencePieceVocab& vocab);

}  // namespace kvlens
