#include "core/eval/needle.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/eval/corpus.h"
#include "core/eval/vocabulary.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens::eval {
namespace {

constexpr int kNeedleDigits = 4;
// A run-on "sentence" longer than this (text without full stops) is cut, so
// that the needle can still be placed near the requested depth.
constexpr size_t kMaxSentenceWords = 64;

void requireDepth(double depth)
{
    if (!(depth >= 0 && depth <= 1)) throw ArgumentError("needle depth " + std::to_string(depth) + " is outside [0, 1]");
}

std::vector<std::string> whitespaceWords(std::string_view text)
{
    std::vector<std::string> out;
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        const size_t start = i;
        while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        if (i > start) out.emplace_back(text.substr(start, i - start));
    }
    return out;
}

// Sentences of a user haystack, whitespace normalised to single spaces.
std::vector<std::string> sentences(std::string_view text)
{
    std::vector<std::string> out;
    std::string current;
    const auto flush = [&] {
        const std::vector<std::string> w = whitespaceWords(current);
        for (size_t i = 0; i < w.size(); i += kMaxSentenceWords) {
            const auto end = w.begin() + static_cast<std::ptrdiff_t>(std::min(w.size(), i + kMaxSentenceWords));
            out.push_back(joinWords(std::vector<std::string>(w.begin() + static_cast<std::ptrdiff_t>(i), end)));
        }
        current.clear();
    };
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n' || c == '\r') {
            flush();
            continue;
        }
        current += c;
        const bool end = c == '.' || c == '!' || c == '?';
        if (end && (i + 1 == text.size() || std::isspace(static_cast<unsigned char>(text[i + 1])))) flush();
    }
    flush();
    return out;
}

std::string joinParts(const std::vector<std::string>& parts)
{
    std::vector<std::string> nonEmpty;
    for (const std::string& p : parts) {
        if (!p.empty()) nonEmpty.push_back(p);
    }
    return joinWords(nonEmpty);
}

bool isWordToken(const std::string& token)
{
    const auto c = static_cast<unsigned char>(token[0]);
    return std::isalnum(c) || c == '_' || c >= 0x80;
}

}  // namespace

NeedleProbe makeNeedleProbe(int64_t contextTokens, double depth, uint64_t seed)
{
    requireDepth(depth);
    Rng rng(seed);
    const Vocabulary& v = Vocabulary::bundled();
    const std::string colour = rng.pick(v.words(WordClass::Colour));
    const std::string object = rng.pick(v.words(WordClass::Object));
    const std::vector<std::string> digits = codeDigits(rng, kNeedleDigits);
    const std::vector<std::string> needle = codeStatement(colour, object, digits);
    const std::vector<std::string> question = codeQuestion(colour, object);
    const auto fixed = static_cast<int64_t>(needle.size() + question.size());
    if (contextTokens < fixed) {
        throw ArgumentError("needle context of " + std::to_string(contextTokens) + " tokens is shorter than the " +
                            std::to_string(fixed) + " tokens of needle and question");
    }
    NeedleProbe p;
    p.haystackTokens = contextTokens - fixed;
    p.needleTokenStart = std::llround(depth * static_cast<double>(p.haystackTokens));
    std::vector<std::string> words = fillerWords(rng, p.needleTokenStart);
    words.insert(words.end(), needle.begin(), needle.end());
    const std::vector<std::string> after = fillerWords(rng, p.haystackTokens - p.needleTokenStart);
    words.insert(words.end(), after.begin(), after.end());
    words.insert(words.end(), question.begin(), question.end());
    p.prompt = joinWords(words);
    p.expected = joinWords(digits);
    p.needle = joinWords(needle);
    p.question = joinWords(question);
    p.promptTokens = static_cast<int64_t>(words.size());
    p.depth = depth;
    return p;
}

int64_t countWords(std::string_view text) { return static_cast<int64_t>(splitWords(text).size()); }

