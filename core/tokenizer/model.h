#pragma once
// tokenizer.json "model": turns one pre-tokenized word into ids. BPE and
// WordLevel are supported; WordPiece and Unigram are refused at load time.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvlens::tok {

class ConfigNode;

// token <-> id for the model's own vocabulary (added tokens live elsewhere).
class Vocab {
public:
    // Reads a {"token": id, ...} object.
    static Vocab fromConfig(const ConfigNode& node);
    std::optional<int32_t> find(std::string_view token) const;
    const std::string* token(int32_t id) const;
    int32_t maxId() const { return m_maxId; }

private:
    std::deque<std::string> m_storage;  // stable addresses for the views below
    std::unordered_map<std::string_view, int32_t> m_ids;
    std::unordered_map<int32_t, const std::string*> m_tokens;
    int32_t m_maxId = -1;
};

class Model {
public:
    virtual ~Model() = default;
    // Appends the ids of `word` to `out`. Thread-safe.
    virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
    virtual bool byteFallback() const { return false; }
    const Vocab& vocab() const { return m_vocab; }

protected:
    explicit Model(Vocab vocab) : m_vocab(std::move(vocab)) {}
    Vocab m_vocab;
};

// Throws FormatError for missing fields, TokenizerError for an unsupported
// model type or a merge that names a token outside the vocabulary.
std::unique_ptr<Model> makeModel(const ConfigNode& node);

// Defined in bpe.cpp and word_level.cpp.
std::unique_ptr<Model> makeBpeModel(const ConfigNode& node);
std::unique_ptr<Model> makeWordLevelModel(const ConfigNode& node);

}  // namespace kvlens::tok
