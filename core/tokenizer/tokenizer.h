#pragma once
// HF tokenizer.json loading, encoding and decoding, matching the Rust
// `tokenizers` library id for id: byte-level BPE (GPT-2, Llama 3, Qwen2/3),
// SentencePiece-style BPE with byte fallback (Llama 2, Mistral, TinyLlama)
// and WordLevel. The header includes only std so that widgets/ and app/ can
// use it without nlohmann_json, PCRE2 or torch.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

class Tokenizer {
public:
    // Throws FormatError (unreadable file, malformed JSON, missing or mistyped
    // field) or TokenizerError (unsupported model/normalizer/pre-tokenizer/
    // decoder/post-processor, inconsistent vocabulary).
    static Tokenizer fromFile(const std::filesystem::path& tokenizerJson);
    static Tokenizer fromJson(const std::string& jsonText, const std::string& nameForErrors);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;
    ~Tokenizer();

    // Throws ArgumentError naming the byte offset when `text` is not valid UTF-8.
    std::vector<int32_t> encode(std::string_view text, bool addSpecialTokens = true) const;
    // An id past the vocabulary (a padding row of a real checkpoint's
    // embedding) decodes as "<unused:ID>"; a negative id throws ArgumentError.
    std::string decode(const std::vector<int32_t>& ids, bool skipSpecialTokens = false) const;
    // Each id's share of decode(ids): the text its decoding adds after the
    // few ids before it (enough for a character split over byte tokens and
    // for a decoder's first-token rules), so that a list of predictions
    // reads as the text the CLI prints ("park", not "p ar k").
    std::vector<std::string> decodePieces(const std::vector<int32_t>& ids) const;

    // Human-readable piece for a heatmap axis: bytes decoded ("Ġ"/"▁" become a
    // space, "<0x0A>" a newline), control characters drawn as symbols ("⏎"),
    // an all-space piece drawn as "␣", never empty.
    std::string tokenLabel(int32_t id) const;
    std::string tokenString(int32_t id) const;  // raw vocabulary string
    std::optional<int32_t> tokenToId(std::string_view token) const;
    int32_t vocabSize() const;  // max id + 1, added tokens included
    bool isSpecial(int32_t id) const;

    // From the post-processor template, else from well-known token names.
    // The model loader may override them (config.json / generation_config.json).
    std::optional<int32_t> bosId() const;
    std::optional<int32_t> eosId() const;
    void setEosId(std::optional<int32_t> id);

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace kvlens