TokenCounter tokenizerCounter(const Tokenizer& tokenizer)
{
    return [&tokenizer](std::string_view text) {
        return static_cast<int64_t>(tokenizer.encode(text, /*addSpecialTokens=*/false).size());
    };
}

NeedleProbe makeNeedleProbe(const UserNeedle& spec, int64_t contextTokens, double depth, const TokenCounter& count)
{
    requireDepth(depth);
    if (whitespaceWords(spec.needle).empty()) throw ArgumentError("the needle sentence is empty");
    if (whitespaceWords(spec.question).empty()) throw ArgumentError("the needle question is empty");
    std::vector<std::string> units;
    std::vector<int64_t> unitTokens;
    for (std::string& s : sentences(spec.haystack)) {
        const int64_t n = count(s);
        if (n <= 0) continue;  // counts must grow, or the cyclic fill below would not end
        units.push_back(std::move(s));
        unitTokens.push_back(n);
    }
    if (units.empty()) throw ArgumentError("the needle haystack has no words");

    const int64_t budget = contextTokens - count(joinWords(whitespaceWords(spec.needle))) -
                           count(joinWords(whitespaceWords(spec.question)));
    std::vector<size_t> taken;     // unit indices, the haystack repeated as needed
    std::vector<int64_t> prefix{0};  // tokens before the k-th taken unit
    for (size_t k = 0;; ++k) {
        const size_t u = k % units.size();
        if (prefix.back() + unitTokens[u] > budget) break;
        taken.push_back(u);
        prefix.push_back(prefix.back() + unitTokens[u]);
    }
    const double target = depth * static_cast<double>(prefix.back());
    size_t at = 0;  // the boundary nearest the target; ties go to the earlier one
    for (size_t k = 1; k < prefix.size(); ++k) {
        if (std::abs(static_cast<double>(prefix[k]) - target) < std::abs(static_cast<double>(prefix[at]) - target)) {
            at = k;
        }
    }
    std::vector<std::string> before, after;
    for (size_t k = 0; k < taken.size(); ++k) (k < at ? before : after).push_back(units[taken[k]]);

    NeedleProbe p;
    p.needle = joinWords(whitespaceWords(spec.needle));
    p.question = joinWords(whitespaceWords(spec.question));
    p.expected = spec.answer;
    p.prompt = joinParts({joinWords(before), p.needle, joinWords(after), p.question});
    p.promptTokens = count(p.prompt);
    p.haystackTokens = prefix.back();
    p.needleTokenStart = prefix[at];
    p.depth = depth;
    return p;
}

std::vector<std::string> answerWords(std::string_view text)
{
    std::vector<std::string> out;
    size_t lineStart = 0;
    while (lineStart <= text.size()) {
        size_t lineEnd = text.find_first_of("\r\n", lineStart);
        if (lineEnd == std::string_view::npos) lineEnd = text.size();
        for (std::string& token : splitWords(text.substr(lineStart, lineEnd - lineStart))) {
            if (isWordToken(token)) {
                for (char& c : token) {
                    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
                }
                out.push_back(std::move(token));
            } else if (!out.empty() && token.find_first_of(".?!") != std::string::npos) {
                return out;
            }
        }
        if (!out.empty()) return out;  // a line break after a word ends the answer
        lineStart = lineEnd + 1;
    }
    return out;
}

bool exactMatch(std::string_view answer, std::string_view expected)
{
    return answerWords(answer) == answerWords(expected);
}

double wordOverlap(std::string_view answer, std::string_view expected)
{
    const std::vector<std::string> e = answerWords(expected);
    const std::vector<std::string> a = answerWords(answer);
    if (e.empty()) return a.empty() ? 1.0 : 0.0;
    std::map<std::string, int64_t> available;
    for (const std::string& w : a) ++available[w];
    int64_t matched = 0;
    for (const std::string& w : e) {
        auto it = available.find(w);
        if (it != available.end() && it->second > 0) {
            --it->second;
            ++matched;
        }
    }
    return static_cast<double>(matched) / static_cast<double>(e.size());
}

}  // namespace kvlens::eval
