// GGUF tokenizer metadata as HF tokenizer files (core/model/gguf_tokenizer.h):
// tiny hand-made vocabularies whose llama.cpp ids are worked out by hand in
// each test, encoded through core/tokenizer; and each malformed-metadata
// error naming the key at fault. Torch-free.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/gguf_tokenizer.h"
#include "core/tokenizer/tokenizer.h"

namespace {

using kvlens::FormatError;
using kvlens::GgufValue;
using kvlens::Tokenizer;
using kvlens::TokenizerError;
using Metadata = std::map<std::string, GgufValue>;
using Ids = std::vector<int32_t>;

GgufValue str(const std::string& s) {
    GgufValue v;
    v.type = GgufValue::Type::String;
    v.s = s;
    return v;
}

GgufValue u32(uint64_t u) {
    GgufValue v;
    v.type = GgufValue::Type::U32;
    v.u = u;
    return v;
}

GgufValue flag(bool b) {
    GgufValue v;
    v.type = GgufValue::Type::Bool;
    v.u = b;
    return v;
}

GgufValue array(GgufValue::Type element, std::vector<GgufValue> elements) {
    GgufValue v;
    v.type = GgufValue::Type::Array;
    v.elementType = element;
    v.elements = std::move(elements);
    return v;
}

GgufValue strings(const std::vector<std::string>& items) {
    std::vector<GgufValue> out;
    for (const std::string& s : items) out.push_back(str(s));
    return array(GgufValue::Type::String, out);
}

template <typename T>
GgufValue numbers(GgufValue::Type type, const std::vector<T>& items) {
    std::vector<GgufValue> out;
    for (T x : items) {
        GgufValue v;
        v.type = type;
        if (type == GgufValue::Type::F32) v.f = static_cast<double>(x);
        else v.i = static_cast<int64_t>(x);
        out.push_back(v);
    }
    return array(type, out);
}

GgufValue int32s(const std::vector<int64_t>& items) { return numbers(GgufValue::Type::I32, items); }
GgufValue float32s(const std::vector<double>& items) { return numbers(GgufValue::Type::F32, items); }

// A byte-level vocabulary (GPT-2's byte map: "Ġ" is the space byte, "Ċ" the
// newline) with the merges a tokenizer trained on it would have, "1 2"
// included, which pre-tokenizers that isolate digits never reach.
Metadata tinyGpt2(const std::string& pre) {
    return {
        {"general.architecture", str("llama")},
        {"llama.context_length", u32(2048)},
        {"tokenizer.ggml.model", str("gpt2")},
        {"tokenizer.ggml.pre", str(pre)},
        {"tokenizer.ggml.tokens",
         strings({"<|endoftext|>", "<|im_start|>", "<|im_end|>", "h", "e", "l", "o", "Ġ", "w", "r", "d", "1", "2",
                  "3", "he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "ld", "Ġworld", "12", "Ċ", "<tool>", "x"})},
        // <|endoftext|> is typed normal: llama.cpp makes it a control token by name.
        {"tokenizer.ggml.token_type",
         int32s({1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1})},
        {"tokenizer.ggml.merges", strings({"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d",
                                           "Ġwor ld", "1 2"})},
        {"tokenizer.ggml.bos_token_id", u32(1)},
        {"tokenizer.ggml.eos_token_id", u32(2)},
        {"tokenizer.ggml.padding_token_id", u32(0)},
        {"tokenizer.ggml.add_bos_token", flag(false)},
        {"tokenizer.chat_template", str("{{ messages }}")},
    };
}

// A SentencePiece vocabulary: "bc" scores higher than "ab", so llama.cpp
// merges "abc" as a + bc whatever the ids say.
Metadata tinyLlama() {
    return {
        {"tokenizer.ggml.model", str("llama")},
        {"tokenizer.ggml.tokens",
         strings({"<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>", "▁", "a", "b", "c", "ab", "bc", "▁a"})},
        {"tokenizer.ggml.scores", float32s({0, 0, 0, 0, 0, 0, -5, -6, -6, -6, -2, -1, -3})},
        {"tokenizer.ggml.token_type", int32s({2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1})},
        {"tokenizer.ggml.bos_token_id", u32(1)},
        {"tokenizer.ggml.eos_token_id", u32(2)},
        {"tokenizer.ggml.unknown_token_id", u32(0)},
    };
}

Tokenizer load(const Metadata& m) {
    return Tokenizer::fromJson(kvlens::ggufTokenizerFiles(m, "tiny.gguf").tokenizerJson, "tiny tokenizer.json");
}

// The error of type E, whose message names the file and each of `parts`.
template <class E>
void expectError(const Metadata& m, const std::vector<std::string>& parts) {
    try {
        kvlens::ggufTokenizerFiles(m, "tiny.gguf");
        ADD_FAILURE() << "no error; expected one naming " << parts.front();
    } catch (const E& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("tiny.gguf"), std::string::npos) << what;
        for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
    }
}

}  // namespace

TEST(GgufTokenizer, Gpt2ByteLevelEncodesAsLlamaCpp) {
    const Tokenizer smollm = load(tinyGpt2("smollm"));
    EXPECT_EQ(smollm.encode("hello world"), (Ids{17, 22}));
    EXPECT_EQ(smollm.encode("hello\n"), (Ids{17, 24}));
    // Control tokens are cut out first; so is <|endoftext|>, typed normal.
    EXPECT_EQ(smollm.encode("<|im_start|>hello<|im_end|><|endoftext|>"), (Ids{1, 17, 2, 0}));
    // A user-defined token too, but it is not special.
    EXPECT_EQ(smollm.encode("hello<tool>x"), (Ids{17, 25, 26}));
    EXPECT_FALSE(smollm.isSpecial(25));
    EXPECT_TRUE(smollm.isSpecial(1));
    // smollm (as starcoder) isolates each digit: "1 2" never applies.
    EXPECT_EQ(smollm.encode("12 3"), (Ids{11, 12, 7, 13}));
    // gpt-2 keeps " ?\p{N}+" runs whole.
    EXPECT_EQ(load(tinyGpt2("gpt-2")).encode("12 3"), (Ids{23, 7, 13}));
    // "default" runs digits (\p{N}+) together too; llama3 takes them by threes.
    EXPECT_EQ(load(tinyGpt2("default")).encode("12 3"), (Ids{23, 7, 13}));
    EXPECT_EQ(load(tinyGpt2("llama-bpe")).encode("12 3", false), (Ids{23, 7, 13}));
    EXPECT_EQ(smollm.decode({17, 22}), "hello world");
}

TEST(GgufTokenizer, Gpt2AddsBosAndEosWhenTheMetadataSaysSo) {
    Metadata m = tinyGpt2("smollm");
    EXPECT_EQ(load(m).encode("hello"), (Ids{17}));
    m["tokenizer.ggml.add_bos_token"] = flag(true);
    m["tokenizer.ggml.add_eos_token"] = flag(true);
    EXPECT_EQ(load(m).encode("hello"), (Ids{1, 17, 2}));
    EXPECT_EQ(load(m).encode("hello", false), (Ids{17}));
    // Llama 3's pre-tokenizer adds BOS unless the metadata says otherwise.
    m = tinyGpt2("llama3");
    m.erase("tokenizer.ggml.add_bos_token");
    EXPECT_EQ(load(m).encode("hello"), (Ids{1, 17}));
}

TEST(GgufTokenizer, TokenizerConfigCarriesTheSpecialTokensAndTemplate) {
    const auto files = kvlens::ggufTokenizerFiles(tinyGpt2("smollm"), "tiny.gguf");
    const auto c = nlohmann::json::parse(files.tokenizerConfigJson);
    EXPECT_EQ(c.at("tokenizer_class"), "PreTrainedTokenizerFast");
    EXPECT_EQ(c.at("bos_token"), "<|im_start|>");
    EXPECT_EQ(c.at("eos_token"), "<|im_end|>");
    EXPECT_EQ(c.at("pad_token"), "<|endoftext|>");
    EXPECT_FALSE(c.contains("unk_token"));
    EXPECT_EQ(c.at("add_bos_token"), false);
    EXPECT_EQ(c.at("chat_template"), "{{ messages }}");
    EXPECT_EQ(c.at("model_max_length"), 2048);
}

TEST(GgufTokenizer, LlamaSentencePieceMergesByScore) {
    Metadata m = tinyLlama();
    const Tokenizer t = load(m);
    // BOS (the default for "llama"), then "▁abc": ▁a + bc, as bc outscores ab.
    EXPECT_EQ(t.encode("abc"), (Ids{1, 12, 11}));
    // Bytes without a piece fall back to <0xXX>.
    EXPECT_EQ(t.encode("\n", false), (Ids{6, 3}));
    EXPECT_EQ(t.encode("é", false), (Ids{6, 4, 5}));
    // Text after a special token gets the dummy prefix again.
    EXPECT_EQ(t.encode("a<s>b", false), (Ids{12, 1, 6, 8}));
    EXPECT_EQ(t.decode(t.encode("abc b", false)), "abc b");
    // Swap the scores and ab merges first.
    m["tokenizer.ggml.scores"] = float32s({0, 0, 0, 0, 0, 0, -5, -6, -6, -6, -1, -2, -3});
    EXPECT_EQ(load(m).encode("abc", false), (Ids{6, 10, 9}));
    m["tokenizer.ggml.add_space_prefix"] = flag(false);
    m["tokenizer.ggml.add_bos_token"] = flag(false);
    EXPECT_EQ(load(m).encode("abc"), (Ids{10, 9}));
    const auto c = nlohmann::json::parse(kvlens::ggufTokenizerFiles(tinyLlama(), "tiny.gguf").tokenizerConfigJson);
    EXPECT_EQ(c.at("bos_token"), "<s>");
    EXPECT_EQ(c.at("unk_token"), "<unk>");
    EXPECT_EQ(c.at("add_bos_token"), true);
}

TEST(GgufTokenizer, RefusesMalformedMetadataNamingTheKey) {
    Metadata m = tinyGpt2("smollm");
    m.erase("tokenizer.ggml.model");
    expectError<FormatError>(m, {"tokenizer.ggml.model", "absent"});
    m["tokenizer.ggml.model"] = u32(2);
    expectError<FormatError>(m, {"tokenizer.ggml.model", "uint32", "expected a string"});
    m["tokenizer.ggml.model"] = str("bert");
    expectError<TokenizerError>(m, {"tokenizer.ggml.model", "bert"});
    expectError<TokenizerError>(tinyGpt2("no-such-pre"), {"tokenizer.ggml.pre", "no-such-pre"});

    m = tinyGpt2("smollm");
    m.erase("tokenizer.ggml.tokens");
    expectError<FormatError>(m, {"tokenizer.ggml.tokens", "absent"});
    m["tokenizer.ggml.tokens"] = int32s({1, 2});
    expectError<FormatError>(m, {"tokenizer.ggml.tokens", "int32", "expected an array of strings"});
    m = tinyGpt2("smollm");
    m["tokenizer.ggml.tokens"].elements[4] = str("h");
    expectError<FormatError>(m, {"tokenizer.ggml.tokens[4]", "'h'", "token 3"});
    m = tinyGpt2("smollm");
    m["tokenizer.ggml.token_type"].elements.pop_back();
    expectError<FormatError>(m, {"tokenizer.ggml.token_type", "26 entries", "expected 27"});
    m["tokenizer.ggml.token_type"] = float32s({1});
    expectError<FormatError>(m, {"tokenizer.ggml.token_type", "float32"});

    m = tinyGpt2("smollm");
    m["tokenizer.ggml.bos_token_id"] = u32(27);
    expectError<FormatError>(m, {"tokenizer.ggml.bos_token_id", "27", "below 27"});
    m = tinyGpt2("smollm");
    m["tokenizer.ggml.add_bos_token"] = u32(1);
    expectError<FormatError>(m, {"tokenizer.ggml.add_bos_token", "expected a bool"});
    m.erase("tokenizer.ggml.bos_token_id");
    m["tokenizer.ggml.add_bos_token"] = flag(true);
    expectError<FormatError>(m, {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id"});
}

TEST(GgufTokenizer, RefusesMergesOutsideTheVocabulary) {
    Metadata m = tinyGpt2("smollm");
    m.erase("tokenizer.ggml.merges");
    expectError<FormatError>(m, {"tokenizer.ggml.merges", "absent"});
    m = tinyGpt2("smollm");
    m["tokenizer.ggml.merges"].elements[3] = str("hell q");
    expectError<FormatError>(m, {"tokenizer.ggml.merges[3]", "'q'", "not in tokenizer.ggml.tokens"});
    m["tokenizer.ggml.merges"].elements[3] = str("he o");
    expectError<FormatError>(m, {"tokenizer.ggml.merges[3]", "'heo'", "not in tokenizer.ggml.tokens"});
    m["tokenizer.ggml.merges"].elements[3] = str("hello");
    expectError<FormatError>(m, {"tokenizer.ggml.merges[3]", "expected two tokens separated by a space"});
}

TEST(GgufTokenizer, RefusesLlamaScoresThatDoNotMatchTheTokens) {
    Metadata m = tinyLlama();
    m.erase("tokenizer.ggml.scores");
    expectError<FormatError>(m, {"tokenizer.ggml.scores", "absent"});
    m["tokenizer.ggml.scores"] = float32s({0, 0});
    expectError<FormatError>(m, {"tokenizer.ggml.scores", "2 entries", "expected 13"});
    m["tokenizer.ggml.scores"] = strings({"0"});
    expectError<FormatError>(m, {"tokenizer.ggml.scores", "an array of string"});
    m = tinyLlama();
    m["tokenizer.ggml.unknown_token_id"] = u32(99);
    expectError<FormatError>(m, {"tokenizer.ggml.unknown_token_id", "99"});
}
