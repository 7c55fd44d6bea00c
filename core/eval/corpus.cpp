#include "core/eval/corpus.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/eval/vocabulary.h"

namespace kvlens::eval {

uint64_t Rng::below(uint64_t n)
{
    // Rejecting draws under 2^64 mod n leaves a range that is a multiple of
    // n, so the modulo is unbiased (and identical on every platform).
    const uint64_t threshold = (uint64_t{0} - n) % n;
    for (;;) {
        const uint64_t r = next();
        if (r >= threshold) return r % n;
    }
}

int64_t Rng::between(int64_t lo, int64_t hi)
{
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
}

double Rng::unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::vector<std::string> codeDigits(Rng& rng, int digits)
{
    std::vector<std::string> out;
    for (int i = 0; i < digits; ++i) out.push_back(std::string(1, static_cast<char>('0' + rng.below(10))));
    return out;
}

std::vector<std::string> codeStatement(const std::string& colour, const std::string& object,
                                       const std::vector<std::string>& digits)
{
    std::vector<std::string> w = {"the", "code", "for", "the", colour, object, "is"};
    w.insert(w.end(), digits.begin(), digits.end());
    w.emplace_back(".");
    return w;
}

std::vector<std::string> codeQuestion(const std::string& colour, const std::string& object)
{
    return {"what", "is", "the", "code", "for", "the", colour, object, "?"};
}

namespace {

const std::vector<std::string>& words(WordClass c) { return Vocabulary::bundled().words(c); }

// ---- filler grammar ---------------------------------------------------------

// One sentence shape: [time ,] subject verb-phrase [adverb] [place] "."
// with the token count of each slot (0 = absent). Enumerating the shapes
// lets a sentence of any exact length 3..17 be drawn uniformly among them.
struct Shape {
    int time, subject, verb, adverb, place;
    int64_t length() const { return time + subject + verb + adverb + place + 1; }
};

const std::vector<Shape>& shapes()
{
    static const std::vector<Shape> all = [] {
        std::vector<Shape> s;
        for (int time : {0, 3, 4})
            for (int subject : {1, 2, 3})
                for (int verb : {1, 2, 3, 4})
                    for (int adverb : {0, 1})
                        for (int place : {0, 3, 4}) s.push_back({time, subject, verb, adverb, place});
        return s;
    }();
    return all;
}
constexpr int64_t kMinSentence = 3;
constexpr int64_t kMaxSentence = 17;

// 1: a name; 2: "the" noun; 3: "the" adjective noun.
void appendNounPhrase(Rng& rng, int n, WordClass noun, std::vector<std::string>& out)
{
    if (n == 1) {
        out.push_back(rng.pick(words(WordClass::Name)));
        return;
    }
    out.emplace_back("the");
    if (n == 3) out.push_back(rng.pick(words(WordClass::Adjective)));
    out.push_back(rng.pick(words(noun)));
}

void appendTime(Rng& rng, int n, std::vector<std::string>& out)
{
    if (n == 4) {
        out.insert(out.end(), {"in", "the", rng.pick(words(WordClass::DayPart))});
    } else if (rng.chance(0.5)) {
        out.insert(out.end(), {"at", rng.pick(words(WordClass::TimeOfDay))});
    } else {
        out.insert(out.end(), {"in", rng.pick(words(WordClass::Season))});
    }
    out.emplace_back(",");
}

void appendSentence(Rng& rng, int64_t length, std::vector<std::string>& out)
{
    if (length <= 2) {  // only where an exact count leaves no room for a clause
        if (length == 2) out.push_back(rng.pick(words(WordClass::Interjection)));
        out.emplace_back(".");
        return;
    }
    std::vector<const Shape*> fits;
    for (const Shape& s : shapes()) {
        if (s.length() == length) fits.push_back(&s);
    }
    const Shape& s = *rng.pick(fits);
    if (s.time) appendTime(rng, s.time, out);
    appendNounPhrase(rng, s.subject, WordClass::Person, out);
    if (s.verb == 1) {
        out.push_back(rng.pick(words(WordClass::IntransitiveVerb)));
    } else {
        out.push_back(rng.pick(words(WordClass::TransitiveVerb)));
        appendNounPhrase(rng, s.verb - 1, rng.chance(0.3) ? WordClass::Person : WordClass::Noun, out);
    }
    if (s.adverb) out.push_back(rng.pick(words(WordClass::Adverb)));
    if (s.place) {
        out.push_back(rng.pick(words(WordClass::Preposition)));
        appendNounPhrase(rng, s.place - 1, WordClass::Noun, out);
    }
    out.emplace_back(".");
}

// ---- document state and segments ----------------------------------------

enum class Kind { Fact, FactQuery, Entity, EntityQuery, Filler, List, Repeat, Count_ };
enum class Relation { Lives, Works, Has, Likes };
constexpr int kRelations = 4;

struct Fact {
    std::string colour, object;
    std::vector<std::string> digits;
};

struct EntityFact {
    std::string name;
    Relation relation;
    std::vector<std::string> object;  // "the north tower", "a red cat", "honey"
};

// A candidate piece of the document; its effects on State apply only once
// it is known to fit (commit), so a rejected candidate changes nothing.
struct Segment {
    std::vector<std::string> words;
    std::vector<AnswerToken> answers;  // positions relative to the segment
    std::optional<Fact> newFact;
    std::optional<EntityFact> newEntity;
    std::string listOwner;
    bool repeatable = false;

