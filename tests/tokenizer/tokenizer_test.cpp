// Tokenizer behaviours checked on tiny hand-made vocabularies, where the
// expected ids follow from HF's rules by hand: WordLevel, added-token flags,
// split behaviours, Metaspace, byte fallback, unk fusing, and the errors a
// bad tokenizer.json or a bad input must produce.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer_test_common.h"

namespace {

json addedToken(int id, const std::string& content, bool special, const json& flags = json::object())
{
    json t = {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
              {"rstrip", false}, {"normalized", false}, {"special", special}};
    t.update(flags);
    return t;
}

json tokenizerJson(const json& model, const json& normalizer = nullptr, const json& pre = nullptr,
                   const json& decoder = nullptr, const json& added = json::array(), const json& post = nullptr)
{
    return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
            {"normalizer", normalizer}, {"pre_tokenizer", pre}, {"post_processor", post},
            {"decoder", decoder}, {"model", model}};
}

json wordLevel(const json& vocab) { return {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "<unk>"}}; }

Tokenizer make(const json& j) { return Tokenizer::fromJson(j.dump(), "inline.json"); }

std::string readFile(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Runs `f` and returns the message of the exception of type E it throws.
template <class E, class F>
std::string messageOf(F f)
{
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("wrong exception type: ") + e.what();
    }
    return "no exception";
}

}  // namespace

TEST(WordLevelFixture, EncodesWithNormalizerPreTokenizerAndTemplate)
{
    const Tokenizer tok = Tokenizer::fromFile(kData / "wordlevel.json");
    EXPECT_EQ(tok.encode("The code for the RED door is 4821."), (Ids{1, 3, 4, 5, 3, 6, 7, 8, 9, 10}));
    EXPECT_EQ(tok.encode("The code", false), (Ids{3, 4}));
    // NFC composes e + U+0301 into é before the lookup.
    EXPECT_EQ(tok.encode("Cafe\xCC\x81?", false), (Ids{11, 13}));
    EXPECT_EQ(tok.encode("the blue door", false), (Ids{3, 0, 7}));
    // Added tokens are cut out of the raw text, before lowercasing.
    EXPECT_EQ(tok.encode("<eos>the<EOS>", false), (Ids{2, 3, 0, 0, 0}));
    EXPECT_EQ(tok.encode("", true), (Ids{1}));
}

TEST(WordLevelFixture, DecodesLabelsAndSpecialIds)
{
    const Tokenizer tok = Tokenizer::fromFile(kData / "wordlevel.json");
    // No decoder: HF joins the tokens with spaces.
    EXPECT_EQ(tok.decode({1, 3, 4}), "<bos> the code");
    EXPECT_EQ(tok.decode({1, 3, 4}, true), "the code");
    EXPECT_EQ(tok.vocabSize(), 14);
    EXPECT_TRUE(tok.isSpecial(1));
    EXPECT_FALSE(tok.isSpecial(3));
    EXPECT_EQ(tok.bosId(), 1);
    EXPECT_EQ(tok.eosId(), 2);  // found by its well-known name
    EXPECT_EQ(tok.tokenLabel(11), "café");
    EXPECT_EQ(tok.tokenString(9), "4821");
    EXPECT_EQ(tok.tokenToId("door"), 7);
    EXPECT_EQ(tok.tokenToId("<bos>"), 1);
    EXPECT_EQ(tok.tokenToId("blue"), std::nullopt);
}

TEST(WordLevelFixture, CallerCanSetEos)
{
    Tokenizer tok = Tokenizer::fromFile(kData / "wordlevel.json");
    tok.setEosId(2);
    EXPECT_EQ(tok.eosId(), 2);
    Tokenizer moved = std::move(tok);
    EXPECT_EQ(moved.eosId(), 2);
}

TEST(AddedTokens, LstripRstripSingleWordAndNormalizedFollowHf)
{
    const json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"x", 3}, {"y", 4}, {" ", 5}, {"ab", 6}};
    const json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}, {"unk_token", "<unk>"}};
    const json added = {addedToken(7, "<l>", true, {{"lstrip", true}}), addedToken(8, "<r>", true, {{"rstrip", true}}),
                        addedToken(9, "xy", false, {{"single_word", true}}),
                        addedToken(10, "AB", false, {{"normalized", true}})};
    const Tokenizer tok = make(tokenizerJson(model, {{"type", "Lowercase"}}, nullptr, nullptr, added));
    EXPECT_EQ(tok.encode("a  <l> b"), (Ids{1, 7, 5, 2}));
    EXPECT_EQ(tok.encode("a <r>  b"), (Ids{1, 5, 8, 2}));
    // "xy" inside a word is not a single word; at the end after a space it is.
    EXPECT_EQ(tok.encode("axy b xy"), (Ids{1, 3, 4, 5, 2, 5, 9}));
    // A normalized added token is matched in the lowercased text.
    EXPECT_EQ(tok.encode("xAb"), (Ids{3, 10}));
    // The normalized added token wins over the BPE merge "a b".
    EXPECT_EQ(tok.encode("ba ab"), (Ids{2, 1, 5, 10}));
}

