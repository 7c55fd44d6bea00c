#include "core/tokenizer/pretokenizer.h"

#include <algorithm>
#include <functional>

#include "core/tokenizer/config_node.h"
#include "core/tokenizer/unicode.h"

namespace kvlens::tok {

void splitPiece(const Piece& piece, const std::vector<MarkedSpan>& spans, SplitBehavior behavior, Pieces& out)
{
    // (start, end) ranges to keep, built exactly as HF folds the matches.
    std::vector<Span> keep;
    keep.reserve(spans.size());
    bool previousMatch = false;
    switch (behavior) {
    case SplitBehavior::Isolated:
        for (const MarkedSpan& s : spans) keep.push_back({s.start, s.end});
        break;
    case SplitBehavior::Removed:
        for (const MarkedSpan& s : spans) {
            if (!s.isMatch) keep.push_back({s.start, s.end});
        }
        break;
    case SplitBehavior::Contiguous:
        for (const MarkedSpan& s : spans) {
            if (s.isMatch == previousMatch && !keep.empty()) keep.back().end = s.end;
            else keep.push_back({s.start, s.end});
            previousMatch = s.isMatch;
        }
        break;
    case SplitBehavior::MergedWithPrevious:
        for (const MarkedSpan& s : spans) {
            if (s.isMatch && !previousMatch && !keep.empty()) keep.back().end = s.end;
            else keep.push_back({s.start, s.end});
            previousMatch = s.isMatch;
        }
        break;
    case SplitBehavior::MergedWithNext:
        for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
            if (it->isMatch && !previousMatch && !keep.empty()) keep.back().start = it->start;
            else keep.push_back({it->start, it->end});
            previousMatch = it->isMatch;
        }
        std::reverse(keep.begin(), keep.end());
        break;
    }
    for (const Span& k : keep) {
        if (k.end == k.start) continue;
        out.push_back({piece.text.substr(k.start, k.end - k.start), piece.atStart && k.start == 0, -1});
    }
}

namespace {

using WordSplitter = std::function<void(const Piece&, Pieces&)>;

// Applies `split` to every piece that is not an added token.
void splitWords(Pieces& pieces, const WordSplitter& split)
{
    Pieces out;
    out.reserve(pieces.size() * 2);
    for (Piece& piece : pieces) {
        if (piece.addedId >= 0) out.push_back(std::move(piece));
        else split(piece, out);
    }
    pieces = std::move(out);
}

// Every code point for which `pred` holds is a match of its own, as HF's
// Pattern impl for Fn(char) -> bool.
std::vector<MarkedSpan> markChars(std::string_view text, const std::function<bool(char32_t)>& pred)
{
    std::vector<Span> matches;
    size_t i = 0;
    while (i < text.size()) {
        const size_t start = i;
        if (pred(nextCodePoint(text, i))) matches.push_back({start, i});
    }
    return markSpans(text, matches, false);
}

SplitBehavior parseBehavior(const ConfigNode& node)
{
    const std::string name = node.asString();
    if (name == "Removed") return SplitBehavior::Removed;
    if (name == "Isolated") return SplitBehavior::Isolated;
    if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (name == "Contiguous") return SplitBehavior::Contiguous;
    node.unsupported("split behavior", name);
}

class SequencePreTokenizer : public PreTokenizer {
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : m_steps(std::move(steps)) {}
    void preTokenize(Pieces& pieces) const override
    {
        for (const auto& step : m_steps) step->preTokenize(pieces);
    }
    bool isByteLevel() const override
    {
        for (const auto& step : m_steps) {
            if (step->isByteLevel()) return true;
        }
        return false;
    }
    std::string metaspace() const override
    {
        for (const auto& step : m_steps) {
            if (!step->metaspace().empty()) return step->metaspace();
        }
        return {};
    }

private:
    std::vector<std::unique_ptr<PreTokenizer>> m_steps;
};

// Splits with a pattern (or any span finder) and a behavior.
class PatternPreTokenizer : public PreTokenizer {
public:
    using Marker = std::function<std::vector<MarkedSpan>(std::string_view)>;
    PatternPreTokenizer(Marker marker, SplitBehavior behavior) : m_marker(std::move(marker)), m_behavior(behavior) {}
    void preTokenize(Pieces& pieces) const override
    {
        splitWords(pieces, [this](const Piece& p, Pieces& out) { splitPiece(p, m_marker(p.text), m_behavior, out); });
    }

private:
    Marker m_marker;
    SplitBehavior m_behavior;
};

class ByteLevelPreTokenizer : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool addPrefixSpace, bool useRegex)
        : m_addPrefixSpace(addPrefixSpace), m_useRegex(useRegex),
          // GPT-2's pattern, as HF's ByteLevel pre-tokenizer compiles it.
          m_regex(Pattern::regex(Regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                                       std::string("ByteLevel pre-tokenizer"))))
    {
    }
    void preTokenize(Pieces& pieces) const override
    {
        splitWords(pieces, [this](const Piece& p, Pieces& out) {
            Piece word = p;
            if (m_addPrefixSpace && (word.text.empty() || word.text[0] != ' ')) word.text.insert(0, " ");
            const size_t first = out.size();
            if (m_useRegex) splitPiece(word, m_regex.findMarked(word.text), SplitBehavior::Isolated, out);
            else if (!word.text.empty()) out.push_back(std::move(word));
            for (size_t i = first; i < out.size(); ++i) {
                std::string mapped;
                mapped.reserve(out[i].text.size() * 2);
                for (char c : out[i].text) mapped.append(byteLevelChar(static_cast<uint8_t>(c)));
                out[i].text = std::move(mapped);
            }
        });
    }
    bool isByteLevel() const override { return true; }

