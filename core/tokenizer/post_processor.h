#pragma once
// tokenizer.json "post_processor": adds the special tokens around an
// encoded sequence (Llama's BOS) when encode() is asked to.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace kvlens::tok {

class ConfigNode;

class PostProcessor {
public:
    virtual ~PostProcessor() = default;
    virtual void process(std::vector<int32_t>& ids, bool addSpecialTokens) const = 0;
    // The special token this processor puts before / after a single sequence.
    virtual std::optional<int32_t> bosId() const { return std::nullopt; }
    virtual std::optional<int32_t> eosId() const { return std::nullopt; }
};

// Null for a null post_processor. Throws TokenizerError for an unsupported type.
std::unique_ptr<PostProcessor> makePostProcessor(const ConfigNode& node);

}  // namespace kvlens::tok
