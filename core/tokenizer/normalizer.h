#pragma once
// tokenizer.json "normalizer": rewrites each piece of text between added
// tokens before pre-tokenization (NFC for Qwen, Prepend("▁") + Replace(" ",
// "▁") for Llama 2).
#include <memory>
#include <string>

namespace kvlens::tok {

class ConfigNode;

class Normalizer {
public:
    virtual ~Normalizer() = default;
    virtual void normalize(std::string& text) const = 0;
};

// Null for a null normalizer. Throws TokenizerError for an unsupported type.
std::unique_ptr<Normalizer> makeNormalizer(const ConfigNode& node);

}  // namespace kvlens::tok
