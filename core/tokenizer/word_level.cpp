// WordLevel model: every pre-tokenized word is one vocabulary entry or the
// unk token. Small readable vocabularies (the bundled model) use it.
#include "core/error.h"
#include "core/tokenizer/config_node.h"
#include "core/tokenizer/model.h"

namespace kvlens::tok {
namespace {

class WordLevelModel : public Model {
public:
    WordLevelModel(Vocab vocab, std::string unkToken) : Model(std::move(vocab)), m_unkToken(std::move(unkToken))
    {
        m_unkId = m_vocab.find(m_unkToken);
    }

    void tokenize(std::string_view word, std::vector<int32_t>& out) const override
    {
        if (const auto id = m_vocab.find(word)) {
            out.push_back(*id);
        } else if (m_unkId) {
            out.push_back(*m_unkId);
        } else {
            throw TokenizerError("WordLevel: '" + std::string(word) + "' is not in the vocabulary and unk_token '" +
                                 m_unkToken + "' is not either");
        }
    }

private:
    std::string m_unkToken;
    std::optional<int32_t> m_unkId;
};

}  // namespace

std::unique_ptr<Model> makeWordLevelModel(const ConfigNode& node)
{
    // HF's WordLevel defaults unk_token to "<unk>".
    return std::make_unique<WordLevelModel>(Vocab::fromConfig(node.at("vocab")), node.strOr("unk_token", "<unk>"));
}

}  // namespace kvlens::tok
