// kvlens_eval: the bundled vocabulary and its tokenizer.json, the synthetic
// corpus (determinism, exact lengths, answers that are really answers) and
// needle probes (placement, scoring). Torch-free.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "core/eval/corpus.h"
#include "core/eval/needle.h"
#include "core/eval/vocabulary.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/scratch_dir.h"

using namespace kvlens::eval;
using Words = std::vector<std::string>;
namespace fs = std::filesystem;

namespace {

const Vocabulary& vocab() { return Vocabulary::bundled(); }

// Index of the first occurrence of `needle` in `hay` at or after `from`, or -1.
int64_t find(const Words& hay, const Words& needle, size_t from = 0)
{
    for (size_t i = from; i + needle.size() <= hay.size(); ++i) {
        if (std::equal(needle.begin(), needle.end(), hay.begin() + static_cast<std::ptrdiff_t>(i))) {
            return static_cast<int64_t>(i);
        }
    }
    return -1;
}

Words slice(const Words& w, size_t begin, size_t end)
{
    return Words(w.begin() + static_cast<std::ptrdiff_t>(begin), w.begin() + static_cast<std::ptrdiff_t>(end));
}

bool isDigit(const std::string& w) { return w.size() == 1 && w[0] >= '0' && w[0] <= '9'; }

}  // namespace

// ---- vocabulary -----------------------------------------------------------

TEST(Vocabulary, SmallReadableAndStable)
{
    EXPECT_LE(vocab().size(), 512);
    EXPECT_GE(vocab().size(), 250);
    EXPECT_EQ(vocab().id("<pad>"), kPadId);
    EXPECT_EQ(vocab().id("<unk>"), kUnkId);
    EXPECT_EQ(vocab().id("<bos>"), kBosId);
    EXPECT_EQ(vocab().id("<eos>"), kEosId);
    for (const char* w : {".", ",", "?", ":", "0", "9", "red", "door", "code", "mara", "tower"}) {
        EXPECT_TRUE(vocab().contains(w)) << w;
    }
    for (int32_t id = 0; id < vocab().size(); ++id) EXPECT_EQ(vocab().id(vocab().word(id)), id);
    EXPECT_FALSE(vocab().contains("4821"));  // codes are read digit by digit
    EXPECT_THROW(vocab().word(vocab().size()), kvlens::ArgumentError);
}

TEST(Vocabulary, SplitWordsMatchesTheTokenizerSplitting)
{
    EXPECT_EQ(splitWords("The code for the red door is 4821."),
              (Words{"The", "code", "for", "the", "red", "door", "is", "4", "8", "2", "1", "."}));
    EXPECT_EQ(splitWords("  door4 ?.\n x_y  "), (Words{"door", "4", "?.", "x_y"}));
    EXPECT_TRUE(splitWords(" \t\n").empty());
    EXPECT_EQ(joinWords({"a", "b", "."}), "a b .");
}

// ---- corpus ---------------------------------------------------------------

TEST(Rng, IsTheStandardEngineAndDrawsInRange)
{
    // The standard fixes mt19937_64's 10000th output of the default seed;
    // the bounded draws are ours, so the golden document below pins them.
    Rng standard(std::mt19937_64::default_seed);
    uint64_t x = 0;
    for (int i = 0; i < 10000; ++i) x = standard.next();
    EXPECT_EQ(x, 9981545732273789042ull);
    Rng rng(7);
    int seen[10] = {};
    for (int i = 0; i < 10000; ++i) ++seen[rng.below(10)];
    for (int c : seen) EXPECT_GT(c, 850);  // ~1000 each
    for (int i = 0; i < 1000; ++i) {
        const int64_t v = rng.between(-3, 3);
        EXPECT_TRUE(v >= -3 && v <= 3);
        const double u = rng.unit();
        EXPECT_TRUE(u >= 0 && u < 1);
    }
}

TEST(Corpus, SameSeedSameDocumentOtherSeedOther)
{
    const Document a = generateDocument({}, 42, 700);
    const Document b = generateDocument({}, 42, 700);
    const Document c = generateDocument({}, 43, 700);
    EXPECT_EQ(a.text, b.text);
    ASSERT_EQ(a.answers.size(), b.answers.size());
    for (size_t i = 0; i < a.answers.size(); ++i) {
        EXPECT_EQ(a.answers[i].position, b.answers[i].position);
        EXPECT_EQ(a.answers[i].kind, b.answers[i].kind);
    }
    EXPECT_NE(a.text, c.text);
}