    void add(const std::vector<std::string>& w, std::optional<AnswerKind> answer = std::nullopt)
    {
        for (const std::string& word : w) {
            if (answer) answers.push_back({static_cast<int64_t>(words.size()), *answer});
            words.push_back(word);
        }
    }
};

struct State {
    std::vector<Fact> facts;  // in order of introduction
    std::vector<EntityFact> entities;
    std::set<std::string> usedKeys;     // "red door", "north tower", "red cat": each answer is unique
    std::set<std::pair<std::string, int>> usedNameRelations;
    std::set<std::string> listOwners;   // one list per name, so a repeat is unambiguous
    std::vector<std::vector<std::string>> repeatables;
};

// Every "<a> <b>" of two word classes not yet used in this document, in a
// fixed order (so the draw among them is deterministic).
std::vector<std::pair<std::string, std::string>> unusedPairs(const State& st, WordClass a, WordClass b)
{
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& x : words(a)) {
        for (const std::string& y : words(b)) {
            if (!st.usedKeys.count(x + " " + y)) out.emplace_back(x, y);
        }
    }
    return out;
}

std::optional<Segment> makeFact(Rng& rng, const CorpusOptions& opt, const State& st)
{
    const auto keys = unusedPairs(st, WordClass::Colour, WordClass::Object);
    if (keys.empty()) return std::nullopt;
    const auto& [colour, object] = rng.pick(keys);
    Fact f{colour, object, codeDigits(rng, static_cast<int>(rng.between(opt.codeDigitsMin, opt.codeDigitsMax)))};
    Segment s;
    s.add(codeStatement(f.colour, f.object, f.digits));  // the first statement is not predictable
    s.newFact = std::move(f);
    return s;
}

std::optional<Segment> makeFactQuery(Rng& rng, const CorpusOptions& opt, const State& st)
{
    const auto n = static_cast<uint64_t>(st.facts.size());
    if (n == 0) return std::nullopt;
    const uint64_t index = rng.chance(opt.recentQueryProbability) ? n - 1 - rng.below(std::min<uint64_t>(3, n))
                                                                  : rng.below(n);
    const Fact& f = st.facts[static_cast<size_t>(index)];
    Segment s;
    if (rng.chance(opt.restateProbability)) {
        s.add({"the", "code", "for", "the", f.colour, f.object, "is"});
    } else {
        s.add(codeQuestion(f.colour, f.object));
    }
    s.add(f.digits, AnswerKind::Fact);
    s.add({"."});
    return s;
}

std::vector<std::string> verbPhrase(Relation r)
{
    switch (r) {
    case Relation::Lives: return {"lives", "in"};
    case Relation::Works: return {"works", "at"};
    case Relation::Has: return {"has"};
    case Relation::Likes: return {"likes"};
    }
    return {};
}

std::optional<Segment> makeEntity(Rng& rng, const State& st)
{
    std::vector<std::pair<std::string, int>> free;  // (name, relation) not stated yet
    for (const std::string& name : words(WordClass::Name)) {
        for (int r = 0; r < kRelations; ++r) {
            if (!st.usedNameRelations.count({name, r})) free.emplace_back(name, r);
        }
    }
    if (free.empty()) return std::nullopt;
    const auto& [name, r] = rng.pick(free);
    EntityFact e{name, static_cast<Relation>(r), {}};
    if (e.relation == Relation::Likes) {
        e.object = {rng.pick(words(WordClass::Food))};  // not unique: never asked backwards
    } else {
        const bool place = e.relation != Relation::Has;
        const auto objects = place ? unusedPairs(st, WordClass::PlaceAdjective, WordClass::PlaceNoun)
                                   : unusedPairs(st, WordClass::Colour, WordClass::Animal);
        if (objects.empty()) return std::nullopt;
        const auto& [first, second] = rng.pick(objects);
        e.object = {place ? "the" : "a", first, second};
    }
    Segment s;
    s.add({e.name});
    s.add(verbPhrase(e.relation));
    s.add(e.object);
    s.add({"."});
    s.newEntity = std::move(e);
    return s;
}

// The answer part of an entity's object: without its article, which any
// reader predicts from the question.
void addEntityAnswer(Segment& s, const std::vector<std::string>& object)
{
    const bool article = object.size() > 1 && (object[0] == "the" || object[0] == "a");
    if (article) s.add({object[0]});
    s.add(std::vector<std::string>(object.begin() + (article ? 1 : 0), object.end()), AnswerKind::Entity);
}

std::optional<Segment> makeEntityQuery(Rng& rng, const CorpusOptions& opt, const State& st)
{
    if (st.entities.empty()) return std::nullopt;
    const EntityFact& e = rng.pick(st.entities);
    Segment s;
    if (e.relation != Relation::Likes && rng.chance(opt.reverseQueryProbability)) {
        s.add({"who"});
        s.add(verbPhrase(e.relation));
        s.add(e.object);
        s.add({"?"});
        s.add({e.name}, AnswerKind::Entity);
    } else if (rng.chance(opt.restateProbability)) {
        s.add({e.name});
        s.add(verbPhrase(e.relation));
        addEntityAnswer(s, e.object);
    } else {
        static const char* const verbs[] = {"live", "work", "have", "like"};
        const bool where = e.relation == Relation::Lives || e.relation == Relation::Works;
        s.add({where ? "where" : "what", "does", e.name, verbs[static_cast<int>(e.relation)], "?"});
        addEntityAnswer(s, e.object);
    }
    s.add({"."});
    return s;
}

std::optional<Segment> makeList(Rng& rng, const CorpusOptions& opt, const State& st)
{
    std::vector<std::string> owners;
    for (const std::string& name : words(WordClass::Name)) {
        if (!st.listOwners.count(name)) owners.push_back(name);
    }
    if (owners.empty()) return std::nullopt;
    std::vector<std::string> items = words(WordClass::Food);
    items.insert(items.end(), words(WordClass::Goods).begin(), words(WordClass::Goods).end());
    const auto n = static_cast<size_t>(rng.between(opt.listMinItems, opt.listMaxItems));
    for (size_t i = 0; i < n; ++i) {  // partial Fisher-Yates: n distinct items
        std::swap(items[i], items[i + static_cast<size_t>(rng.below(items.size() - i))]);
    }
    Segment s;
    s.listOwner = rng.pick(owners);
    s.add({s.listOwner, "buys"});
    for (size_t i = 0; i < n; ++i) {
        if (i > 0) s.add({i + 1 == n ? "and" : ","});
        s.add({items[i]});
    }
    s.add({"."});
    s.repeatable = true;
    return s;
}

// Filler this long or longer is worth repeating (shorter ones recur by chance).
constexpr size_t kMinRepeatWords = 6;
// The first words of a repeat are shared with other sentences ("the", a
// name), so copying only becomes the best guess after them.
constexpr size_t kCopyPrefixWords = 2;

Segment makeFiller(Rng& rng, const CorpusOptions& opt)
{
    Segment s;
    s.add(fillerWords(rng, rng.between(opt.fillerMinWords, opt.fillerMaxWords)));
    s.repeatable = s.words.size() >= kMinRepeatWords;
    return s;
}

std::optional<Segment> makeRepeat(Rng& rng, const State& st)
{
    if (st.repeatables.empty()) return std::nullopt;
    const std::vector<std::string>& w = rng.pick(st.repeatables);
    Segment s;
    s.add(std::vector<std::string>(w.begin(), w.begin() + kCopyPrefixWords));
    s.add(std::vector<std::string>(w.begin() + kCopyPrefixWords, w.end() - 1), AnswerKind::Copy);
    s.add({"."});
    return s;
}

Kind pickKind(Rng& rng, const CorpusOptions& opt, const State& st)
{
    // A document at its facts-max draws no more facts (makeFact, reached only
    // through this draw, need not check).
    const bool factsFull = opt.maxFacts > 0 && st.facts.size() >= static_cast<size_t>(opt.maxFacts);
    double w[static_cast<int>(Kind::Count_)] = {
        factsFull ? 0.0 : opt.factWeight,
        st.facts.empty() ? 0.0 : opt.factQueryWeight,
        opt.entityWeight,
        st.entities.empty() ? 0.0 : opt.entityQueryWeight,
        opt.fillerWeight,
        opt.listWeight,
        st.repeatables.empty() ? 0.0 : opt.repeatWeight,
    };
    double total = 0;
    for (double x : w) total += x;
    if (total <= 0) return Kind::Filler;
    const double r = rng.unit() * total;
    double acc = 0;
    int last = 0;
    for (int k = 0; k < static_cast<int>(Kind::Count_); ++k) {
        if (w[k] <= 0) continue;
        acc += w[k];
        last = k;
        if (r < acc) return static_cast<Kind>(k);
    }
    return static_cast<Kind>(last);  // r rounded up to total
}

std::optional<Segment> makeSegment(Kind kind, Rng& rng, const CorpusOptions& opt, const State& st)
{
    switch (kind) {
    case Kind::Fact: return makeFact(rng, opt, st);
    case Kind::FactQuery: return makeFactQuery(rng, opt, st);
    case Kind::Entity: return makeEntity(rng, st);
    case Kind::EntityQuery: return makeEntityQuery(rng, opt, st);
    case Kind::List: return makeList(rng, opt, st);
    case Kind::Repeat: return makeRepeat(rng, st);
    case Kind::Filler:
    case Kind::Count_: break;
    }
    return makeFiller(rng, opt);
}

void commit(Segment&& s, State& st, Document& doc)
{
    const auto offset = static_cast<int64_t>(doc.words.size());
    for (const AnswerToken& a : s.answers) doc.answers.push_back({offset + a.position, a.kind});
    if (s.newFact) {
        st.usedKeys.insert(s.newFact->colour + " " + s.newFact->object);
        st.facts.push_back(std::move(*s.newFact));
    }
    if (s.newEntity) {
        const EntityFact& e = *s.newEntity;
        st.usedNameRelations.insert({e.name, static_cast<int>(e.relation)});
        if (e.relation != Relation::Likes) st.usedKeys.insert(e.object[1] + " " + e.object[2]);
        st.entities.push_back(std::move(*s.newEntity));
    }
    if (!s.listOwner.empty()) st.listOwners.insert(s.listOwner);
    if (s.repeatable) st.repeatables.push_back(s.words);
    doc.words.insert(doc.words.end(), s.words.begin(), s.words.end());
}

void requireOption(bool ok, const std::string& what)
{
    if (!ok) throw ArgumentError("corpus option " + what);
}

void validate(const CorpusOptions& o, int64_t length)
{
    if (length < 0) throw ArgumentError("document length " + std::to_string(length) + " is negative");
    for (double w : {o.factWeight, o.factQueryWeight, o.entityWeight, o.entityQueryWeight, o.fillerWeight,
                     o.listWeight, o.repeatWeight}) {
        requireOption(std::isfinite(w) && w >= 0, "weights must be finite and >= 0");
    }
    for (double p : {o.restateProbability, o.recentQueryProbability, o.reverseQueryProbability}) {
        requireOption(p >= 0 && p <= 1, "probabilities must lie in [0, 1]");
    }
    requireOption(o.maxFacts >= 0, "facts-max must be >= 0 (0: no limit)");
    requireOption(o.codeDigitsMin >= 1 && o.codeDigitsMin <= o.codeDigitsMax && o.codeDigitsMax <= 16,
                  "code digits must satisfy 1 <= min <= max <= 16");
    requireOption(o.fillerMinWords >= kMinSentence && o.fillerMinWords <= o.fillerMaxWords,
                  "filler words must satisfy 3 <= min <= max");
    const auto items = words(WordClass::Food).size() + words(WordClass::Goods).size();
    requireOption(o.listMinItems >= 1 && o.listMinItems <= o.listMaxItems &&
                      static_cast<size_t>(o.listMaxItems) <= items,
                  "list items must satisfy 1 <= min <= max <= " + std::to_string(items));
}

}  // namespace

