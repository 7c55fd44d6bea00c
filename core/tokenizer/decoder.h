#pragma once
// tokenizer.json "decoder": turns the token strings of an id list back into
// text. Each decoder rewrites the list (HF's decode_chain); the result is
// the concatenation.
#include <memory>
#include <string>
#include <vector>

namespace kvlens::tok {

class ConfigNode;

class Decoder {
public:
    virtual ~Decoder() = default;
    virtual void decodeChain(std::vector<std::string>& tokens) const = 0;
    virtual bool isByteLevel() const { return false; }
    virtual bool isByteFallback() const { return false; }
    // A character this decoder turns into a space ("▁"), or "".
    virtual std::string spaceMarker() const { return {}; }
};

// Null for a null decoder. Throws TokenizerError for an unsupported type.
std::unique_ptr<Decoder> makeDecoder(const ConfigNode& node);

}  // namespace kvlens::tok
