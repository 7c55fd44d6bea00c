#pragma once
// tokenizer.json "added_tokens": special and user-added tokens that are cut
// out of the text before the model sees it. Mirrors HF's AddedVocabulary:
// tokens with normalized=false are matched in the raw text, the others in
// the normalized text; matching is leftmost-longest, then single_word,
// lstrip and rstrip are applied to each match.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/pretokenizer.h"

namespace kvlens::tok {

class ConfigNode;
class Normalizer;

struct AddedToken {
    int32_t id = -1;
    std::string content;
    bool singleWord = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;
    bool special = false;
};

class AddedVocabulary {
public:
    AddedVocabulary() = default;
    // `normalizer` (may be null) rewrites the content of normalized tokens.
    AddedVocabulary(const ConfigNode& list, const Normalizer* normalizer);

    // HF's extract_and_normalize: split out raw-matched tokens, normalize the
    // rest piece by piece, then split out normalized-matched tokens.
    Pieces extractAndNormalize(std::string_view text, const Normalizer* normalizer) const;

    const AddedToken* byId(int32_t id) const;
    const AddedToken* byContent(std::string_view content) const;
    const std::vector<AddedToken>& tokens() const { return m_tokens; }

private:
    // Byte trie over token contents; node 0 is the root.
    struct Trie {
        struct Node {
            std::map<unsigned char, int32_t> next;
            int32_t token = -1;  // index into m_tokens of a token ending here
        };
        std::vector<Node> nodes{Node{}};
        void insert(std::string_view key, int32_t token);
        // Longest key starting at text[pos]: (length, token index) or (0, -1).
        std::pair<size_t, int32_t> longestAt(std::string_view text, size_t pos) const;
    };

    void split(const Piece& piece, const Trie& trie, Pieces& out) const;

    std::vector<AddedToken> m_tokens;
    std::unordered_map<int32_t, size_t> m_byId;
    std::unordered_map<std::string, size_t> m_byContent;
    Trie m_rawTrie;
    Trie m_normalizedTrie;
};

}  // namespace kvlens::tok