CorpusOptions needleStyleOptions()
{
    CorpusOptions o;
    o.factWeight = 1.0;
    o.factQueryWeight = 1.0;
    o.entityWeight = 0.5;
    o.entityQueryWeight = 0.5;
    o.fillerWeight = 12.0;
    o.listWeight = 0.5;
    o.repeatWeight = 0.5;
    o.recentQueryProbability = 0.1;  // the point is distance
    return o;
}

CorpusOptions applyCorpusMix(CorpusOptions o, const std::string& mix)
{
    const std::pair<const char*, double CorpusOptions::*> keys[] = {
        {"fact", &CorpusOptions::factWeight},          {"query", &CorpusOptions::factQueryWeight},
        {"entity", &CorpusOptions::entityWeight},      {"entity-query", &CorpusOptions::entityQueryWeight},
        {"filler", &CorpusOptions::fillerWeight},      {"list", &CorpusOptions::listWeight},
        {"repeat", &CorpusOptions::repeatWeight},      {"restate", &CorpusOptions::restateProbability},
        {"recent", &CorpusOptions::recentQueryProbability}, {"reverse", &CorpusOptions::reverseQueryProbability},
    };
    size_t start = 0;
    while (start < mix.size()) {
        const size_t end = std::min(mix.find(',', start), mix.size());
        const std::string item = mix.substr(start, end - start);
        start = end + 1;
        const size_t eq = item.find('=');
        const std::string key = item.substr(0, eq);
        double CorpusOptions::*field = nullptr;
        for (const auto& [name, f] : keys)
            if (key == name) field = f;
        int CorpusOptions::*intField = key == "digits-min"  ? &CorpusOptions::codeDigitsMin
                                       : key == "digits-max" ? &CorpusOptions::codeDigitsMax
                                       : key == "facts-max"  ? &CorpusOptions::maxFacts
                                                             : nullptr;
        if (!field && !intField) {
            std::string known;
            for (const auto& k : keys) known += std::string(known.empty() ? "" : ", ") + k.first;
            known += ", digits-min, digits-max, facts-max";
            throw ArgumentError("corpus mix: unknown key '" + key + "' in '" + mix + "' (known: " + known + ")");
        }
        try {
            if (eq == std::string::npos) throw std::invalid_argument("no value");
            size_t used = 0;
            const std::string value = item.substr(eq + 1);
            if (field) {
                o.*field = std::stod(value, &used);
            } else {
                o.*intField = std::stoi(value, &used);
            }
            if (used != value.size()) throw std::invalid_argument("trailing text");
        } catch (const std::exception&) {
            throw ArgumentError("corpus mix: '" + item + "' is not key=number");
        }
    }
    validate(o, 0);
    return o;
}

