#pragma once
// Lesson files: a guided walk through KVLens for a class, as versioned JSON
// (format "kvlens-lesson", version 1). A lesson is an ordered list of steps;
// each step has a short text, the state to put in place (a session, written
// as the changes from the step before, so a step names only what it
// changes), the panels to show, what to highlight (tokens, heads, a region of
// the heatmap) and optionally a question: the class predicts (one of several
// choices, or "pick the tokens you think survive"), then Reveal shows the
// answer and why — for a pick, the answer is what the policy really kept.
// Torch-free (kvlens_base). docs/lessons.md documents the format.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/session_file.h"

namespace kvlens {

struct Trace;

// The docks a step may show (their object names in the window); the lesson
// dock itself and the comparison view are always shown.
const std::vector<std::string>& lessonPanels();

struct LessonHighlight {
    // Tokens: positions, or words matched to the first prompt token that
    // reads as the word (leading space or "▁" ignored).
    std::vector<int64_t> positions;
    std::vector<std::string> words;
    std::vector<int64_t> heads;  // query heads of the shown layer, ringed in the layers × heads grids
    struct Region {
        int64_t queryFirst = 0, queryLast = 0, keyFirst = 0, keyLast = 0;  // inclusive; -1 counts from the end
    };
    std::optional<Region> region;  // a rectangle on every attention heatmap
    bool empty() const { return positions.empty() && words.empty() && heads.empty() && !region; }
};

struct LessonQuestion {
    enum class Kind { Choice, Pick };
    Kind kind = Kind::Choice;
    std::string ask;
    std::vector<std::string> choices;  // Choice: the options, `answer` the right one
    int answer = -1;
    // Pick: which tokens does `policy` (a spec as the session lists it) hold
    // in `layer` × `kvHead` at the step shown after Reveal?
    std::string policy;
    int64_t layer = 0, kvHead = 0;
    // Choice, measured (issue 46): the answer is not written in the file but
    // taken from the run shown after Reveal: the choice whose run (`runs`,
    // one per choice, specs as the session lists them) has the lowest mean
    // KL to the full cache. Empty: `answer` is the right choice.
    std::vector<std::string> runs;
    bool measured() const { return !runs.empty(); }
    std::optional<SessionFile> reveal;  // the state Reveal puts in place (e.g. adds the policy); none: unchanged
    std::string why;                    // one sentence shown with the answer
};

struct LessonStep {
    std::string title, text;
    // The whole state of this step: the start with every earlier step's
    // "set" and Reveal applied, then this step's "set".
    SessionFile state;
    std::vector<std::string> panels;  // docks shown (lessonPanels() names); empty: as the step before
    LessonHighlight highlight;
    std::optional<LessonQuestion> question;
};

struct Lesson {
    static constexpr int kVersion = 1;
    std::string title, summary;
    std::string needs;  // what to do before the lesson runs (import a model...), empty: nothing
    std::vector<LessonStep> steps;
};

// Throws FormatError naming `source` and the field at fault ("steps[2].set.budget ...").
Lesson lessonFromJson(const nlohmann::json& j, const std::string& source = "lesson");
Lesson loadLesson(const std::filesystem::path& file);

// The prompt positions a highlight names, in order, each once; a word no
// label reads as is skipped (the lesson's text still reads).
std::vector<int64_t> highlightPositions(const LessonHighlight& h, const std::vector<std::string>& labels);
// The first position whose label reads as `word` (" red", "▁red", "red"), -1 when none.
int64_t tokenPosition(const std::vector<std::string>& labels, const std::string& word);

// A Pick question against a run: the positions the question's policy holds
// (sink, window, kept by score or held) in the prompt, from the trace's run
// of the question's policy (compared as the registry labels them). Throws
// ArgumentError naming the policy when the trace has no such run, or the
// layer / KV head is out of range.
std::vector<int64_t> pickAnswer(const Trace& trace, const LessonQuestion& q);

// A measured Choice against a run: the index of the choice whose run has
// the lowest mean KL (a NaN one never wins), and each run's mean KL in
// `meanKl`. Throws ArgumentError naming a run the trace does not have, or
// when no run has a mean KL.
int measuredAnswer(const Trace& trace, const LessonQuestion& q, std::vector<double>* meanKl = nullptr);

struct PickScore {
    int64_t picked = 0;  // tokens the class chose
    int64_t right = 0;   // of those, held by the policy
    int64_t held = 0;    // tokens the policy holds
};
PickScore scorePick(const std::vector<int64_t>& picked, const std::vector<int64_t>& held);

}  // namespace kvlens