private:
    bool m_addPrefixSpace;
    bool m_useRegex;
    Pattern m_regex;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer : public PreTokenizer {
public:
    MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
        : m_replacement(std::move(replacement)), m_scheme(scheme), m_split(split)
    {
    }
    void preTokenize(Pieces& pieces) const override
    {
        splitWords(pieces, [this](const Piece& p, Pieces& out) {
            Piece word{replaceSpaces(p.text), p.atStart, -1};
            const bool startsWithMarker = word.text.compare(0, m_replacement.size(), m_replacement) == 0;
            if (!startsWithMarker &&
                (m_scheme == PrependScheme::Always || (m_scheme == PrependScheme::First && word.atStart))) {
                word.text.insert(0, m_replacement);
            }
            if (m_split) {
                const Pattern marker = Pattern::literal(m_replacement);
                splitPiece(word, marker.findMarked(word.text), SplitBehavior::MergedWithNext, out);
            } else if (!word.text.empty()) {
                out.push_back(std::move(word));
            }
        });
    }
    std::string metaspace() const override { return m_replacement; }

private:
    std::string replaceSpaces(const std::string& text) const
    {
        std::string out;
        out.reserve(text.size() + 8);
        for (char c : text) {
            if (c == ' ') out.append(m_replacement);
            else out.push_back(c);
        }
        return out;
    }
    std::string m_replacement;
    PrependScheme m_scheme;
    bool m_split;
};

