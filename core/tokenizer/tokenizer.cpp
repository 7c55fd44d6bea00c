// Tokenizer: loads the stages of a tokenizer.json and runs them in HF's
// order: added tokens are cut out of the raw text, the rest is normalized,
// pre-tokenized into words, each word goes through the model, and the
// post-processor adds special tokens.
#include "core/read_file.h"
#include "core/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_error.h"
#include "core/tokenizer/added_vocabulary.h"
#include "core/tokenizer/config_node.h"
#include "core/tokenizer/decoder.h"
#include "core/tokenizer/model.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/post_processor.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/unicode.h"

namespace kvlens {

using namespace tok;

struct Tokenizer::Impl {
    std::string name;  // file name for error messages
    std::unique_ptr<Normalizer> normalizer;
    std::unique_ptr<PreTokenizer> preTokenizer;
    std::unique_ptr<Model> model;
    std::unique_ptr<PostProcessor> postProcessor;
    std::unique_ptr<Decoder> decoder;
    AddedVocabulary added;
    int32_t vocabSize = 0;
    std::optional<int32_t> bos, eos;
    // How tokenLabel() turns a vocabulary string back into bytes.
    bool byteLevel = false;
    bool byteFallback = false;
    std::string spaceMarker;

    std::optional<int32_t> findId(std::string_view token) const
    {
        if (const AddedToken* t = added.byContent(token)) return t->id;
        return model->vocab().find(token);
    }
    // Only added tokens count: Qwen's plain vocabulary happens to contain "<s>".
    std::optional<int32_t> firstAdded(std::initializer_list<const char*> names) const
    {
        for (const char* n : names) {
            if (const AddedToken* t = added.byContent(n)) return t->id;
        }
        return std::nullopt;
    }
    // An id past the vocabulary is a padding row of the model's embedding
    // (real checkpoints round their vocabulary up): shown, never an error.
    static std::string unusedPiece(int32_t id) { return "<unused:" + std::to_string(id) + ">"; }
    bool known(int32_t id) const { return added.byId(id) || model->vocab().token(id); }
    std::string token(int32_t id) const
    {
        if (const AddedToken* t = added.byId(id)) return t->content;
        if (const std::string* s = model->vocab().token(id)) return *s;
        if (id >= 0) return unusedPiece(id);
        throw ArgumentError("token id " + std::to_string(id) + " is negative: not a token of " + name);
    }
    void load(const nlohmann::json& json);
    void resolveSpecialIds();
    std::string labelBytes(int32_t id) const;
};

void Tokenizer::Impl::resolveSpecialIds()
{
    bos = postProcessor ? postProcessor->bosId() : std::nullopt;
    if (!bos) bos = firstAdded({"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>", "[CLS]"});
    eos = firstAdded({"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>", "<|eot_id|>"});
    if (!eos && postProcessor) eos = postProcessor->eosId();
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::fromFile(const std::filesystem::path& tokenizerJson)
{
    return fromJson(readRegularFile(tokenizerJson), tokenizerJson.string());
}

Tokenizer Tokenizer::fromJson(const std::string& jsonText, const std::string& nameForErrors)
{
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(jsonText);
    } catch (const nlohmann::json::exception& e) {
        throw FormatError(nameForErrors, jsonErrorText(e.what()));
    }
    try {
        auto impl = std::make_unique<Impl>();
        impl->name = nameForErrors;
        impl->load(json);
        return Tokenizer(std::move(impl));
    } catch (const nlohmann::json::exception& e) {
        // Accessors check types, so this is a safety net for unexpected shapes.
        throw FormatError(nameForErrors, std::string("unexpected JSON structure: ") + e.what());
    }
}

void Tokenizer::Impl::load(const nlohmann::json& json)
{
    const ConfigNode root(json, "", name);
    if (!json.is_object()) root.malformed("expected a JSON object");
    static const nlohmann::json null;
    const auto optional = [&](const char* key) { return root.has(key) ? root.at(key) : ConfigNode(null, key, name); };
    normalizer = makeNormalizer(optional("normalizer"));
    preTokenizer = makePreTokenizer(optional("pre_tokenizer"));
    model = makeModel(root.at("model"));
    postProcessor = makePostProcessor(optional("post_processor"));
    decoder = makeDecoder(optional("decoder"));
    if (root.has("added_tokens")) added = AddedVocabulary(root.at("added_tokens"), normalizer.get());

    int32_t maxId = model->vocab().maxId();
    for (const AddedToken& t : added.tokens()) maxId = std::max(maxId, t.id);
    vocabSize = maxId + 1;
    byteLevel = (decoder && decoder->isByteLevel()) || (preTokenizer && preTokenizer->isByteLevel());
    byteFallback = model->byteFallback() || (decoder && decoder->isByteFallback());
    if (decoder) spaceMarker = decoder->spaceMarker();
    if (spaceMarker.empty() && preTokenizer) spaceMarker = preTokenizer->metaspace();
    resolveSpecialIds();
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool addSpecialTokens) const
{
    if (const size_t bad = findInvalidUtf8(text); bad != std::string_view::npos) {
        throw ArgumentError("text to encode is not valid UTF-8 at byte offset " + std::to_string(bad));
    }
    const Impl& d = *m_impl;
    Pieces pieces = d.added.extractAndNormalize(text, d.normalizer.get());
    if (d.preTokenizer) d.preTokenizer->preTokenize(pieces);
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    for (const Piece& piece : pieces) {
        if (piece.addedId >= 0) ids.push_back(piece.addedId);
        else d.model->tokenize(piece.text, ids);
    }
    if (d.postProcessor) d.postProcessor->process(ids, addSpecialTokens);
    return ids;
}

namespace {

// Whether text ends inside a character: a UTF-8 sequence cut short, or the
// replacement character a decoder writes for one.
bool endsInsideACharacter(const std::string& text)
{
    if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return true;
    for (size_t back = 1; back <= 4 && back <= text.size(); ++back) {
        const auto c = static_cast<unsigned char>(text[text.size() - back]);
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        const size_t length = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        return back < length;
    }
    return false;
}

}  // namespace

std::vector<std::string> Tokenizer::decodePieces(const std::vector<int32_t>& ids) const
{
    // A UTF-8 character spans at most 4 byte tokens.
    constexpr size_t kContext = 4;
    std::vector<std::string> out;
    out.reserve(ids.size());
    size_t pending = 0;  // the first id whose text has not been given out yet
    std::vector<int32_t> window;
    for (size_t i = 0; i < ids.size(); ++i) {
        const auto from = static_cast<std::ptrdiff_t>(pending > kContext ? pending - kContext : 0);
        window.assign(ids.begin() + from, ids.begin() + static_cast<std::ptrdiff_t>(pending));
        const std::string before = decode(window);
        window.insert(window.end(), ids.begin() + static_cast<std::ptrdiff_t>(pending),
                      ids.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        const std::string with = decode(window);
        // A character not finished yet is given out whole, with the id that ends it.
        if (i + 1 < ids.size() && endsInsideACharacter(with)) {
            out.emplace_back();
            continue;
        }
        size_t common = 0;
        while (common < before.size() && common < with.size() && before[common] == with[common]) ++common;
        out.push_back(with.substr(common));
        pending = i + 1;
    }
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skipSpecialTokens) const
{
    const Impl& d = *m_impl;
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
        std::string token = d.token(id);
        if (skipSpecialTokens) {
            // HF skips by content, so a vocabulary entry spelled like a
            // special token is skipped too.
            const AddedToken* added = d.added.byContent(token);
            if (added && added->special) continue;
        }
        tokens.push_back(std::move(token));
    }
    if (!d.decoder) {
        std::string joined;
        for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
        return joined;
    }
    d.decoder->decodeChain(tokens);
    std::string out;
    for (const std::string& t : tokens) out += t;
    return out;
}

std::string Tokenizer::Impl::labelBytes(int32_t id) const
{
    const std::string raw = token(id);
    if (added.byId(id) || !known(id)) return raw;
    if (byteLevel) {
        std::string bytes;
        size_t i = 0;
        while (i < raw.size()) {
            const int b = byteLevelByte(nextCodePoint(raw, i));
            if (b < 0) return raw;
            bytes.push_back(static_cast<char>(b));
        }
        return bytes;
    }
    if (byteFallback && raw.size() == 6 && raw.compare(0, 3, "<0x") == 0 && raw[5] == '>') {
        const std::string hex = raw.substr(3, 2);
        if (std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
            return std::string(1, static_cast<char>(std::stoi(hex, nullptr, 16)));
        }
    }
    if (spaceMarker.empty()) return raw;
    std::string out;
    size_t pos = 0, found;
    while ((found = raw.find(spaceMarker, pos)) != std::string::npos) {
        out.append(raw, pos, found - pos);
        out.push_back(' ');
        pos = found + spaceMarker.size();
    }
    out.append(raw, pos, std::string::npos);
    return out;
}

std::string Tokenizer::tokenLabel(int32_t id) const
{
    const std::string bytes = m_impl->labelBytes(id);
    std::string label;
    bool onlySpaces = true;
    size_t i = 0;
    while (i < bytes.size()) {
        const size_t len = wellFormedLength(bytes, i);
        if (len == 0) {
            // A fragment of a multi-byte character: show the byte itself.
            static const char* kHex = "0123456789ABCDEF";
            const auto b = static_cast<unsigned char>(bytes[i++]);
            label += std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
            onlySpaces = false;
            continue;
        }
        const char32_t cp = nextCodePoint(bytes, i);
        onlySpaces = onlySpaces && cp == ' ';
        if (cp == '\n') label += "\u23CE";                     // ⏎
        else if (cp == '\r') label += "\u240D";                // ␍
        else if (cp == '\t') label += "\u21E5";                // ⇥
        else if (cp < 0x20) appendUtf8(label, 0x2400 + cp);    // control pictures
        else if (cp == 0x7F) label += "\u2421";                // ␡
        else appendUtf8(label, cp);
    }
    if (label.empty()) return "\u2205";  // ∅: an empty vocabulary entry
    if (onlySpaces) {
        std::string visible;
        for (size_t k = 0; k < label.size(); ++k) visible += "\u2423";  // ␣
        return visible;
    }
    return label;
}

std::string Tokenizer::tokenString(int32_t id) const { return m_impl->token(id); }

std::optional<int32_t> Tokenizer::tokenToId(std::string_view token) const { return m_impl->findId(token); }

int32_t Tokenizer::vocabSize() const { return m_impl->vocabSize; }

bool Tokenizer::isSpecial(int32_t id) const
{
    const AddedToken* t = m_impl->added.byId(id);
    return t && t->special;
}

std::optional<int32_t> Tokenizer::bosId() const { return m_impl->bos; }
std::optional<int32_t> Tokenizer::eosId() const { return m_impl->eos; }
void Tokenizer::setEosId(std::optional<int32_t> id) { m_impl->eos = id; }

}  // namespace kvlens
