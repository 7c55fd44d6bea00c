// BPE model: a word starts as one symbol per character and the
// lowest-ranked adjacent pair is merged until none is left, as HF's
// Word::merge_all does (ties go to the leftmost pair). Characters missing from
// the vocabulary become <0xNN> byte tokens (byte_fallback) or the unk token.
#include <array>
#include <mutex>
#include <queue>

#include "core/error.h"
#include "core/tokenizer/config_node.h"
#include "core/tokenizer/model.h"
#include "core/tokenizer/unicode.h"

namespace kvlens::tok {
namespace {

struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    size_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
};

struct Merge {
    size_t pos;
    int32_t rank;
    int32_t newId;
};

struct LaterMerge {
    // priority_queue pops the "largest": make that the lowest rank, then the leftmost.
    bool operator()(const Merge& a, const Merge& b) const
    {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    }
};

uint64_t pairKey(int32_t a, int32_t b)
{
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Words this long rarely repeat; caching them would only grow the map.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kCacheCapacity = 10000;

class BpeModel : public Model {
public:
    BpeModel(const ConfigNode& node, Vocab vocab);
    void tokenize(std::string_view word, std::vector<int32_t>& out) const override;
    bool byteFallback() const override { return m_byteFallback; }

private:
    void loadMerges(const ConfigNode& merges);
    std::vector<Symbol> initialSymbols(std::string_view word) const;
    void mergeAll(std::vector<Symbol>& symbols) const;
    const std::pair<int32_t, int32_t>* findMerge(int32_t a, int32_t b) const;

    std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> m_merges;  // (left, right) -> (rank, merged id)
    std::optional<std::string> m_unkToken;
    std::string m_prefix;  // continuing_subword_prefix
    std::string m_suffix;  // end_of_word_suffix
    bool m_fuseUnk = false;
    bool m_byteFallback = false;
    bool m_ignoreMerges = false;
    std::array<int32_t, 256> m_byteIds{};  // id of "<0xNN>", -1 when absent

    mutable std::mutex m_cacheMutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> m_cache;
};

BpeModel::BpeModel(const ConfigNode& node, Vocab vocab) : Model(std::move(vocab))
{
    if (node.has("unk_token")) m_unkToken = node.str("unk_token");
    m_prefix = node.strOr("continuing_subword_prefix", "");
    m_suffix = node.strOr("end_of_word_suffix", "");
    m_fuseUnk = node.boolOr("fuse_unk", false);
    m_byteFallback = node.boolOr("byte_fallback", false);
    m_ignoreMerges = node.boolOr("ignore_merges", false);
    if (node.has("dropout")) {
        const auto& d = node.at("dropout").json();
        if (!d.is_number()) node.at("dropout").malformed("expected a number or null");
        // Dropout makes encoding random; KVLens needs the same ids every run.
        if (d.get<double>() > 0.0) node.unsupported("BPE option", "dropout > 0");
    }
    static const char* kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
        m_byteIds[b] = m_vocab.find(name).value_or(-1);
    }
    loadMerges(node.at("merges"));
}

void BpeModel::loadMerges(const ConfigNode& merges)
{
    const size_t count = merges.size();
    m_merges.reserve(count);
    for (size_t rank = 0; rank < count; ++rank) {
        const ConfigNode entry = merges.at(rank);
        std::string left, right;
        if (entry.json().is_string()) {
            // Before tokenizers 0.20 a merge was one "left right" string.
            const std::string line = entry.asString();
            const size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
                entry.malformed("expected two tokens separated by one space");
            }
            left = line.substr(0, space);
            right = line.substr(space + 1);
        } else {
            if (entry.size() != 2) entry.malformed("expected a pair of tokens");
            left = entry.at(size_t{0}).asString();
            right = entry.at(size_t{1}).asString();
        }
        const std::string merged = left + (right.size() >= m_prefix.size() ? right.substr(m_prefix.size()) : right);
        const auto leftId = m_vocab.find(left), rightId = m_vocab.find(right), mergedId = m_vocab.find(merged);
        if (!leftId || !rightId || !mergedId) {
            throw TokenizerError(merges.file() + ": " + entry.path() + ": merge '" + left + " " + right +
                                 "' uses a token that is not in the vocabulary");
        }
        // A repeated pair keeps its last rank, as HF's HashMap collect does.
        m_merges[pairKey(*leftId, *rightId)] = {static_cast<int32_t>(rank), *mergedId};
    }
}

const std::pair<int32_t, int32_t>* BpeModel::findMerge(int32_t a, int32_t b) const
{
    const auto it = m_merges.find(pairKey(a, b));
    return it == m_merges.end() ? nullptr : &it->second;
}

