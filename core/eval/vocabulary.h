#pragma once
// The closed vocabulary of the bundled model kvlens-tiny: a few hundred
// readable words, so that a heatmap's axis labels mean something to a
// workshop audience, plus the ten digits as separate tokens (codes are read
// digit by digit, so "4821" needs no 10000-word vocabulary). The corpus and
// needle generators draw every word they emit from here, and
// writeTokenizerJson() turns it into the HF tokenizer.json shipped with the
// model. Torch-free and std-only in the header.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvlens::eval {

// Word categories. The generators pick from them; they are disjoint, so a
// fact's key words (colour, object, place) never appear in filler and a
// question has exactly one answer in its document.
enum class WordClass {
    Special,           // <pad> <unk> <bos> <eos>
    Punctuation,       // . , ? :
    Digit,             // 0 … 9
    Colour,            // code keys, pets
    Object,            // code keys: door, box, gate, …
    Name,              // people (entities, list owners, filler subjects)
    PlaceAdjective,    // places are "the <adjective> <noun>": the north tower
    PlaceNoun,
    Animal,            // pets: "mara has a red cat"
    Food,              // "mara likes honey", shopping lists
    Goods,             // shopping lists
    Person,            // filler subjects: the farmer, the cook
    Noun,              // filler objects and places: the river, the stone
    Adjective,         // filler
    IntransitiveVerb,  // filler: sleeps, waits
    TransitiveVerb,    // filler: sees, carries
    Adverb,            // filler
    Preposition,       // filler: near, under
    TimeOfDay,         // "at night ,"
    Season,            // "in winter ,"
    DayPart,           // "in the morning ,"
    Interjection,      // 2-token filler "okay ." for exact lengths
    Frame,             // the fixed words of the templates: the, code, for, is, what, …
    Count_
};

// Ids of the special tokens; they come first so that they are stable.
inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;

class Vocabulary {
public:
    // The bundled model's vocabulary. Ids follow the category order in
    // vocabulary.cpp: appending words keeps existing ids, reordering or
    // removing them invalidates a trained model's embeddings.
    static const Vocabulary& bundled();

    int32_t size() const { return static_cast<int32_t>(m_words.size()); }
    const std::string& word(int32_t id) const;  // throws ArgumentError when out of range
    std::optional<int32_t> id(std::string_view word) const;
    bool contains(std::string_view word) const { return id(word).has_value(); }
    const std::vector<std::string>& words(WordClass c) const { return m_classes[static_cast<size_t>(c)]; }

    // HF tokenizer.json: WordLevel with unk "<unk>", Lowercase normalizer,
    // pre-tokenizer Sequence[Whitespace, Digits(individual)], a
    // TemplateProcessing that prepends <bos>, and no decoder (HF then joins
    // tokens with single spaces, which reproduces generated text exactly).
    std::string tokenizerJson() const;
    // Throws kvlens::Error naming the file when it cannot be written.
    void writeTokenizerJson(const std::filesystem::path& file) const;

private:
    Vocabulary();
    std::vector<std::string> m_words;                 // [id] -> word
    std::unordered_map<std::string, int32_t> m_ids;   // word -> id
    std::vector<std::vector<std::string>> m_classes;  // [WordClass] -> words
};

// Cuts text the way the bundled tokenizer.json's pre-tokenizer does, so that
// a length in words is a length in tokens: whitespace separates, a run of
// word characters (ASCII letters, digits, '_', and any non-ASCII byte) is a
// word, a run of other non-space characters is one punctuation token, and
// every digit is its own token ("door4821." -> door 4 8 2 1 .). Non-ASCII
// text is approximated (HF uses Unicode classes); the bundled corpus is ASCII.
std::vector<std::string> splitWords(std::string_view text);

// The canonical text of a word list: single spaces between words. The
// bundled tokenizer encodes it to exactly these words and decodes it back.
std::string joinWords(const std::vector<std::string>& words);

}  // namespace kvlens::eval
