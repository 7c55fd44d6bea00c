#pragma once
// tokenizer.json "pre_tokenizer": cuts normalized text into words that the
// model tokenizes independently (and caches). Mirrors HF's
// PreTokenizedString: a list of pieces, where pieces already resolved to an
// added token are left alone and empty pieces are dropped.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tokenizer/pattern.h"

namespace kvlens::tok {

class ConfigNode;

struct Piece {
    std::string text;
    // Begins at offset 0 of the text given to encode(): Metaspace's
    // prepend_scheme "first" prepends only to such a piece.
    bool atStart = false;
    // An added token matched in the text; no later stage touches it.
    int32_t addedId = -1;
};
using Pieces = std::vector<Piece>;

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Cuts `piece` at `spans` (which cover it) as HF's NormalizedString::split
// does for `behavior`, appending the non-empty parts to `out`.
void splitPiece(const Piece& piece, const std::vector<MarkedSpan>& spans, SplitBehavior behavior, Pieces& out);

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    virtual void preTokenize(Pieces& pieces) const = 0;
    // Whether this pre-tokenizer (or one in its sequence) maps bytes to
    // GPT-2's byte characters; tokenLabel() needs to know.
    virtual bool isByteLevel() const { return false; }
    // The Metaspace replacement character, if any ("" otherwise).
    virtual std::string metaspace() const { return {}; }
};

// Null for a null pre_tokenizer. Throws TokenizerError for an unsupported type.
std::unique_ptr<PreTokenizer> makePreTokenizer(const ConfigNode& node);

}  // namespace kvlens::tok
