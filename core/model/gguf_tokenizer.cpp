#include "core/model/gguf_tokenizer.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"

// What llama.cpp does with a GGUF's tokenizer (src/llama-vocab.cpp), and how
// each step is said in HF's tokenizer.json:
// - control, unknown and user-defined tokens are cut out of the text first
//   (llama_tokenize with parse_special): HF's added tokens, matched on the
//   raw text (normalized false), control and unknown ones special;
// - "gpt2": each regex of the pre-tokenizer type splits every piece, keeping
//   what it does not match (unicode_regex_split): HF's Split, Isolated, one
//   per regex; then the GPT-2 byte-to-character map (ByteLevel without its
//   own regex) and BPE by merge rank;
// - "llama": the SPM tokenizer (see sentencePieceTokenizerJson).

namespace kvlens {
namespace {

using Json = nlohmann::ordered_json;
const char* const kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// llama.cpp's token types (llama.h: enum llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// llama.cpp makes a token of these texts a control token whatever its type
// (llama-vocab.cpp finds end-of-generation and fill-in-the-middle tokens by
// name), so they too are cut out of the text before the BPE.
const std::set<std::string> kControlNames = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
    "_<EOT>", "[EOT]", "[EOS]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "<|eom_id|>", "<|return|>",
    "<|call|>", "<|flush|>", "<|calls|>", "</s>", "<eos>", "<turn|>", "<|tool_response>", "[e~[",
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
    "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
    "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
    "▁<MID>", "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};

// ---- the pre-tokenizer types of tokenizer.ggml.pre -------------------------

// The regexes of llama_vocab's BPE pre-tokenizer types (llm_tokenizer_bpe),
// for the types named in `names`.
struct PreTokenizerType {
    std::vector<std::string> names;
    std::vector<std::string> regexes;  // applied in turn, each to every piece
    bool ignoreMerges = false;         // a word that is a token is that token (Llama 3)
    bool addBos = false;               // the default of tokenizer.ggml.add_bos_token
    bool cleanSpaces = true;           // clean_up_tokenization_spaces (decoding only)
};

const std::vector<PreTokenizerType>& preTokenizerTypes() {
    const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
    const std::string contractions = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|)";
    auto llama3 = [&](const std::string& digits) {
        return contractions + R"([^\r\n\p{L}\p{N}]?\p{L}+|)" + digits +
               R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    };
    static const std::vector<PreTokenizerType> types = {
        {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
        // "gpt2" is not llama.cpp's spelling; taken as "gpt-2".
        {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais"}, {gpt2}},
        {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", gpt2}},
        {{"smollm", "command-r"}, {R"(\p{N})", gpt2}, false, false, false},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral"}, {llama3(R"(\p{N}{1,3})")}, true, true},
        {{"dbrx", "smaug-bpe"}, {llama3(R"(\p{N}{1,3})")}},
        {{"qwen2", "deepseek-r1-qwen"}, {llama3(R"(\p{N})")}, false, false, false},
        {{"stablelm2", "megrez"}, {llama3(R"(\p{N})")}},
        {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", gpt2, "[0-9][0-9][0-9]"}},
        {{"deepseek-coder"},
         {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
          R"(\p{N})"},
         false, false, false},
    };
    return types;
}

// ---- typed metadata ---------------------------------------------------------

// An integer value (isInteger()), unsigned ones above 2^63 saturated.
int64_t integerValue(const GgufValue& v) {
    switch (v.type) {
    case GgufValue::Type::I8: case GgufValue::Type::I16: case GgufValue::Type::I32: case GgufValue::Type::I64:
        return v.i;
    default: return static_cast<int64_t>(std::min<uint64_t>(v.u, INT64_MAX));
    }
}

class Metadata {
public:
    Metadata(const std::map<std::string, GgufValue>& m, const std::string& file) : m_m(m), m_file(file) {}

    const std::string& file() const { return m_file; }
    [[noreturn]] void fail(const std::string& what, const std::string& detail) const {
        throw FormatError(m_file, what + " " + detail);
    }
    const GgufValue* find(const std::string& key) const {
        const auto it = m_m.find(key);
        return it == m_m.end() ? nullptr : &it->second;
    }
    const GgufValue& require(const std::string& key, const char* expected) const {
        const GgufValue* v = find(key);
        if (!v) fail(key, std::string("is absent (expected ") + expected + ")");
        return *v;
    }
    std::optional<std::string> string(const std::string& key, bool required = false) const {
        const GgufValue* v = required ? &require(key, "a string") : find(key);
        if (!v) return std::nullopt;
        if (v->type != GgufValue::Type::String) fail(key, "is " + ggufValueDescription(*v) + " (expected a string)");
        return v->s;
    }
    bool flag(const std::string& key, bool fallback) const {
        const GgufValue* v = find(key);
        if (!v) return fallback;
        if (v->type != GgufValue::Type::Bool) fail(key, "is " + ggufValueDescription(*v) + " (expected a bool)");
        return v->u != 0;
    }
    // A token id below `tokens`, or `fallback` when the key is absent.
    std::optional<int32_t> tokenId(const std::string& key, size_t tokens, std::optional<int32_t> fallback) const {
        const GgufValue* v = find(key);
        if (!v) return fallback && size_t(*fallback) < tokens ? fallback : std::nullopt;
        if (!v->isInteger()) fail(key, "is " + ggufValueDescription(*v) + " (expected a token id)");
        const int64_t id = integerValue(*v);
        if (id < 0 || uint64_t(id) >= tokens)
            fail(key, "is " + std::to_string(id) + " (expected a token id below " + std::to_string(tokens) + ")");
        return static_cast<int32_t>(id);
    }
    // The elements of an array whose elements are of one of `types`, with
    // `count` elements unless count is 0.
    const std::vector<GgufValue>& array(const std::string& key, std::initializer_list<GgufValue::Type> types,
                                        const char* expected, size_t count, const char* countKey) const {
        const GgufValue& v = require(key, expected);
        if (v.type != GgufValue::Type::Array || std::find(types.begin(), types.end(), v.elementType) == types.end())
            fail(key, "is " + ggufValueDescription(v) + " (expected " + expected + ")");
        if (count && v.elements.size() != count)
            fail(key, "has " + std::to_string(v.elements.size()) + " entries (expected " + std::to_string(count) +
                          ", one per token of " + countKey + ")");
        return v.elements;
    }

private:
    const std::map<std::string, GgufValue>& m_m;
    std::string m_file;
};

// ---- the vocabulary ---------------------------------------------------------

struct GgufVocab {
    std::vector<std::string> tokens;
    std::vector<int64_t> types;  // TokenType; kNormal where the file has none
    std::vector<float> scores;   // empty where the file has none
    std::unordered_map<std::string, int32_t> idOf;

    bool isSpecial(size_t id) const { return types[id] == kControl || types[id] == kUnknown; }
    bool isAdded(size_t id) const { return isSpecial(id) || types[id] == kUserDefined; }
};

GgufVocab readVocab(const Metadata& meta, bool needScores) {
    GgufVocab v;
    const auto& tokens = meta.array("tokenizer.ggml.tokens", {GgufValue::Type::String}, "an array of strings", 0, "");
    if (tokens.empty()) meta.fail("tokenizer.ggml.tokens", "is empty (expected the vocabulary)");
    if (tokens.size() > size_t(INT32_MAX)) meta.fail("tokenizer.ggml.tokens", "has more tokens than ids can number");
    for (size_t id = 0; id < tokens.size(); ++id) {
        // llama.cpp names an empty token so that it cannot match any text.
        std::string text = tokens[id].s.empty() ? "[EMPTY_" + std::to_string(id) + "]" : tokens[id].s;
        const auto [it, added] = v.idOf.emplace(text, static_cast<int32_t>(id));
        if (!added)
            meta.fail("tokenizer.ggml.tokens[" + std::to_string(id) + "]",
                      "is '" + text + "', as is token " + std::to_string(it->second) + " (expected distinct tokens)");
        v.tokens.push_back(std::move(text));
    }
    v.types.assign(tokens.size(), kNormal);
    if (meta.find("tokenizer.ggml.token_type")) {
        const auto& types = meta.array("tokenizer.ggml.token_type", {GgufValue::Type::I32}, "an array of int32",
                                       tokens.size(), "tokenizer.ggml.tokens");
        for (size_t id = 0; id < types.size(); ++id) v.types[id] = types[id].i;
    }
    for (size_t id = 0; id < tokens.size(); ++id)
        if (kControlNames.count(v.tokens[id]) && !v.isAdded(id)) v.types[id] = kControl;
    if (needScores) {
        const auto& scores = meta.array("tokenizer.ggml.scores", {GgufValue::Type::F32, GgufValue::Type::I32},
                                        "an array of float32", tokens.size(), "tokenizer.ggml.tokens");
        for (const GgufValue& s : scores)
            v.scores.push_back(s.type == GgufValue::Type::F32 ? static_cast<float>(s.f) : static_cast<float>(s.i));
    }
    return v;
}

// The special tokens and what the post-processor adds.
struct Specials {
    std::optional<int32_t> bos, eos, unk, pad;
    bool addBos = false, addEos = false;
};

Specials readSpecials(const Metadata& meta, size_t tokens, bool spm, bool addBosDefault) {
    Specials s;
    // llama.cpp's defaults: SentencePiece's ids for "llama"; none for "gpt2"
    // (where llama.cpp's 11 is a placeholder, not a token).
    const auto fallback = [&](int32_t id) { return spm ? std::optional<int32_t>(id) : std::nullopt; };
    s.bos = meta.tokenId("tokenizer.ggml.bos_token_id", tokens, fallback(1));
    s.eos = meta.tokenId("tokenizer.ggml.eos_token_id", tokens, fallback(2));
    s.unk = meta.tokenId("tokenizer.ggml.unknown_token_id", tokens, fallback(0));
    s.pad = meta.tokenId("tokenizer.ggml.padding_token_id", tokens, std::nullopt);
    s.addBos = meta.flag("tokenizer.ggml.add_bos_token", spm || addBosDefault);
    s.addEos = meta.flag("tokenizer.ggml.add_eos_token", false);
    if (s.addBos && !s.bos)
        meta.fail("tokenizer.ggml.add_bos_token", "is true but tokenizer.ggml.bos_token_id is absent");
    if (s.addEos && !s.eos)
        meta.fail("tokenizer.ggml.add_eos_token", "is true but tokenizer.ggml.eos_token_id is absent");
    return s;
}

// ---- tokenizer.json pieces ---------------------------------------------------

size_t utf8Length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead >> 5) == 0x6) return 2;
    if ((lead >> 4) == 0xE) return 3;
    if ((lead >> 3) == 0x1E) return 4;
    return 1;
}

// {piece: id} in id order; a repeated piece keeps its first id.
// ordered_json searches its keys linearly on each insert, which a 150k-token
// vocabulary cannot afford: the keys are made unique here and appended.
Json vocabJson(const std::vector<std::string>& pieces, std::unordered_map<std::string, int32_t>* idOf) {
    Json vocab = Json::object();
    auto& entries = static_cast<Json::object_t::Container&>(vocab.get_ref<Json::object_t&>());
    entries.reserve(pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id)
        if (idOf->emplace(pieces[id], static_cast<int32_t>(id)).second) entries.emplace_back(pieces[id], id);
    return vocab;
}

Json addedTokensJson(const std::vector<std::pair<int32_t, bool>>& added, const std::vector<std::string>& pieces) {
    Json out = Json::array();
    for (const auto& [id, special] : added)
        out.push_back({{"id", id}, {"content", pieces[id]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", special}});
    return out;
}

// HF's TemplateProcessing putting `bos` before and `eos` after each sequence
// (null when there is neither).
Json templateProcessing(std::optional<int32_t> bos, std::optional<int32_t> eos, const std::vector<std::string>& pieces) {
    if (!bos && !eos) return nullptr;
    Json specials = Json::object();
    auto sequence = [&](const char* name, int typeId) {
        Json out = Json::array();
        auto special = [&](int32_t id) {
            specials[pieces[id]] = {{"id", pieces[id]}, {"ids", {id}}, {"tokens", {pieces[id]}}};
            out.push_back({{"SpecialToken", {{"id", pieces[id]}, {"type_id", typeId}}}});
        };
        if (bos) special(*bos);
        out.push_back({{"Sequence", {{"id", name}, {"type_id", typeId}}}});
        if (eos) special(*eos);
        return out;
    };
    Json pair = sequence("A", 0);
    for (Json& step : sequence("B", 1)) pair.push_back(std::move(step));
    return {{"type", "TemplateProcessing"}, {"single", sequence("A", 0)}, {"pair", pair}, {"special_tokens", specials}};
}

struct BpeOptions {
    std::optional<std::string> unk;
    bool byteFallback = false;
    bool ignoreMerges = false;
};

std::string tokenizerJson(Json added, Json normalizer, Json preTokenizer, Json postProcessor, Json decoder,
                          Json vocab, Json merges, const BpeOptions& bpe) {
    Json j;
    j["version"] = "1.0";
    j["truncation"] = nullptr;
    j["padding"] = nullptr;
    j["added_tokens"] = std::move(added);
    j["normalizer"] = std::move(normalizer);
    j["pre_tokenizer"] = std::move(preTokenizer);
    j["post_processor"] = std::move(postProcessor);
    j["decoder"] = std::move(decoder);
    Json model = {{"type", "BPE"}, {"dropout", nullptr}};
    model["unk_token"] = bpe.unk ? Json(*bpe.unk) : Json(nullptr);
    model["continuing_subword_prefix"] = nullptr;
    model["end_of_word_suffix"] = nullptr;
    model["fuse_unk"] = bpe.byteFallback;
    model["byte_fallback"] = bpe.byteFallback;
    if (bpe.ignoreMerges) model["ignore_merges"] = true;
    model["vocab"] = std::move(vocab);
    model["merges"] = std::move(merges);
    j["model"] = std::move(model);
    return j.dump(1) + "\n";
}

// Every split of a piece into two pieces, ranked by the merged piece's score.
Json scoreRankedMerges(const SentencePieceVocab& v, const std::unordered_map<std::string, int32_t>& idOf) {
    std::vector<size_t> order(v.pieces.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v.scores[a] > v.scores[b]; });
    auto mergeable = [&](const std::string& piece) {
        const auto it = idOf.find(piece);
        return it != idOf.end() && v.mergeable[it->second];
    };
    Json merges = Json::array();
    for (size_t id : order) {
        const std::string& s = v.pieces[id];
        if (!v.mergeable[id] || s.empty() || idOf.at(s) != static_cast<int32_t>(id)) continue;
        for (size_t at = utf8Length(static_cast<unsigned char>(s[0])); at < s.size();
             at += utf8Length(static_cast<unsigned char>(s[at]))) {
            std::string left = s.substr(0, at), right = s.substr(at);
            if (mergeable(left) && mergeable(right)) merges.push_back({std::move(left), std::move(right)});
        }
    }
    return merges;
}

// ---- "gpt2" -------------------------------------------------------------------

// tokenizer.ggml.merges as HF pairs, each checked against the vocabulary.
Json byteLevelMerges(const Metadata& meta, const GgufVocab& v) {
    const auto& merges = meta.array("tokenizer.ggml.merges", {GgufValue::Type::String}, "an array of strings", 0, "");
    Json out = Json::array();
    std::set<std::pair<std::string, std::string>> seen;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string& m = merges[i].s;
        const std::string where = "tokenizer.ggml.merges[" + std::to_string(i) + "]";
        // llama.cpp splits at the first space after the first byte.
        const size_t space = m.find(' ', 1);
        if (space == std::string::npos)
            meta.fail(where, "is '" + m + "' (expected two tokens separated by a space)");
        std::string left = m.substr(0, space), right = m.substr(space + 1);
        for (const std::string& piece : {left, right, left + right})
            if (!v.idOf.count(piece))
                meta.fail(where, "is '" + m + "': '" + piece +
                                     "' is not in tokenizer.ggml.tokens (expected two tokens that merge into a token)");
        // A repeated merge keeps its first rank in llama.cpp (HF would keep the last).
        if (seen.emplace(left, right).second) out.push_back({std::move(left), std::move(right)});
    }
    return out;
}

const PreTokenizerType& preTokenizerType(const Metadata& meta) {
    // llama.cpp takes an absent type as "default" (and warns).
    const std::string pre = meta.string("tokenizer.ggml.pre").value_or("default");
    std::string known;
    for (const PreTokenizerType& t : preTokenizerTypes()) {
        if (std::find(t.names.begin(), t.names.end(), pre) != t.names.end()) return t;
        for (const std::string& name : t.names) known += (known.empty() ? "" : ", ") + name;
    }
    throw TokenizerError(meta.file() + ": tokenizer.ggml.pre is '" + pre +
                         "', a pre-tokenizer KVLens does not know (known: " + known + ")");
}

std::string byteLevelTokenizerJson(const Metadata& meta, const GgufVocab& v, const PreTokenizerType& type,
                                   const Specials& s) {
    Json merges = byteLevelMerges(meta, v);
    Json steps = Json::array();
    for (const std::string& regex : type.regexes)
        steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}});
    std::vector<std::pair<int32_t, bool>> added;
    for (size_t id = 0; id < v.tokens.size(); ++id)
        if (v.isAdded(id)) added.emplace_back(static_cast<int32_t>(id), v.isSpecial(id));
    std::unordered_map<std::string, int32_t> idOf;
    Json vocab = vocabJson(v.tokens, &idOf);
    BpeOptions bpe;
    bpe.ignoreMerges = type.ignoreMerges;
    return tokenizerJson(addedTokensJson(added, v.tokens), nullptr, {{"type", "Sequence"}, {"pretokenizers", steps}},
                         templateProcessing(s.addBos ? s.bos : std::nullopt, s.addEos ? s.eos : std::nullopt, v.tokens),
                         {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}},
                         std::move(vocab), std::move(merges), bpe);
}