TEST(Corpus, GoldenStartForSeed1)
{
    // Changes when the generator, its options' defaults or the word lists
    // change: a model trained on the old corpus then needs retraining.
    const Words golden = {"the", "code", "for", "the", "yellow", "locker", "is", "6", "4", "9", "8", ".",
                          "the", "code", "for", "the", "black", "bike", "is", "6", "3", "7", "7", ".",
                          "what", "is", "the", "code", "for", "the", "yellow", "locker", "?", "6", "4", "9",
                          "8", ".", "what", "is"};
    const Document d = generateDocument({}, 1, 256);
    ASSERT_GE(d.words.size(), golden.size());
    EXPECT_EQ(slice(d.words, 0, golden.size()), golden);
}

TEST(Corpus, LengthIsExactInTokens)
{
    for (int64_t length : {0, 1, 2, 3, 4, 5, 7, 11, 17, 18, 64, 100, 257, 1000, 2048}) {
        for (uint64_t seed : {1, 2, 3, 99}) {
            const Document d = generateDocument({}, seed, length);
            EXPECT_EQ(static_cast<int64_t>(d.words.size()), length) << "seed " << seed;
            EXPECT_EQ(splitWords(d.text), d.words);
        }
    }
}

TEST(Corpus, EveryWordIsAPlainVocabularyWord)
{
    CorpusOptions wide;
    wide.codeDigitsMin = 3;
    wide.codeDigitsMax = 6;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        for (const CorpusOptions& opt : {CorpusOptions{}, wide, needleStyleOptions()}) {
            for (const std::string& w : generateDocument(opt, seed, 2048).words) {
                const auto id = vocab().id(w);
                ASSERT_TRUE(id) << "'" << w << "' (seed " << seed << ")";
                EXPECT_GT(*id, kEosId) << "special token in text";
            }
        }
    }
}

// The digits after every later "the code for the C O is" or "what is the
// code for the C O ?" are the ones the first statement gave: a question has
// one answer, and that answer is what the document marks.
TEST(Corpus, FactAnswersAreTheIntroducedCodesAtAllDistances)
{
    const Document d = generateDocument({}, 5, 1024);
    std::map<Words, std::pair<Words, int64_t>> first;  // key -> (digits, position)
    std::vector<int64_t> distances;
    size_t marked = 0;
    for (size_t i = 0; i + 8 < d.words.size(); ++i) {
        // "what is the code for the" also holds "the code for the".
        const bool statement = slice(d.words, i, i + 4) == Words{"the", "code", "for", "the"} &&
                               (i < 2 || d.words[i - 2] != "what");
        const bool question = slice(d.words, i, i + 5) == Words{"what", "is", "the", "code", "for"};
        if (!statement && !question) continue;
        const size_t keyAt = statement ? i + 4 : i + 6;
        const Words key = slice(d.words, keyAt, keyAt + 2);
        ASSERT_EQ(d.words[keyAt + 2], statement ? "is" : "?");
        size_t at = keyAt + 3;
        Words digits;
        while (at < d.words.size() && isDigit(d.words[at])) digits.push_back(d.words[at++]);
        if (at == d.words.size()) break;  // a fact cut by the end cannot happen, but stay safe
        ASSERT_EQ(d.words[at], ".");
        const auto known = first.find(key);
        if (known == first.end()) {
            ASSERT_TRUE(statement) << "question before its fact at " << i;
            first[key] = {digits, static_cast<int64_t>(i)};
            continue;
        }
        EXPECT_EQ(digits, known->second.first) << "at " << i;
        distances.push_back(static_cast<int64_t>(i) - known->second.second);
        for (size_t k = keyAt + 3; k < at; ++k) {
            marked += std::count_if(d.answers.begin(), d.answers.end(), [&](const AnswerToken& a) {
                return a.position == static_cast<int64_t>(k) && a.kind == AnswerKind::Fact;
            });
        }
    }
    ASSERT_GE(distances.size(), 20u);  // dense: many questions per document
    EXPECT_LT(*std::min_element(distances.begin(), distances.end()), 30);
    EXPECT_GT(*std::max_element(distances.begin(), distances.end()), 500);
    EXPECT_EQ(marked, static_cast<size_t>(std::count_if(d.answers.begin(), d.answers.end(), [](const AnswerToken& a) {
                  return a.kind == AnswerKind::Fact;
              })));
}

