#include "core/tokenizer/model.h"

#include <algorithm>
#include <climits>

#include "core/error.h"
#include "core/tokenizer/config_node.h"

namespace kvlens::tok {

Vocab Vocab::fromConfig(const ConfigNode& node)
{
    if (!node.json().is_object()) node.malformed("expected an object mapping tokens to ids");
    Vocab vocab;
    vocab.m_ids.reserve(node.json().size());
    vocab.m_tokens.reserve(node.json().size());
    for (auto it = node.json().begin(); it != node.json().end(); ++it) {
        if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
            it.value().get<int64_t>() > INT32_MAX) {
            node.malformed("token '" + it.key() + "' has no valid id");
        }
        const auto id = static_cast<int32_t>(it.value().get<int64_t>());
        const std::string& token = vocab.m_storage.emplace_back(it.key());
        vocab.m_ids[token] = id;
        vocab.m_tokens[id] = &token;
        vocab.m_maxId = std::max(vocab.m_maxId, id);
    }
    return vocab;
}

std::optional<int32_t> Vocab::find(std::string_view token) const
{
    const auto it = m_ids.find(token);
    if (it == m_ids.end()) return std::nullopt;
    return it->second;
}

const std::string* Vocab::token(int32_t id) const
{
    const auto it = m_tokens.find(id);
    if (it == m_tokens.end()) return nullptr;
    return it->second;
}

std::unique_ptr<Model> makeModel(const ConfigNode& node)
{
    // Files written by old versions of the library have no "type"; BPE is
    // the only model with merges.
    const std::string type = node.has("type") ? node.type() : (node.has("merges") ? "BPE" : "");
    if (type == "BPE") return makeBpeModel(node);
    if (type == "WordLevel") return makeWordLevelModel(node);
    if (type.empty()) node.malformed("missing field 'type'");
    node.unsupported("model", type);
}

}  // namespace kvlens::tok