// ---- "llama" ------------------------------------------------------------------

std::string spmTokenizerJson(const Metadata& meta, const GgufVocab& v, const Specials& s) {
    SentencePieceVocab spm;
    spm.pieces = v.tokens;
    spm.scores = v.scores;
    spm.mergeable.resize(v.tokens.size());
    for (size_t id = 0; id < v.tokens.size(); ++id) {
        // Byte pieces only stand for bytes no piece covers (llama.cpp's
        // resegment); HF's BPE must not merge the byte pieces it falls back to.
        spm.mergeable[id] = !v.isSpecial(id) && v.types[id] != kByte;
        if (v.isAdded(id)) spm.added.emplace_back(static_cast<int32_t>(id), v.isSpecial(id));
    }
    spm.unk = s.unk;
    if (s.addBos) spm.bos = s.bos;
    if (s.addEos) spm.eos = s.eos;
    spm.addSpacePrefix = meta.flag("tokenizer.ggml.add_space_prefix", true);
    return sentencePieceTokenizerJson(spm);
}

std::string configJson(const Metadata& meta, const GgufVocab& v, const Specials& s, bool cleanSpaces) {
    Json c;
    c["tokenizer_class"] = "PreTrainedTokenizerFast";
    for (const auto& [name, id] : {std::pair<const char*, std::optional<int32_t>>{"bos_token", s.bos},
                                   {"eos_token", s.eos}, {"unk_token", s.unk}, {"pad_token", s.pad}})
        if (id) c[name] = v.tokens[*id];
    c["add_bos_token"] = s.addBos;
    c["add_eos_token"] = s.addEos;
    c["clean_up_tokenization_spaces"] = cleanSpaces;
    if (const auto arch = meta.string("general.architecture")) {
        const GgufValue* context = meta.find(*arch + ".context_length");
        if (context && context->isInteger() && integerValue(*context) > 0)
            c["model_max_length"] = integerValue(*context);
    }
    if (const auto chat = meta.string("tokenizer.chat_template")) c["chat_template"] = *chat;
    return c.dump(2) + "\n";
}

}  // namespace

