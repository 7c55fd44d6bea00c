#include "core/tokenizer/added_vocabulary.h"

#include "core/tokenizer/config_node.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/unicode.h"

namespace kvlens::tok {

void AddedVocabulary::Trie::insert(std::string_view key, int32_t token)
{
    size_t node = 0;
    for (char c : key) {
        const auto byte = static_cast<unsigned char>(c);
        const auto it = nodes[node].next.find(byte);
        if (it != nodes[node].next.end()) {
            node = static_cast<size_t>(it->second);
        } else {
            nodes.emplace_back();
            const auto child = static_cast<int32_t>(nodes.size() - 1);
            nodes[node].next[byte] = child;
            node = static_cast<size_t>(child);
        }
    }
    // The first of two tokens with the same content wins, as in HF's automaton.
    if (nodes[node].token < 0) nodes[node].token = token;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longestAt(std::string_view text, size_t pos) const
{
    std::pair<size_t, int32_t> best{0, -1};
    size_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
        const auto it = nodes[node].next.find(static_cast<unsigned char>(text[i]));
        if (it == nodes[node].next.end()) break;
        node = static_cast<size_t>(it->second);
        if (nodes[node].token >= 0) best = {i + 1 - pos, nodes[node].token};
    }
    return best;
}

AddedVocabulary::AddedVocabulary(const ConfigNode& list, const Normalizer* normalizer)
{
    for (size_t i = 0; i < list.size(); ++i) {
        const ConfigNode node = list.at(i);
        AddedToken t;
        const int64_t id = node.integer("id");
        if (id < 0 || id > INT32_MAX) node.at("id").malformed("id out of range");
        t.id = static_cast<int32_t>(id);
        t.content = node.str("content");
        t.special = node.boolOr("special", false);
        t.singleWord = node.boolOr("single_word", false);
        t.lstrip = node.boolOr("lstrip", false);
        t.rstrip = node.boolOr("rstrip", false);
        t.normalized = node.boolOr("normalized", !t.special);
        m_byId[t.id] = m_tokens.size();
        m_byContent.emplace(t.content, m_tokens.size());
        m_tokens.push_back(std::move(t));
    }
    // HF builds its automata from the special tokens first, then the others.
    for (bool specialPass : {true, false}) {
        for (size_t i = 0; i < m_tokens.size(); ++i) {
            const AddedToken& t = m_tokens[i];
            if (t.special != specialPass || t.content.empty()) continue;
            if (!t.normalized) {
                m_rawTrie.insert(t.content, static_cast<int32_t>(i));
                continue;
            }
            std::string content = t.content;
            if (normalizer) normalizer->normalize(content);
            if (!content.empty()) m_normalizedTrie.insert(content, static_cast<int32_t>(i));
        }
    }
}

const AddedToken* AddedVocabulary::byId(int32_t id) const
{
    const auto it = m_byId.find(id);
    return it == m_byId.end() ? nullptr : &m_tokens[it->second];
}

const AddedToken* AddedVocabulary::byContent(std::string_view content) const
{
    const auto it = m_byContent.find(std::string(content));
    return it == m_byContent.end() ? nullptr : &m_tokens[it->second];
}

namespace {

char32_t codePointBefore(std::string_view s, size_t end)
{
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    return nextCodePoint(s, start);
}

// Start of the whitespace run that ends at `end`.
size_t whitespaceRunStart(std::string_view s, size_t end)
{
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!isWhiteSpace(nextCodePoint(s, i))) break;
        end = start;
    }
    return end;
}

// End of the whitespace run that starts at `start`.
size_t whitespaceRunEnd(std::string_view s, size_t start)
{
    while (start < s.size()) {
        size_t next = start;
        if (!isWhiteSpace(nextCodePoint(s, next))) break;
        start = next;
    }
    return start;
}

}  // namespace

void AddedVocabulary::split(const Piece& piece, const Trie& trie, Pieces& out) const
{
    const std::string_view text = piece.text;
    const auto emit = [&](size_t start, size_t end, int32_t id) {
        if (end > start) out.push_back({std::string(text.substr(start, end - start)), piece.atStart && start == 0, id});
    };
    size_t consumed = 0;  // end of the previous accepted match
    size_t pos = 0;
    while (pos < text.size()) {
        const auto [len, index] = trie.longestAt(text, pos);
        if (index < 0) {
            ++pos;
            continue;
        }
        const AddedToken& token = m_tokens[static_cast<size_t>(index)];
        size_t start = pos, stop = pos + len;
        pos = stop;  // the automaton resumes after a match even when it is discarded
        if (token.singleWord) {
            const bool spaceBefore = start == 0 || !isWordChar(codePointBefore(text, start));
            size_t after = stop;
            const bool spaceAfter = stop == text.size() || !isWordChar(nextCodePoint(text, after));
            if (!spaceBefore || !spaceAfter) continue;
        }
        if (token.lstrip) start = std::max(whitespaceRunStart(text, start), consumed);
        if (token.rstrip) stop = whitespaceRunEnd(text, stop);
        emit(consumed, start, -1);
        emit(start, stop, token.id);
        consumed = stop;
        pos = std::max(pos, stop);
    }
    emit(consumed, text.size(), -1);
}

Pieces AddedVocabulary::extractAndNormalize(std::string_view text, const Normalizer* normalizer) const
{
    Pieces raw;
    split(Piece{std::string(text), true, -1}, m_rawTrie, raw);
    Pieces out;
    out.reserve(raw.size());
    for (Piece& piece : raw) {
        if (piece.addedId >= 0) {
            out.push_back(std::move(piece));
            continue;
        }
        if (normalizer) normalizer->normalize(piece.text);
        split(piece, m_normalizedTrie, out);
    }
    return out;
}

}  // namespace kvlens::tok
