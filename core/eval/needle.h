#pragma once
// Needle-in-a-haystack probes: a fact (the needle) hidden at a chosen depth
// of distracting text (the haystack), then a question whose answer only the
// needle holds. Run over a grid of context lengths × depths, once with the
// full cache and once per eviction policy, they show which policies keep the
// needle's keys. For the bundled model the generator writes all three parts
// from its training templates; for real models the user supplies them.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {
class Tokenizer;
}

namespace kvlens::eval {

struct NeedleProbe {
    std::string prompt;    // haystack with the needle inside, then the question
    std::string expected;  // the answer, e.g. "4 8 2 1"
    std::string needle;    // the needle sentence, e.g. "the code for the red door is 4 8 2 1 ."
    std::string question;  // e.g. "what is the code for the red door ?"
    int64_t promptTokens = 0;      // tokens of `prompt` (no <bos>), as the counter counts them
    int64_t haystackTokens = 0;    // tokens of haystack alone (needle and question excluded)
    int64_t needleTokenStart = 0;  // prompt token index where the needle starts = haystack tokens before it
    double depth = 0;              // the requested depth
};

// Bundled-model probe. The prompt has exactly `contextTokens` tokens under
// the bundled tokenizer (<bos> not counted): filler from the corpus grammar,
// the needle "the code for the <colour> <object> is d d d d ." after
// round(depth × haystackTokens) filler tokens (depth 0: first, 1: right
// before the question), and "what is the code for the <colour> <object> ?".
// The seed draws the key and code first, so a grid that reuses one seed
// varies only length and position. Throws ArgumentError for a depth outside
// [0, 1] or a context too short to hold the needle and the question (21).
NeedleProbe makeNeedleProbe(int64_t contextTokens, double depth, uint64_t seed);

// Counts the tokens of a piece of text, for sizing a user haystack.
using TokenCounter = std::function<int64_t(std::string_view)>;
// The bundled tokenizer's count (splitWords).
int64_t countWords(std::string_view text);
// A real model's count: encode() without special tokens. The tokenizer must
// outlive the counter.
TokenCounter tokenizerCounter(const Tokenizer& tokenizer);

// A probe for real models from user text.
struct UserNeedle {
    std::string haystack;  // any text; repeated when shorter than the context
    std::string needle;    // e.g. "The secret ingredient is saffron."
    std::string question;  // e.g. "What is the secret ingredient?"
    std::string answer;    // e.g. "saffron"
};

// The haystack is cut into sentences (after . ! ? before whitespace, and at
// line breaks; a sentence of more than 64 words is cut every 64 words) and
// taken from the start, cyclically, while it fits contextTokens minus the
// needle and the question; the needle goes in at the sentence boundary
// nearest depth × haystackTokens. Counts add up per sentence, so with a BPE
// tokenizer the prompt length is close to, not exactly, contextTokens
// (promptTokens gives the true count). Throws ArgumentError for a depth
// outside [0, 1], a haystack without words, or an empty needle or question.
NeedleProbe makeNeedleProbe(const UserNeedle& spec, int64_t contextTokens, double depth,
                            const TokenCounter& count = countWords);

// Scoring. An answer is normalised to its words (splitWords, ASCII
// lowercased, punctuation tokens dropped), cut at the first sentence end:
// the first '.', '?', '!' or line break that follows at least one word (a
// model goes on generating after its answer). Digits are separate words, so
// "4821" and "4 8 2 1" are the same answer, and a partly right code earns
// partial overlap.
std::vector<std::string> answerWords(std::string_view text);

// True when the normalised answer equals the normalised expected answer.
bool exactMatch(std::string_view answer, std::string_view expected);

// Multiset overlap: with E and A the normalised words of expected and answer,
// Σ_w min(count_A(w), count_E(w)) / |E|, in [0, 1]; order is ignored and each
// expected word is credited at most as often as it is expected ("1 1 1 1"
// against "4 8 2 1" scores 0.25). An empty E scores 1 for an empty A, else 0.
double wordOverlap(std::string_view answer, std::string_view expected);

}  // namespace kvlens::eval
