#pragma once
// Seeded synthetic training documents for the bundled model kvlens-tiny.
// A document mixes what KV-cache eviction policies fight over (see README.md
// beside this file): key -> value codes queried later at every distance,
// entity facts referred back to, filler from a small grammar, and verbatim
// repeats. Every word comes from Vocabulary::bundled(); a document of N
// tokens encodes to exactly N tokens (+ <bos>) with the bundled tokenizer.
//
// Determinism: the same (options, seed, length) gives the same document on
// every platform. std::mt19937_64 is fully specified by the standard, but
// the std:: distributions are not, so Rng draws bounded integers itself.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kvlens::eval {

// Platform-independent draws on top of std::mt19937_64.
class Rng {
public:
    explicit Rng(uint64_t seed) : m_engine(seed) {}
    uint64_t next() { return m_engine(); }
    // Uniform in [0, n), unbiased (rejection of the short top range). n > 0.
    uint64_t below(uint64_t n);
    // Uniform in [lo, hi] (inclusive). lo <= hi.
    int64_t between(int64_t lo, int64_t hi);
    // Uniform in [0, 1) with 53 random bits.
    double unit();
    bool chance(double p) { return unit() < p; }
    template <class T>
    const T& pick(const std::vector<T>& items)
    {
        return items[static_cast<size_t>(below(items.size()))];
    }

private:
    std::mt19937_64 m_engine;
};

// Why a token is an answer: the trainer may weight them differently, and
// evaluates retrieval on Fact answers.
enum class AnswerKind {
    Fact,    // a code digit after "what is the code for the red door ?" or a restated "… is"
    Entity,  // an entity fact asked or restated ("where does mara live ? the north tower")
    Copy,    // a token inside a verbatim repeat, predictable by copying (induction)
};

struct AnswerToken {
    int64_t position;  // index into Document::words (0-based; <bos> not counted)
    AnswerKind kind;
};

// The mix, as relative weights of the segment kinds drawn one after another
// until the document is full. A kind that has nothing to refer to (a query
// before any fact, a repeat before any list) is skipped for that draw.
struct CorpusOptions {
    double factWeight = 3.0;         // introduce a code: "the code for the red door is 4 8 2 1 ."
    double factQueryWeight = 4.0;    // ask for / restate an earlier code (more than introduced: dense signal)
    double entityWeight = 2.0;       // "mara lives in the north tower ."
    double entityQueryWeight = 3.0;  // "where does mara live ? the north tower ."
    double fillerWeight = 3.0;       // grammar sentences between the facts (what eviction may drop)
    double listWeight = 1.0;         // "tom buys bread , tea and soap ." (material for repeats)
    double repeatWeight = 1.0;       // an earlier list or long filler sentence again, verbatim

    int codeDigitsMin = 4;  // digits of a code; the needle probe uses 4
    int codeDigitsMax = 4;
    // At most this many codes per document (0: no limit): once there, facts
    // are no longer drawn, the other kinds keep their weights. With 1 every query has one code to copy, the
    // needle probe's situation, which a small model learns long before it
    // learns to tell several codes apart by their keys.
    int maxFacts = 0;
    // A fact query restates ("the code for the red door is" -> digits)
    // instead of asking; the needle of the issue is this completion form.
    double restateProbability = 0.3;
    // A fact query picks among the three newest facts (distances of a few
    // tokens) instead of uniformly over all (distances up to the document).
    double recentQueryProbability = 0.25;
    // An entity query asks backwards ("who lives in the north tower ? mara .").
    double reverseQueryProbability = 0.3;
    int fillerMinWords = 5;  // length of a filler segment, "." included
    int fillerMaxWords = 12;
    int listMinItems = 3;
    int listMaxItems = 6;
};

// A haystack-like mix: long filler with a few facts and questions, closer to
// a needle probe than the dense default. Mixing some of these documents into
// training keeps retrieval working across long stretches of filler.
CorpusOptions needleStyleOptions();

// `base` with the overrides of a mix text "key=value,key=value": weights
// fact, query, entity, entity-query, filler, list, repeat; probabilities
// restate, recent, reverse; code lengths digits-min, digits-max; facts-max. Empty text: `base`. Throws ArgumentError naming
// the bad item (unknown key, not a number, out of range).
CorpusOptions applyCorpusMix(CorpusOptions base, const std::string& mix);

struct Document {
    std::string text;                // words joined by single spaces (joinWords)
    std::vector<std::string> words;  // exactly the requested length
    std::vector<AnswerToken> answers;  // sorted by position
};

// Throws ArgumentError for a negative length or inconsistent options.
Document generateDocument(const CorpusOptions& options, uint64_t seed, int64_t lengthTokens);

// Exactly `count` words of grammar filler in whole sentences ("the tired
// farmer walks slowly near the river ."); counts of 1 and 2 give "." and
// "okay ." so that any length can be met. Used for documents and haystacks.
std::vector<std::string> fillerWords(Rng& rng, int64_t count);

// `digits` random digits, each its own word.
std::vector<std::string> codeDigits(Rng& rng, int digits);

// The code templates shared by the corpus and the needle probe, so that the
// probe asks exactly what the model was trained on.
std::vector<std::string> codeStatement(const std::string& colour, const std::string& object,
                                       const std::vector<std::string>& digits);  // "the code for the C O is d d d d ."
std::vector<std::string> codeQuestion(const std::string& colour, const std::string& object);  // "what is the code for the C O ?"

}  // namespace kvlens::eval