std::vector<Symbol> BpeModel::initialSymbols(std::string_view word) const
{
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    const auto add = [&](int32_t id, size_t len) {
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({id, index - 1, index + 1, len});
    };
    // A pending unk token and the bytes it covers (unkLen == 0: none).
    int32_t unkId = -1;
    size_t unkLen = 0;
    const auto flushUnk = [&] {
        if (unkLen > 0) add(unkId, unkLen);
        unkLen = 0;
    };
    std::string decorated;
    size_t i = 0;
    while (i < word.size()) {
        const size_t start = i;
        nextCodePoint(word, i);
        std::string_view piece = word.substr(start, i - start);
        const bool addPrefix = start > 0 && !m_prefix.empty(), addSuffix = i == word.size() && !m_suffix.empty();
        if (addPrefix || addSuffix) {
            decorated = (addPrefix ? m_prefix : "") + std::string(piece) + (addSuffix ? m_suffix : "");
            piece = decorated;
        }
        const size_t byteLen = i - start;
        if (const auto id = m_vocab.find(piece)) {
            flushUnk();
            add(*id, byteLen);
            continue;
        }
        if (m_byteFallback) {
            bool all = true;
            for (char c : piece) all = all && m_byteIds[static_cast<uint8_t>(c)] >= 0;
            if (all) {
                // HF adds the byte tokens without flushing a pending unk first.
                for (char c : piece) add(m_byteIds[static_cast<uint8_t>(c)], 1);
                continue;
            }
        }
        if (!m_unkToken) continue;  // HF silently drops the character
        const auto id = m_vocab.find(*m_unkToken);
        if (!id) throw TokenizerError("BPE unk_token '" + *m_unkToken + "' is not in the vocabulary");
        if (unkLen > 0 && m_fuseUnk) {
            unkLen += byteLen;
        } else {
            flushUnk();
            unkId = *id;
            unkLen = byteLen;
        }
    }
    flushUnk();
    if (!symbols.empty()) symbols.back().next = -1;
    return symbols;
}

void BpeModel::mergeAll(std::vector<Symbol>& symbols) const
{
    std::priority_queue<Merge, std::vector<Merge>, LaterMerge> queue;
    for (size_t pos = 0; pos + 1 < symbols.size(); ++pos) {
        if (const auto* m = findMerge(symbols[pos].id, symbols[pos + 1].id)) queue.push({pos, m->first, m->second});
    }
    while (!queue.empty()) {
        const Merge top = queue.top();
        queue.pop();
        Symbol& left = symbols[top.pos];
        if (left.len == 0 || left.next < 0) continue;
        const Symbol right = symbols[static_cast<size_t>(left.next)];
        // Skip entries made stale by an earlier merge of either symbol.
        const auto* current = findMerge(left.id, right.id);
        if (!current || current->second != top.newId) continue;
        symbols[static_cast<size_t>(left.next)].len = 0;
        left.id = top.newId;
        left.len += right.len;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
        if (left.prev >= 0) {
            const Symbol& prev = symbols[static_cast<size_t>(left.prev)];
            if (const auto* m = findMerge(prev.id, left.id)) {
                queue.push({static_cast<size_t>(left.prev), m->first, m->second});
            }
        }
        if (left.next >= 0) {
            const Symbol& next = symbols[static_cast<size_t>(left.next)];
            if (const auto* m = findMerge(left.id, next.id)) queue.push({top.pos, m->first, m->second});
        }
    }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const
{
    if (word.empty()) return;
    if (m_ignoreMerges) {
        // Llama 3: a word that is itself a token is never split.
        if (const auto id = m_vocab.find(word)) {
            out.push_back(*id);
            return;
        }
    }
    const bool cacheable = word.size() < kMaxCachedWordBytes;
    if (cacheable) {
        std::lock_guard<std::mutex> lock(m_cacheMutex);
        const auto it = m_cache.find(std::string(word));
        if (it != m_cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<Symbol> symbols = initialSymbols(word);
    mergeAll(symbols);
    std::vector<int32_t> ids;
    ids.reserve(symbols.size());
    for (const Symbol& s : symbols) {
        if (s.len != 0) ids.push_back(s.id);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) {
        std::lock_guard<std::mutex> lock(m_cacheMutex);
        if (m_cache.size() >= kCacheCapacity) m_cache.clear();
        m_cache.emplace(std::string(word), std::move(ids));
    }
}

}  // namespace

std::unique_ptr<Model> makeBpeModel(const ConfigNode& node)
{
    return std::make_unique<BpeModel>(node, Vocab::fromConfig(node.at("vocab")));
}

}  // namespace kvlens::tok
