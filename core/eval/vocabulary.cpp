#include "core/eval/vocabulary.h"

#include "core/safe_file.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvlens::eval {
namespace {

struct Category {
    WordClass cls;
    std::vector<const char*> words;
};

// The order here fixes the ids (see Vocabulary::bundled). Key categories
// (colours × objects = 384 codes, place adjectives × nouns = 240 places,
// colours × animals = 224 pets) are large enough that a document's facts
// rarely repeat across documents, so the model must read them, not memorise.
const std::vector<Category>& categories()
{
    static const std::vector<Category> all = {
        {WordClass::Special, {"<pad>", "<unk>", "<bos>", "<eos>"}},
        {WordClass::Punctuation, {".", ",", "?", ":"}},
        {WordClass::Digit, {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
        {WordClass::Frame,
         {"the", "a", "code", "for", "is", "what", "where", "who", "does", "live", "lives", "work", "works", "at",
          "in", "has", "have", "like", "likes", "buys", "and"}},
        {WordClass::Colour,
         {"red", "blue", "green", "yellow", "black", "white", "orange", "purple", "pink", "brown", "grey", "gold",
          "silver", "violet", "amber", "teal"}},
        {WordClass::Object,
         {"door", "box", "gate", "chest", "safe", "vault", "locker", "drawer", "case", "bag", "trunk", "cabinet",
          "window", "crate", "basket", "jar", "tin", "shed", "barn", "cellar", "garage", "cupboard", "bike",
          "phone"}},
        {WordClass::Name,
         {"mara", "tom", "lena", "ivo", "ada", "ben", "clara", "dan", "eva", "finn", "greta", "hugo",
          "iris", "jon", "kai", "lara", "milo", "nina", "otto", "pia", "rosa", "sam", "tara", "uma",
          "vera", "wim", "yara", "zeno", "anna", "bruno", "carl", "dora", "emil", "frida", "gus", "hana",
          "igor", "jana", "leo", "mia", "noah", "olga", "paul", "ruth", "sven", "theo", "ines", "oskar"}},
        {WordClass::PlaceAdjective,
         {"north", "south", "east", "west", "upper", "lower", "middle", "outer", "inner", "royal", "ancient",
          "hidden"}},
        {WordClass::PlaceNoun,
         {"tower", "mill", "bridge", "market", "harbour", "garden", "forest", "valley", "castle", "farm",
          "school", "library", "station", "village", "island", "hill", "lake", "bay", "square", "chapel"}},
        {WordClass::Animal,
         {"cat", "dog", "bird", "horse", "fox", "owl", "goat", "sheep", "rabbit", "mouse", "duck", "frog",
          "bear", "wolf"}},
        {WordClass::Food,
         {"bread", "apples", "soup", "rice", "cheese", "fish", "tea", "cake", "honey", "plums", "pears",
          "milk", "eggs", "beans", "nuts", "jam"}},
        {WordClass::Goods,
         {"soap", "rope", "candles", "nails", "paper", "ink", "salt", "sugar", "flour", "oil", "thread",
          "wool"}},
        {WordClass::Person,
         {"child", "man", "woman", "farmer", "baker", "sailor", "teacher", "girl", "boy", "king", "queen",
          "cook", "guard", "painter"}},
        {WordClass::Noun,
         {"sun", "rain", "wind", "road", "tree", "stone", "river", "cloud", "bell", "boat", "cart", "fire",
          "field", "flower", "leaf", "moon", "path", "roof", "rock", "sky", "snow", "star", "wall", "wave"}},
        {WordClass::Adjective,
         {"small", "big", "tall", "quiet", "warm", "cold", "dark", "bright", "happy", "tired", "calm", "busy",
          "soft", "loud", "young", "kind"}},
        {WordClass::IntransitiveVerb,
         {"sleeps", "waits", "sings", "walks", "runs", "smiles", "rests", "listens", "laughs", "dances",
          "stays", "hums", "dreams", "sits", "stands", "wanders"}},
        {WordClass::TransitiveVerb,
         {"sees", "finds", "carries", "paints", "watches", "holds", "follows", "cleans", "draws", "visits",
          "passes", "crosses", "touches", "climbs", "counts", "greets"}},
        {WordClass::Adverb,
         {"slowly", "quickly", "quietly", "often", "always", "sometimes", "today", "again", "softly", "early",
          "later", "gladly"}},
        {WordClass::Preposition, {"near", "under", "behind", "beside", "above", "past", "along", "across"}},
        {WordClass::TimeOfDay, {"night", "noon", "dawn"}},
        {WordClass::Season, {"winter", "summer", "spring", "autumn"}},
        {WordClass::DayPart, {"morning", "evening", "afternoon"}},
        {WordClass::Interjection, {"yes", "okay"}},
    };
    return all;
}

bool isWordByte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

bool isSpaceByte(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

nlohmann::ordered_json specialToken(int32_t id, const std::string& content)
{
    return {{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
            {"rstrip", false},    {"normalized", false}, {"special", true}};
}

nlohmann::ordered_json bosTemplate()
{
    using J = nlohmann::ordered_json;
    const J bos = {{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}};
    const J a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
    const J b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
    return {{"type", "TemplateProcessing"},
            {"single", J::array({bos, a})},
            {"pair", J::array({bos, a, b})},
            {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", J::array({kBosId})}, {"tokens", {"<bos>"}}}}}}};
}

}  // namespace

Vocabulary::Vocabulary() : m_classes(static_cast<size_t>(WordClass::Count_))
{
    for (const Category& c : categories()) {
        for (const char* w : c.words) {
            // Disjoint categories are what make every question unambiguous;
            // a duplicate is a programming error in the lists above.
            if (!m_ids.emplace(w, size()).second) throw std::logic_error(std::string("duplicate vocabulary word ") + w);
            m_words.emplace_back(w);
            m_classes[static_cast<size_t>(c.cls)].emplace_back(w);
        }
    }
    if (m_ids.at("<pad>") != kPadId || m_ids.at("<unk>") != kUnkId || m_ids.at("<bos>") != kBosId ||
        m_ids.at("<eos>") != kEosId) {
        throw std::logic_error("special token ids moved");
    }
}

const Vocabulary& Vocabulary::bundled()
{
    static const Vocabulary v;
    return v;
}

const std::string& Vocabulary::word(int32_t id) const
{
    if (id < 0 || id >= size()) throw ArgumentError("word id " + std::to_string(id) + " is outside the vocabulary");
    return m_words[static_cast<size_t>(id)];
}

std::optional<int32_t> Vocabulary::id(std::string_view word) const
{
    const auto it = m_ids.find(std::string(word));
    return it == m_ids.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

std::string Vocabulary::tokenizerJson() const
{
    using J = nlohmann::ordered_json;
    J added = J::array();
    J vocab = J::object();
    for (int32_t id = 0; id < size(); ++id) {
        if (id <= kEosId) added.push_back(specialToken(id, m_words[static_cast<size_t>(id)]));
        vocab[m_words[static_cast<size_t>(id)]] = id;
    }
    // Lowercase lets a user type "The code for the red door is" in the GUI.
    // Whitespace cuts words from punctuation runs; Digits then isolates each
    // digit, as splitWords() does.
    const J pre = {{"type", "Sequence"},
                   {"pretokenizers", J::array({{{"type", "Whitespace"}},
                                               {{"type", "Digits"}, {"individual_digits", true}}})}};
    // decoder null: HF joins tokens with " ". core/tokenizer has no decoder
    // that could glue digits or punctuation to their neighbour (WordPiece's
    // "##" and CTC are not supported), and the plain join is the canonical
    // text the generators write, so decode(encode(doc)) == doc.
    const J doc = {{"version", "1.0"},
                   {"truncation", nullptr},
                   {"padding", nullptr},
                   {"added_tokens", added},
                   {"normalizer", {{"type", "Lowercase"}}},
                   {"pre_tokenizer", pre},
                   {"post_processor", bosTemplate()},
                   {"decoder", nullptr},
                   {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "<unk>"}}}};
    return doc.dump(2) + "\n";
}

void Vocabulary::writeTokenizerJson(const std::filesystem::path& file) const
{
    writeFileAtomically(file, tokenizerJson());
}

std::vector<std::string> splitWords(std::string_view text)
{
    std::vector<std::string> out;
    size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (isSpaceByte(c)) {
            ++i;
        } else if (c >= '0' && c <= '9') {
            out.emplace_back(1, text[i++]);
        } else if (isWordByte(c)) {
            const size_t start = i;
            while (i < text.size() && isWordByte(static_cast<unsigned char>(text[i])) &&
                   !(text[i] >= '0' && text[i] <= '9')) {
                ++i;
            }
            out.emplace_back(text.substr(start, i - start));
        } else {
            const size_t start = i;
            while (i < text.size() && !isWordByte(static_cast<unsigned char>(text[i])) &&
                   !isSpaceByte(static_cast<unsigned char>(text[i]))) {
                ++i;
            }
            out.emplace_back(text.substr(start, i - start));
        }
    }
    return out;
}

std::string joinWords(const std::vector<std::string>& words)
{
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) {
        if (i) out += ' ';
        out += words[i];
    }
    return out;
}

}  // namespace kvlens::eval