std::vector<std::string> fillerWords(Rng& rng, int64_t count)
{
    std::vector<std::string> out;
    int64_t left = count;
    while (left > 0) {
        // Long runs are cut into sentences of 5..14 words, always leaving
        // enough for a whole sentence after them.
        const int64_t n = left <= kMaxSentence ? left : rng.between(5, std::min<int64_t>(14, left - kMinSentence));
        appendSentence(rng, n, out);
        left -= n;
    }
    return out;
}

Document generateDocument(const CorpusOptions& options, uint64_t seed, int64_t lengthTokens)
{
    validate(options, lengthTokens);
    Rng rng(seed);
    State st;
    Document doc;
    while (static_cast<int64_t>(doc.words.size()) < lengthTokens) {
        const int64_t remaining = lengthTokens - static_cast<int64_t>(doc.words.size());
        std::optional<Segment> seg = makeSegment(pickKind(rng, options, st), rng, options, st);
        if (!seg) seg = makeFiller(rng, options);  // e.g. all 384 code keys used
        const auto n = static_cast<int64_t>(seg->words.size());
        // A segment must leave 0 or >= 3 tokens, so that the document ends
        // on whole filler sentences, never on a lone "." or "okay .".
        if (n == remaining || n + kMinSentence <= remaining) {
            commit(std::move(*seg), st, doc);
        } else {
            const std::vector<std::string> tail = fillerWords(rng, remaining);
            doc.words.insert(doc.words.end(), tail.begin(), tail.end());
        }
    }
    doc.text = joinWords(doc.words);
    return doc;
}

}  // namespace kvlens::eval