// facts-max caps the codes a document introduces; its queries still come
// (all about the codes it has), and the limit's absence changes nothing.
TEST(Corpus, FactsMaxCapsTheCodesOfADocument)
{
    const auto statements = [](const Document& d) {
        std::set<Words> keys;
        for (size_t i = 0; i + 6 < d.words.size(); ++i)
            if (slice(d.words, i, i + 4) == Words{"the", "code", "for", "the"}) keys.insert(slice(d.words, i + 4, i + 6));
        return keys.size();
    };
    for (int limit : {1, 2, 3}) {
        CorpusOptions o = applyCorpusMix({}, "facts-max=" + std::to_string(limit));
        EXPECT_EQ(o.maxFacts, limit);
        for (uint64_t seed : {1, 2, 3}) {
            const Document d = generateDocument(o, seed, 1024);
            EXPECT_LE(statements(d), static_cast<size_t>(limit)) << "seed " << seed;
            EXPECT_GE(statements(d), 1u) << "seed " << seed;
            const auto facts = std::count_if(d.answers.begin(), d.answers.end(),
                                             [](const AnswerToken& a) { return a.kind == AnswerKind::Fact; });
            EXPECT_GE(facts, 20) << "queries keep coming: seed " << seed;
        }
    }
    EXPECT_GT(statements(generateDocument({}, 1, 1024)), 3u);
    EXPECT_EQ(generateDocument(applyCorpusMix({}, "facts-max=0"), 4, 512).text, generateDocument({}, 4, 512).text);
    EXPECT_THROW(applyCorpusMix({}, "facts-max=-1"), kvlens::ArgumentError);
}

TEST(Corpus, AnswersAreSortedAndEveryKindOccurs)
{
    const Document d = generateDocument({}, 3, 2048);
    std::map<AnswerKind, int> kinds;
    for (size_t i = 0; i < d.answers.size(); ++i) {
        ASSERT_TRUE(d.answers[i].position >= 0 && d.answers[i].position < 2048);
        if (i) {
            ASSERT_LT(d.answers[i - 1].position, d.answers[i].position);
        }
        ++kinds[d.answers[i].kind];
    }
    EXPECT_GT(kinds[AnswerKind::Fact], 100);
    EXPECT_GT(kinds[AnswerKind::Entity], 10);
    EXPECT_GT(kinds[AnswerKind::Copy], 10);
}

// An entity question's marked answer is what the entity's statement said.
TEST(Corpus, EntityAnswersMatchTheirStatements)
{
    const Document d = generateDocument({}, 11, 2048);
    int checked = 0;
    for (size_t i = 0; i + 6 < d.words.size(); ++i) {
        if (d.words[i] != "where" || d.words[i + 1] != "does" || d.words[i + 3] != "live") continue;
        const Words place = slice(d.words, i + 5, i + 8);  // "the north tower"
        Words statement = {d.words[i + 2], "lives", "in"};
        statement.insert(statement.end(), place.begin(), place.end());
        const int64_t at = find(d.words, statement);
        ASSERT_GE(at, 0);
        EXPECT_LT(at, static_cast<int64_t>(i));
        ++checked;
    }
    EXPECT_GT(checked, 0);
}

// Copy answers sit in a verbatim repeat of an earlier list or sentence.
TEST(Corpus, CopyAnswersRepeatEarlierText)
{
    const Document d = generateDocument({}, 8, 2048);
    int runs = 0;
    for (size_t i = 0; i < d.answers.size();) {
        if (d.answers[i].kind != AnswerKind::Copy) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j + 1 < d.answers.size() && d.answers[j + 1].kind == AnswerKind::Copy &&
               d.answers[j + 1].position == d.answers[j].position + 1) {
            ++j;
        }
        const auto begin = static_cast<size_t>(d.answers[i].position - 2);  // the uncopied prefix
        const auto end = static_cast<size_t>(d.answers[j].position + 2);    // through the "."
        const int64_t earlier = find(d.words, slice(d.words, begin, end));
        EXPECT_GE(earlier, 0);
        EXPECT_LT(earlier, static_cast<int64_t>(begin));
        ++runs;
        i = j + 1;
    }
    EXPECT_GT(runs, 2);
}

