#pragma once
// Patterns that split or replace text: PCRE2 regexes (the Split/Replace
// "Regex" patterns, written for Oniguruma, which PCRE2 with UTF+UCP reads the
// same way) and literal strings. Matching follows the `onig` crate's
// find_iter, which HF tokenizers uses: leftmost-first, non-overlapping, and an
// empty match right after the previous match is skipped.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::tok {

class ConfigNode;

struct Span {
    size_t start;
    size_t end;
};

// A span of text and whether it was matched by the pattern; a list of these
// covers the whole text in order (HF's Pattern::find_matches).
struct MarkedSpan {
    size_t start;
    size_t end;
    bool isMatch;
};

class Regex {
public:
    // Throws TokenizerError naming `where` when PCRE2 rejects the pattern.
    Regex(const std::string& pattern, const ConfigNode& where);
    Regex(const std::string& pattern, const std::string& where);
    // Thread-safe: every call uses its own match data.
    std::vector<Span> findAll(std::string_view text) const;

private:
    struct Code;
    std::shared_ptr<const Code> m_code;
};

class Pattern {
public:
    // {"String": "..."} or {"Regex": "..."} as tokenizer.json writes SplitPattern.
    static Pattern fromConfig(const ConfigNode& node);
    static Pattern literal(std::string text);
    static Pattern regex(Regex re);

    std::vector<Span> findAll(std::string_view text) const;
    // The matches and the gaps between them; a single unmatched span for "".
    std::vector<MarkedSpan> findMarked(std::string_view text, bool invert = false) const;

private:
    Pattern() = default;
    std::string m_literal;
    std::shared_ptr<const Regex> m_regex;  // null for a literal pattern
};

// Marks spans in `text` against the sorted, non-overlapping `matches`.
std::vector<MarkedSpan> markSpans(std::string_view text, const std::vector<Span>& matches, bool invert);

}  // namespace kvlens::tok