TEST(SplitPreTokenizer, EveryBehaviorCutsLikeHf)
{
    const json vocab = {{"<unk>", 0}, {"a", 1},  {"b", 2},  {"c", 3},  {"-", 4},
                        {"--", 5},    {"a-", 6}, {"b-", 7}, {"-b", 8}, {"-c", 9}};
    const auto encodeWith = [&](const char* behavior) {
        const json pre = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}};
        return make(tokenizerJson(wordLevel(vocab), nullptr, pre)).encode("a-b--c");
    };
    EXPECT_EQ(encodeWith("Removed"), (Ids{1, 2, 3}));
    EXPECT_EQ(encodeWith("Isolated"), (Ids{1, 4, 2, 4, 4, 3}));
    EXPECT_EQ(encodeWith("MergedWithPrevious"), (Ids{6, 7, 4, 3}));
    EXPECT_EQ(encodeWith("MergedWithNext"), (Ids{1, 8, 4, 9}));
    EXPECT_EQ(encodeWith("Contiguous"), (Ids{1, 4, 2, 5, 3}));
}

TEST(SplitPreTokenizer, InvertedRegexKeepsMatches)
{
    const json vocab = {{"<unk>", 0}, {"ab", 1}, {"12", 2}, {"-", 3}};
    const json pre = {{"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+|\\p{N}+"}}}, {"behavior", "Removed"}, {"invert", true}};
    EXPECT_EQ(make(tokenizerJson(wordLevel(vocab), nullptr, pre)).encode("ab-12  ab"), (Ids{1, 2, 1}));
}

TEST(Metaspace, PrependSchemeAndSplit)
{
    const json vocab = {{"<unk>", 0}, {"hi", 1}, {"\u2581hi", 2}, {"\u2581there", 3}, {"<s>", 4}};
    // json::array: a one-element braced list of json is a copy under clang, an array under gcc.
    const json added = json::array({addedToken(4, "<s>", true)});
    const auto tokenizer = [&](const char* scheme, bool split) {
        const json pre = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split}};
        const json dec = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split}};
        return make(tokenizerJson(wordLevel(vocab), nullptr, pre, dec, added));
    };
    EXPECT_EQ(tokenizer("first", true).encode("hi there"), (Ids{2, 3}));
    EXPECT_EQ(tokenizer("first", true).encode("<s>hi there"), (Ids{4, 1, 3}));
    EXPECT_EQ(tokenizer("always", true).encode("<s>hi there"), (Ids{4, 2, 3}));
    EXPECT_EQ(tokenizer("never", true).encode("hi there"), (Ids{1, 3}));
    EXPECT_EQ(tokenizer("always", false).encode("hi there"), (Ids{0}));
    EXPECT_EQ(tokenizer("always", true).decode({2, 3}), "hi there");
    EXPECT_EQ(tokenizer("never", true).decode({2, 3}), " hi there");
}

TEST(BytePairEncoding, ByteFallbackAndUnkFusing)
{
    const json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {"<0xC3>", 4}, {"<0xA9>", 5}};
    const json decoder = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
    const auto tokenizer = [&](bool fuse) {
        const json model = {{"type", "BPE"}, {"vocab", vocab},       {"merges", json::array({json::array({"a", "b"})})},
                            {"unk_token", "<unk>"}, {"fuse_unk", fuse}, {"byte_fallback", true}};
        return make(tokenizerJson(model, nullptr, nullptr, decoder));
    };
    // é is not in the vocabulary: its UTF-8 bytes C3 A9 are.
    EXPECT_EQ(tokenizer(false).encode("ab\xC3\xA9"), (Ids{3, 4, 5}));
    EXPECT_EQ(tokenizer(false).decode({3, 4, 5}), "ab\xC3\xA9");
    // z has no byte tokens: unk, one per character unless fused.
    EXPECT_EQ(tokenizer(false).encode("zza"), (Ids{0, 0, 1}));
    EXPECT_EQ(tokenizer(true).encode("zza"), (Ids{0, 1}));
    // A lone continuation byte decodes to U+FFFD, one per byte.
    EXPECT_EQ(tokenizer(false).decode({5, 5, 1}), "\xEF\xBF\xBD\xEF\xBF\xBD" "a");
}

TEST(BytePairEncoding, MergesByRankThenLeftmost)
{
    // Ranks: "b c" (0) beats "a b" (1), so "abc" -> a + bc, not ab + c.
    const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"aa", 5}, {"aaa", 6}};
    const json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"b c", "a b", "a a", "aa a"}}};
    const Tokenizer tok = make(tokenizerJson(model));
    EXPECT_EQ(tok.encode("abc"), (Ids{0, 4}));
    // Equal ranks: the leftmost pair merges first ("aa" + "a", then "aaa").
    EXPECT_EQ(tok.encode("aaa"), (Ids{6}));
    EXPECT_EQ(tok.encode("aaaa"), (Ids{5, 5}));
}