TEST(Corpus, BadOptionsAreRefused)
{
    EXPECT_THROW(generateDocument({}, 1, -1), kvlens::ArgumentError);
    CorpusOptions o;
    o.factWeight = -1;
    EXPECT_THROW(generateDocument(o, 1, 10), kvlens::ArgumentError);
    o = {};
    o.codeDigitsMin = 5;
    o.codeDigitsMax = 4;
    EXPECT_THROW(generateDocument(o, 1, 10), kvlens::ArgumentError);
    o = {};
    o.restateProbability = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(generateDocument(o, 1, 10), kvlens::ArgumentError);
    o = {};
    o.factWeight = o.factQueryWeight = o.entityWeight = o.entityQueryWeight = o.fillerWeight = o.listWeight =
        o.repeatWeight = 0;
    EXPECT_EQ(generateDocument(o, 1, 100).words.size(), 100u);  // all filler
}

// ---- needle ---------------------------------------------------------------

TEST(Needle, PlacedAtDepthWithExactLength)
{
    for (int64_t context : {21, 40, 128, 512, 2048}) {
        for (double depth : {0.0, 0.25, 0.5, 0.75, 1.0}) {
            const NeedleProbe p = makeNeedleProbe(context, depth, 3);
            const Words w = splitWords(p.prompt);
            ASSERT_EQ(static_cast<int64_t>(w.size()), context);
            EXPECT_EQ(p.promptTokens, context);
            EXPECT_EQ(p.haystackTokens, context - 21);
            const Words needle = splitWords(p.needle);
            const int64_t at = find(w, needle);
            ASSERT_EQ(at, p.needleTokenStart);
            EXPECT_EQ(find(w, {"code"}, static_cast<size_t>(at) + 2), context - 6);  // only the question after it
            EXPECT_LE(std::abs(static_cast<double>(at) - depth * static_cast<double>(p.haystackTokens)), 1.0)
                << "context " << context << " depth " << depth;
            EXPECT_EQ(slice(w, static_cast<size_t>(context) - 9, static_cast<size_t>(context)), splitWords(p.question));
            EXPECT_EQ(slice(needle, 7, 11), splitWords(p.expected));
            EXPECT_EQ(p.question.substr(0, 24), "what is the code for the");
        }
    }
}

TEST(Needle, SeedFixesTheNeedleAcrossTheGrid)
{
    EXPECT_EQ(makeNeedleProbe(128, 0.1, 9).needle, makeNeedleProbe(1024, 0.9, 9).needle);
    EXPECT_NE(makeNeedleProbe(128, 0.1, 9).needle, makeNeedleProbe(128, 0.1, 10).needle);
    EXPECT_EQ(makeNeedleProbe(256, 0.3, 9).prompt, makeNeedleProbe(256, 0.3, 9).prompt);
}

TEST(Needle, BadArgumentsAreRefused)
{
    EXPECT_THROW(makeNeedleProbe(128, 1.5, 1), kvlens::ArgumentError);
    EXPECT_THROW(makeNeedleProbe(128, -0.1, 1), kvlens::ArgumentError);
    EXPECT_THROW(makeNeedleProbe(128, std::nan(""), 1), kvlens::ArgumentError);
    EXPECT_THROW(makeNeedleProbe(20, 0.5, 1), kvlens::ArgumentError);
    EXPECT_NO_THROW(makeNeedleProbe(21, 0.5, 1));
    EXPECT_THROW(makeNeedleProbe(UserNeedle{" \n ", "a.", "b?", "c"}, 100, 0.5), kvlens::ArgumentError);
    EXPECT_THROW(makeNeedleProbe(UserNeedle{"x y.", "", "b?", "c"}, 100, 0.5), kvlens::ArgumentError);
}

TEST(Needle, UserTextIsCutAtSentencesAndRepeated)
{
    // 3 sentences of 5, 6 and 4 words (punctuation counts as a word).
    const UserNeedle spec{"One two three four.\nFive six seven eight nine!  Ten eleven twelve?",
                          "The secret is saffron.", "What is the secret?", "saffron"};
    for (double depth : {0.0, 0.5, 1.0}) {
        const NeedleProbe p = makeNeedleProbe(spec, 100, depth);
        EXPECT_LE(p.promptTokens, 100);
        EXPECT_GT(p.promptTokens, 100 - 6);
        EXPECT_EQ(p.promptTokens, countWords(p.prompt));
        EXPECT_GT(p.haystackTokens, 3 * 15);  // the haystack was repeated
        const Words w = splitWords(p.prompt);
        const int64_t at = find(w, splitWords(spec.needle));
        ASSERT_EQ(at, p.needleTokenStart);
        EXPECT_TRUE(at == 0 || w[static_cast<size_t>(at) - 1] == "." || w[static_cast<size_t>(at) - 1] == "!" ||
                    w[static_cast<size_t>(at) - 1] == "?");  // at a sentence boundary
        EXPECT_LE(std::abs(static_cast<double>(at) - depth * static_cast<double>(p.haystackTokens)), 3.0);
        EXPECT_EQ(p.prompt.substr(p.prompt.size() - p.question.size()), "What is the secret?");
        EXPECT_EQ(p.expected, "saffron");
    }
}