std::string sentencePieceTokenizerJson(const SentencePieceVocab& v) {
    std::unordered_map<std::string, int32_t> idOf;
    Json vocab = vocabJson(v.pieces, &idOf);
    Json merges = scoreRankedMerges(v, idOf);
    Json prefix = {{"type", "Prepend"}, {"prepend", kSpace}};
    Json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
    Json normalizers = v.addSpacePrefix ? Json{prefix, replace} : Json::array({replace});
    Json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}};
    if (v.addSpacePrefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    BpeOptions bpe;
    if (v.unk) bpe.unk = v.pieces.at(*v.unk);
    bpe.byteFallback = true;
    return tokenizerJson(addedTokensJson(v.added, v.pieces), {{"type", "Sequence"}, {"normalizers", normalizers}},
                         nullptr, templateProcessing(v.bos, v.eos, v.pieces),
                         {{"type", "Sequence"}, {"decoders", decoders}}, std::move(vocab), std::move(merges), bpe);
}

GgufTokenizerFiles ggufTokenizerFiles(const std::map<std::string, GgufValue>& metadata, const std::string& file) {
    const Metadata meta(metadata, file);
    const std::string model = *meta.string("tokenizer.ggml.model", true);
    if (model != "gpt2" && model != "llama")
        throw TokenizerError(file + ": tokenizer.ggml.model is '" + model +
                             "', a tokenizer KVLens cannot import (expected gpt2 or llama)");
    const bool spm = model == "llama";
    const PreTokenizerType* type = spm ? nullptr : &preTokenizerType(meta);
    const GgufVocab v = readVocab(meta, spm);
    const Specials s = readSpecials(meta, v.tokens.size(), spm, type && type->addBos);
    GgufTokenizerFiles files;
    files.tokenizerJson = spm ? spmTokenizerJson(meta, v, s) : byteLevelTokenizerJson(meta, v, *type, s);
    files.tokenizerConfigJson = configJson(meta, v, s, !spm && type->cleanSpaces);
    return files;
}

}  // namespace kvlens