TEST(Errors, MalformedJsonIsAFormatErrorNamingTheFile)
{
    const std::string msg = messageOf<kvlens::FormatError>([] { Tokenizer::fromFile(kData / "malformed.json"); });
    EXPECT_NE(msg.find("malformed.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not valid JSON at line"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << "parser text: " << msg;
}

TEST(Errors, UnsupportedComponentsAreTokenizerErrorsNamingThem)
{
    std::string msg = messageOf<kvlens::TokenizerError>([] { Tokenizer::fromFile(kData / "unknown_model.json"); });
    EXPECT_NE(msg.find("unknown_model.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Unigram"), std::string::npos) << msg;
    msg = messageOf<kvlens::TokenizerError>([] { Tokenizer::fromFile(kData / "unknown_pretokenizer.json"); });
    EXPECT_NE(msg.find("unknown_pretokenizer.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("UnicodeScripts"), std::string::npos) << msg;
    EXPECT_NE(msg.find("pre_tokenizer.pretokenizers[1]"), std::string::npos) << msg;
    const json vocab = {{"<unk>", 0}};
    msg = messageOf<kvlens::TokenizerError>([&] { make(tokenizerJson(wordLevel(vocab), {{"type", "Precompiled"}})); });
    EXPECT_NE(msg.find("normalizer 'Precompiled'"), std::string::npos) << msg;
    msg = messageOf<kvlens::TokenizerError>([&] { make(tokenizerJson(wordLevel(vocab), nullptr, nullptr, {{"type", "CTC"}})); });
    EXPECT_NE(msg.find("decoder 'CTC'"), std::string::npos) << msg;
}

TEST(Errors, MissingOrMistypedFieldsAreFormatErrors)
{
    std::string msg = messageOf<kvlens::FormatError>([] { Tokenizer::fromFile(kData / "missing_merges.json"); });
    EXPECT_NE(msg.find("model.merges"), std::string::npos) << msg;
    msg = messageOf<kvlens::FormatError>([] { make(tokenizerJson(wordLevel({{"a", "zero"}}))); });
    EXPECT_NE(msg.find("model.vocab"), std::string::npos) << msg;
    msg = messageOf<kvlens::FormatError>([] { Tokenizer::fromJson("{\"added_tokens\": []}", "nomodel.json"); });
    EXPECT_NE(msg.find("nomodel.json: missing field 'model'"), std::string::npos) << msg;
    msg = messageOf<kvlens::FormatError>([] { Tokenizer::fromFile(kData / "does_not_exist.json"); });
    EXPECT_NE(msg.find("does_not_exist.json"), std::string::npos) << msg;
}

TEST(Errors, InvalidUtf8NamesTheByteOffset)
{
    const Tokenizer tok = Tokenizer::fromFile(kData / "wordlevel.json");
    EXPECT_NE(messageOf<kvlens::ArgumentError>([&] { tok.encode("the \xFF"); }).find("byte offset 4"), std::string::npos);
    // An overlong encoding and a UTF-16 surrogate are invalid too.
    EXPECT_NE(messageOf<kvlens::ArgumentError>([&] { tok.encode("\xC0\x80"); }).find("byte offset 0"), std::string::npos);
    EXPECT_NE(messageOf<kvlens::ArgumentError>([&] { tok.encode("ab\xED\xA0\x80"); }).find("byte offset 2"), std::string::npos);
    EXPECT_NE(messageOf<kvlens::ArgumentError>([&] { tok.encode("\xE4\xB8"); }).find("byte offset 0"), std::string::npos);
}

// Ids past the vocabulary are a real checkpoint's padding rows: they decode
// and label as <unused:ID> (issue 16); negative ids are errors.
TEST(Errors, NegativeIdsAreArgumentErrorsAndPaddingIdsDecode)
{
    const Tokenizer tok = Tokenizer::fromFile(kData / "wordlevel.json");
    EXPECT_EQ(tok.decode({14}), "<unused:14>");
    EXPECT_EQ(tok.tokenLabel(99), "<unused:99>");
    EXPECT_EQ(tok.tokenString(99), "<unused:99>");
    EXPECT_THROW(tok.decode({-1}), kvlens::ArgumentError);
    EXPECT_THROW(tok.tokenString(-5), kvlens::ArgumentError);
    EXPECT_THROW(tok.tokenLabel(-2), kvlens::ArgumentError);
}

TEST(Errors, CorruptedFilesOnlyThrowKvlensErrors)
{
    // Truncations and byte flips of a valid file: every outcome is either a
    // working tokenizer or a kvlens::Error, never a crash or a foreign exception.
    const std::string text = readFile(kData / "wordlevel.json");
    std::mt19937 rng(1234);
    int loaded = 0, rejected = 0;
    for (int i = 0; i < 400; ++i) {
        std::string broken = text;
        if (i % 2 == 0) {
            broken.resize(rng() % text.size());
        } else {
            for (int k = 0; k < 3; ++k) broken[rng() % broken.size()] = static_cast<char>("{}[]\":,0a\\ \xFF"[rng() % 13]);
        }
        try {
            const Tokenizer tok = Tokenizer::fromJson(broken, "fuzz.json");
            tok.encode("The code for the red door is 4821.");
            ++loaded;
        } catch (const kvlens::Error&) {
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 0);
    EXPECT_EQ(loaded + rejected, 400);
}