TEST(Scoring, ExactMatchAndWordOverlap)
{
    EXPECT_TRUE(exactMatch("4 8 2 1", "4 8 2 1"));
    EXPECT_TRUE(exactMatch(" 4 8 2 1 . what is the code", "4 8 2 1"));  // cut at the sentence end
    EXPECT_TRUE(exactMatch("4821", "4 8 2 1"));                          // digits are words
    EXPECT_TRUE(exactMatch("Saffron!", "saffron"));
    EXPECT_TRUE(exactMatch("the north tower\nwho lives", "The North Tower."));
    EXPECT_FALSE(exactMatch("4 8 2", "4 8 2 1"));
    EXPECT_FALSE(exactMatch("the code is 4821.", "4821"));

    EXPECT_DOUBLE_EQ(wordOverlap("the code is 4821.", "4821"), 1.0);
    EXPECT_DOUBLE_EQ(wordOverlap("4 8 0 0", "4 8 2 1"), 0.5);
    EXPECT_DOUBLE_EQ(wordOverlap("1 1 1 1", "4 8 2 1"), 0.25);  // each expected word credited once
    EXPECT_DOUBLE_EQ(wordOverlap("1 2 4 8", "4 8 2 1"), 1.0);   // order ignored
    EXPECT_DOUBLE_EQ(wordOverlap("4 8 . 2 1", "4 8 2 1"), 0.5); // nothing after the first sentence end
    EXPECT_DOUBLE_EQ(wordOverlap("", "4 8 2 1"), 0.0);
    EXPECT_DOUBLE_EQ(wordOverlap("", ""), 1.0);
    EXPECT_DOUBLE_EQ(wordOverlap("x", ""), 0.0);
    EXPECT_EQ(answerWords(". . Saffron, of course. Yes"), (Words{"saffron", "of", "course"}));
}

// ---- the written tokenizer.json -------------------------------------------

TEST(TokenizerJson, LoadsAndRoundTripsGeneratedText)
{
    const kvlens::test::ScratchDir dir("eval");
    const fs::path file = dir / "tokenizer.json";
    vocab().writeTokenizerJson(file);
    const kvlens::Tokenizer tok = kvlens::Tokenizer::fromFile(file);
    EXPECT_EQ(tok.vocabSize(), vocab().size());
    EXPECT_EQ(tok.bosId(), kBosId);
    EXPECT_EQ(tok.eosId(), kEosId);
    for (int32_t id = 0; id < vocab().size(); ++id) EXPECT_EQ(tok.tokenString(id), vocab().word(id));

    for (uint64_t seed : {1, 2}) {
        const Document d = generateDocument({}, seed, 1024);
        const std::vector<int32_t> ids = tok.encode(d.text);
        ASSERT_EQ(ids.size(), d.words.size() + 1);
        EXPECT_EQ(ids[0], kBosId);
        for (size_t i = 1; i < ids.size(); ++i) {
            ASSERT_TRUE(ids[i] > kEosId && ids[i] < tok.vocabSize()) << d.words[i - 1];
            EXPECT_EQ(tok.tokenString(ids[i]), d.words[i - 1]);
        }
        EXPECT_EQ(tok.decode(ids, /*skipSpecialTokens=*/true), d.text);
        EXPECT_EQ(tok.decode(ids), "<bos> " + d.text);
    }
    const NeedleProbe p = makeNeedleProbe(512, 0.5, 1);
    EXPECT_EQ(static_cast<int64_t>(tok.encode(p.prompt).size()), p.promptTokens + 1);
    // What a workshop user types: capitals and a glued number and full stop.
    const std::vector<int32_t> typed = tok.encode("The code for the red door is 4821.", false);
    EXPECT_EQ(tok.decode(typed), "the code for the red door is 4 8 2 1 .");
    EXPECT_EQ(tok.encode("the zebra", false)[1], kUnkId);
}
