// Real vocabularies against reference ids: every string in
// tests/data/tokenizer/<family>.json (written by make_reference.py with Hugging
// Face's tokenizers) must encode to the same ids and decode to the same text.
// The tokenizer.json files are read in place from ../shared/data/tokenizers; a
// missing file fails the test, so a machine without them cannot pass silently.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "tokenizer_test_common.h"

namespace {

fs::path tokenizerDir()
{
    if (const char* dir = std::getenv("KVLENS_TOKENIZER_DIR")) return dir;
    return fs::path(KVLENS_SHARED_DATA) / "tokenizers";
}

// Loads each family once per test binary (Qwen3's file is 11 MB).
const Tokenizer* load(const std::string& family, std::string& error)
{
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& slot = cache[family];
    if (!slot) {
        const fs::path file = tokenizerDir() / family / "tokenizer.json";
        if (!fs::exists(file)) {
            error = file.string() + " is missing: the real tokenizer files live in ../shared/data/tokenizers beside the checkout (or set KVLENS_TOKENIZER_DIR)";
            return nullptr;
        }
        slot = std::make_unique<Tokenizer>(Tokenizer::fromFile(file));
    }
    return slot.get();
}

#define LOAD_OR_FAIL(var, family)                    \
    std::string loadError_;                          \
    const Tokenizer* var = load(family, loadError_); \
    ASSERT_NE(var, nullptr) << loadError_

json readJson(const fs::path& file)
{
    std::ifstream in(file);
    return json::parse(in);
}

class Reference : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Reference, IdsAndDecodedTextMatchHf)
{
    LOAD_OR_FAIL(tok, GetParam());
    const json cases = readJson(kData / (GetParam() + ".json"));
    ASSERT_GE(cases.size(), 60u) << "expected at least 30 strings, each with and without special tokens";
    for (const json& c : cases) {
        const std::string text = c.at("text");
        const bool addSpecial = c.at("add_special");
        const Ids expected = c.at("ids").get<Ids>();
        const std::string where = "text " + json(text).dump() + (addSpecial ? " with" : " without") + " special tokens";
        const Ids ids = tok->encode(text, addSpecial);
        EXPECT_EQ(ids, expected) << where;
        EXPECT_EQ(tok->decode(expected), c.at("decoded").get<std::string>()) << where;
        EXPECT_EQ(tok->decode(expected, true), c.at("decoded_skip_special").get<std::string>()) << where;
    }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, Reference, ::testing::Values("gpt2", "llama2", "llama3", "qwen3"),
                         [](const auto& info) { return info.param; });

// Ids checked by hand against the vocabulary, independently of the JS port.
TEST(HandChecked, Gpt2)
{
    LOAD_OR_FAIL(tok, "gpt2");
    EXPECT_EQ(tok->encode("Hello world"), (Ids{15496, 995}));
    EXPECT_EQ(tok->tokenString(995), "\u0120world");
    EXPECT_EQ(tok->eosId(), 50256);
    EXPECT_EQ(tok->vocabSize(), 50257);
    EXPECT_EQ(tok->tokenLabel(995), " world");
    EXPECT_EQ(tok->tokenLabel(tok->tokenToId("\u010A").value()), "\u23CE");  // "Ċ" is "\n"
    EXPECT_EQ(tok->tokenLabel(tok->tokenToId("\u0120").value()), "\u2423");   // "Ġ" is " "
}

TEST(HandChecked, Llama3)
{
    LOAD_OR_FAIL(tok, "llama3");
    EXPECT_EQ(tok->encode("Hello world", false), (Ids{9906, 1917}));
    // Digits are split in runs of at most three.
    EXPECT_EQ(tok->encode("12345", false), (Ids{tok->tokenToId("123").value(), tok->tokenToId("45").value()}));
    EXPECT_EQ(tok->bosId(), 128000);
    EXPECT_EQ(tok->eosId(), 128001);
    EXPECT_EQ(tok->vocabSize(), 128256);
    EXPECT_TRUE(tok->isSpecial(128000));
    EXPECT_EQ(tok->tokenLabel(128000), "<|begin_of_text|>");
}