std::unique_ptr<PreTokenizer> makeMetaspace(const ConfigNode& node)
{
    const std::string replacement = node.str("replacement");
    size_t i = 0;
    if (replacement.empty() || (nextCodePoint(replacement, i), i != replacement.size())) {
        node.at("replacement").malformed("expected a single character");
    }
    PrependScheme scheme = PrependScheme::Always;
    if (node.has("prepend_scheme")) {
        const ConfigNode s = node.at("prepend_scheme");
        const std::string name = s.asString();
        if (name == "always") scheme = PrependScheme::Always;
        else if (name == "first") scheme = PrependScheme::First;
        else if (name == "never") scheme = PrependScheme::Never;
        else s.unsupported("prepend_scheme", name);
    } else if (node.has("add_prefix_space")) {
        // Files written before prepend_scheme existed.
        scheme = node.boolOr("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
    }
    return std::make_unique<MetaspacePreTokenizer>(replacement, scheme, node.boolOr("split", true));
}

std::unique_ptr<PreTokenizer> makeCharSplitter(std::function<bool(char32_t)> pred, SplitBehavior behavior)
{
    return std::make_unique<PatternPreTokenizer>(
        [pred = std::move(pred)](std::string_view text) { return markChars(text, pred); }, behavior);
}

std::unique_ptr<PreTokenizer> makeSplit(const ConfigNode& node)
{
    Pattern pattern = Pattern::fromConfig(node.at("pattern"));
    const bool invert = node.boolOr("invert", false);
    return std::make_unique<PatternPreTokenizer>(
        [pattern = std::move(pattern), invert](std::string_view text) { return pattern.findMarked(text, invert); },
        parseBehavior(node.at("behavior")));
}

// HF's Whitespace pre-tokenizer uses the Rust `regex` crate's `\w+|[^\w\s]+`,
// whose \w is Alphabetic + marks + Nd + Pc + joiners and \s is White_Space;
// written out because PCRE2's \w and \s sets differ slightly.
std::unique_ptr<PreTokenizer> makeWhitespace()
{
    const std::string word = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D})";
    const std::string space = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
    Pattern pattern =
        Pattern::regex(Regex("[" + word + "]+|[^" + word + space + "]+", std::string("Whitespace pre-tokenizer")));
    return std::make_unique<PatternPreTokenizer>(
        [pattern = std::move(pattern)](std::string_view text) { return pattern.findMarked(text, true); },
        SplitBehavior::Removed);
}

std::unique_ptr<PreTokenizer> makeBert()
{
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.push_back(makeCharSplitter(isWhiteSpace, SplitBehavior::Removed));
    steps.push_back(makeCharSplitter(isPunctuation, SplitBehavior::Isolated));
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
}

}  // namespace

std::unique_ptr<PreTokenizer> makePreTokenizer(const ConfigNode& node)
{
    if (node.json().is_null()) return nullptr;
    const std::string type = node.type();
    if (type == "Sequence") return std::make_unique<SequencePreTokenizer>(sequenceSteps<PreTokenizer>(node, "pretokenizers", makePreTokenizer));
    if (type == "ByteLevel") {
        return std::make_unique<ByteLevelPreTokenizer>(node.boolOr("add_prefix_space", true),
                                                       node.boolOr("use_regex", true));
    }
    if (type == "Split") return makeSplit(node);
    if (type == "Metaspace") return makeMetaspace(node);
    if (type == "Whitespace") return makeWhitespace();
    if (type == "WhitespaceSplit") return makeCharSplitter(isWhiteSpace, SplitBehavior::Removed);
    if (type == "BertPreTokenizer") return makeBert();
    if (type == "Punctuation") {
        const SplitBehavior behavior =
            node.has("behavior") ? parseBehavior(node.at("behavior")) : SplitBehavior::Isolated;
        return makeCharSplitter(isPunctuation, behavior);
    }
    if (type == "Digits") {
        const bool individual = node.boolOr("individual_digits", false);
        return makeCharSplitter(isNumeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
    }
    if (type == "CharDelimiterSplit") {
        const std::string delimiter = node.str("delimiter");
        size_t i = 0;
        if (delimiter.empty()) node.at("delimiter").malformed("expected a single character");
        const char32_t cp = nextCodePoint(delimiter, i);
        return makeCharSplitter([cp](char32_t c) { return c == cp; }, SplitBehavior::Removed);
    }
    node.unsupported("pre-tokenizer", type);
}

}  // namespace kvlens::tok