TEST(HandChecked, Llama3WithBosTemplateAddsBeginOfText)
{
    // This package's file predates Meta's TemplateProcessing fix; with the
    // official post-processor "Hello world" is [128000, 9906, 1917].
    json j = readJson(tokenizerDir() / "llama3" / "tokenizer.json");
    j["post_processor"] = {
        {"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
          {{"type", "TemplateProcessing"},
           {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"pair", json::array()},
           {"special_tokens", {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {128000}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
    const Tokenizer tok = Tokenizer::fromJson(j.dump(), "llama3-with-bos.json");
    EXPECT_EQ(tok.encode("Hello world"), (Ids{128000, 9906, 1917}));
    EXPECT_EQ(tok.encode("Hello world", false), (Ids{9906, 1917}));
    EXPECT_EQ(tok.decode({128000, 9906, 1917}, true), "Hello world");
}

TEST(HandChecked, Llama2StyleByteFallback)
{
    LOAD_OR_FAIL(tok, "llama2");
    const auto id = [&](const char* t) { return tok->tokenToId(t).value(); };
    EXPECT_EQ(tok->encode("Hello world"), (Ids{1, id("\u2581Hello"), id("\u2581world")}));
    // "\n" is not in the vocabulary: it falls back to its byte token.
    EXPECT_EQ(tok->encode("\n", false), (Ids{id("\u2581"), id("<0x0A>")}));
    EXPECT_EQ(tok->bosId(), 1);
    EXPECT_EQ(tok->eosId(), 2);
    EXPECT_EQ(tok->tokenLabel(id("<0x0A>")), "\u23CE");
    EXPECT_EQ(tok->tokenLabel(id("\u2581Hello")), " Hello");
    EXPECT_EQ(tok->tokenLabel(id("\u2581")), "\u2423");
    EXPECT_EQ(tok->tokenLabel(id("<0xE4>")), "<0xE4>");
}

// Predictions shown one token at a time read as the decoded text: the
// pieces of a sentence join to exactly what decode() gives, words are not
// split by spaces, and a character spread over byte tokens comes whole.
TEST(HandChecked, DecodedPiecesJoinToTheDecodedText)
{
    for (const char* family : {"llama2", "llama3", "qwen3", "gpt2"}) {
        LOAD_OR_FAIL(tok, family);
        for (const char* text : {"The children loved the park near the lake.", "a caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 ok\nnext line"}) {
            const Ids ids = tok->encode(text, false);
            const std::vector<std::string> pieces = tok->decodePieces(ids);
            ASSERT_EQ(pieces.size(), ids.size());
            std::string joined;
            for (const auto& p : pieces) joined += p;
            EXPECT_EQ(joined, tok->decode(ids)) << family << ": " << text;
        }
        const Ids park = tok->encode("They loved the park", false);
        const std::vector<std::string> pieces = tok->decodePieces(park);
        EXPECT_NE(std::find(pieces.begin(), pieces.end(), " park"), pieces.end()) << family;
    }
}

TEST(HandChecked, Qwen3NormalizesToNfc)
{
    LOAD_OR_FAIL(tok, "qwen3");
    EXPECT_EQ(tok->encode("Hello world"), (Ids{9707, 1879}));
    EXPECT_EQ(tok->encode("cafe\xCC\x81"), tok->encode("caf\xC3\xA9"));
    EXPECT_EQ(tok->encode("<|im_start|>"), (Ids{151644}));
    EXPECT_EQ(tok->bosId(), std::nullopt);
    EXPECT_EQ(tok->eosId(), 151643);
}

TEST(HandChecked, EveryLabelIsNonEmpty)
{
    for (const char* family : {"gpt2", "llama2", "llama3", "qwen3"}) {
        LOAD_OR_FAIL(tok, family);
        for (int32_t id = 0; id < tok->vocabSize(); id += 7) {
            if (tok->tokenToId(tok->tokenString(id)) != id) continue;  // a hole in the id range
            ASSERT_FALSE(tok->tokenLabel(id).empty()) << family << " id " << id;
        }
    }
}

// Byte-level BPE without a normalizer loses nothing: any valid UTF-8 text
// decodes back to itself (HF guarantees the same).
TEST(HandChecked, ByteLevelFamiliesRoundTripRandomText)
{
    std::mt19937 rng(42);
    const auto randomText = [&] {
        std::string s;
        const int len = 1 + static_cast<int>(rng() % 40);
        for (int i = 0; i < len; ++i) {
            // Mostly ASCII and common scripts, sometimes any scalar value.
            char32_t cp = rng() % 4 ? 0x20 + rng() % 0x5F : rng() % 0x11000 * 16 + rng() % 16;
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            if (cp > 0x10FFFF) cp = 0x10FFFD;
            if (cp < 0x80) s.push_back(static_cast<char>(cp));
            else if (cp < 0x800) s += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
            else if (cp < 0x10000)
                s += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                      static_cast<char>(0x80 | (cp & 0x3F))};
            else
                s += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                      static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
        }
        return s;
    };
    for (const char* family : {"gpt2", "llama3"}) {
        LOAD_OR_FAIL(tok, family);
        for (int i = 0; i < 300; ++i) {
            const std::string text = randomText();
            ASSERT_EQ(tok->decode(tok->encode(text, false)), text) << family << ": " << json(text).dump();
        }
    }
}

// 8k-token prompts must encode interactively; random words defeat the cache.
TEST(Performance, EncodesAnEightThousandTokenPromptQuickly)
{
    std::mt19937 rng(7);
    std::string text;
    while (text.size() < 40000) {
        const int len = 2 + static_cast<int>(rng() % 9);
        for (int i = 0; i < len; ++i) text.push_back(static_cast<char>('a' + rng() % 26));
        text += (rng() % 10 == 0) ? ".\n" : " ";
    }
    for (const char* family : {"llama2", "llama3", "qwen3"}) {
        LOAD_OR_FAIL(tok, family);
        const auto start = std::chrono::steady_clock::now();
        const size_t count = tok->encode(text).size();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        RecordProperty(std::string(family) + "_ms", static_cast<int>(ms));
        EXPECT_GT(count, 8000u) << family;
        EXPECT_LT(ms, 3000.0) << family << ": " << count << " tokens took " << ms << " ms";
    }
}
