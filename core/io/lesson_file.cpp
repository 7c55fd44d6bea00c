#include "core/io/lesson_file.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/json_error.h"
#include "core/io/json_fields.h"
#include "core/read_file.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/trace.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace kvlens {
namespace {

constexpr const char* kFormat = "kvlens-lesson";

// The fields a step's state may set: a session's, less its header.
void checkSessionFields(const json& j, const std::string& path) {
    checkFields(j, path,
                {"model", "prompt", "policies", "budget", "budgets", "decode_steps", "teacher_forced", "sampling", "view"});
}

// The session a step's state describes, checked as a session file is.
SessionFile sessionOf(const json& state, const std::string& path) {
    json s = state;
    s["format"] = "kvlens-session";
    s["version"] = SessionFile::kVersion;
    SessionFile session;
    try {
        session = sessionFromJson(s, "the state at " + path);
    } catch (const FormatError& e) {
        throw ArgumentError(e.what());
    }
    try {  // what opening the session would refuse, refused here, naming the step
        for (const auto& spec : session.policies) parsePolicySpec(spec);
        if (!session.budgets.empty()) parseLayerBudgets(session.budgets);
        else if (!session.budget.empty()) parseBudget(session.budget);
    } catch (const ArgumentError& e) {
        throw ArgumentError("the state at " + path + ": " + e.what());
    }
    return session;
}

// Whether the state runs the policy a pick question asks about.
bool runs(const SessionFile& s, const std::string& policy) {
    const std::string label = parsePolicySpec(policy).label();
    for (const auto& spec : s.policies)
        if (parsePolicySpec(spec).label() == label) return true;
    return false;
}

// `state` with `patch` applied (RFC 7386: a field set to null goes back to its default).
json patched(json state, const json& patch, const std::string& path) {
    checkSessionFields(patch, path);
    state.merge_patch(patch);
    return state;
}

LessonHighlight highlightFrom(const json& j, const std::string& path) {
    checkFields(j, path, {"tokens", "heads", "region"});
    LessonHighlight h;
    for (const json& t : jsonField<json>(j, path, "tokens", json::array())) {
        if (t.is_number_integer() && t.get<int64_t>() >= 0)
            h.positions.push_back(t.get<int64_t>());
        else if (t.is_string() && !t.get<std::string>().empty())
            h.words.push_back(t.get<std::string>());
        else
            throw ArgumentError("\"" + path + "tokens\" holds " + t.dump() + ": expected a position (0, 1, ...) or a word");
    }
    for (const json& x : jsonField<json>(j, path, "heads", json::array())) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0)
            throw ArgumentError("\"" + path + "heads\" holds " + x.dump() + ": expected a query head (0, 1, ...)");
        h.heads.push_back(x.get<int64_t>());
    }
    if (j.contains("region")) {
        const std::string at = path + "region.";
        checkFields(j["region"], at, {"queries", "keys"});
        auto range = [&](const char* name) {
            const auto r = jsonField<std::vector<int64_t>>(j["region"], at, name, {}, true);
            if (r.size() != 2) throw ArgumentError("\"" + at + name + "\" must be [first, last]");
            return r;
        };
        const auto q = range("queries"), k = range("keys");
        h.region = LessonHighlight::Region{q[0], q[1], k[0], k[1]};
    }
    return h;
}

LessonQuestion questionFrom(const json& j, const std::string& path, const json& state) {
    checkFields(j, path, {"ask", "choices", "answer", "measure", "pick", "reveal", "why"});
    LessonQuestion q;
    q.ask = jsonField<std::string>(j, path, "ask", "", true);
    q.why = jsonField<std::string>(j, path, "why", "", true);
    if (q.ask.empty() || q.why.empty()) throw ArgumentError("\"" + path + "ask\" and \"why\" must not be empty");
    const bool choice = j.contains("choices"), pick = j.contains("pick");
    if (choice == pick) throw ArgumentError("\"" + path + "\" needs one of \"choices\" (with \"answer\") or \"pick\"");
    if (choice) {
        q.kind = LessonQuestion::Kind::Choice;
        q.choices = jsonField<std::vector<std::string>>(j, path, "choices", {});
        if (q.choices.size() < 2) throw ArgumentError("\"" + path + "choices\" must list at least two answers");
        if (j.contains("measure")) {
            if (j.contains("answer"))
                throw ArgumentError("\"" + path + "answer\": a measured question's answer is the run's own");
            const std::string at = path + "measure.";
            checkFields(j["measure"], at, {"lowest", "runs"});
            if (jsonField<std::string>(j["measure"], at, "lowest", "", true) != "mean_kl")
                throw ArgumentError("\"" + at + "lowest\" must be \"mean_kl\" (the one measure a question takes)");
            q.runs = jsonField<std::vector<std::string>>(j["measure"], at, "runs", {}, true);
            if (q.runs.size() != q.choices.size())
                throw ArgumentError("\"" + at + "runs\" must name one run per choice (" + std::to_string(q.choices.size()) + ")");
        } else {
            q.answer = jsonField<int>(j, path, "answer", -1, true);
        }
        if (!q.measured() && (q.answer < 0 || q.answer >= static_cast<int>(q.choices.size())))
            throw ArgumentError("\"" + path + "answer\" is " + std::to_string(q.answer) + ": expected 0 .. " +
                                std::to_string(q.choices.size() - 1) + " (the right choice, counting from 0)");
    } else {
        if (j.contains("answer")) throw ArgumentError("\"" + path + "answer\": a pick question's answer is the run's own");
        q.kind = LessonQuestion::Kind::Pick;
        const std::string at = path + "pick.";
        checkFields(j["pick"], at, {"policy", "layer", "kv_head"});
        q.policy = jsonField<std::string>(j["pick"], at, "policy", "", true);
        q.layer = jsonField<int64_t>(j["pick"], at, "layer", 0);
        q.kvHead = jsonField<int64_t>(j["pick"], at, "kv_head", 0);
        if (q.policy.empty() || q.layer < 0 || q.kvHead < 0)
            throw ArgumentError("\"" + at + "\" needs a policy, and a layer and KV head from 0");
    }
    if (j.contains("reveal")) q.reveal = sessionOf(patched(state, j["reveal"], path + "reveal."), path + "reveal");
    const SessionFile shown = q.reveal ? *q.reveal : sessionOf(state, path);
    if (q.kind == LessonQuestion::Kind::Pick && !runs(shown, q.policy))
        throw ArgumentError("\"" + path + "pick.policy\" " + q.policy +
                            " is not among the policies shown after Reveal (add it in \"reveal\")");
    for (const auto& run : q.runs)
        if (!runs(shown, run))
            throw ArgumentError("\"" + path + "measure.runs\" " + run +
                                " is not among the policies shown after Reveal (add it in \"reveal\")");
    return q;
}

}  // namespace

const std::vector<std::string>& lessonPanels() {
    static const std::vector<std::string> names{"prompt", "policies", "model",  "budget", "metrics",
                                                "needle", "memory",   "sweep",  "timeline", "agreement"};
    return names;
}

Lesson lessonFromJson(const json& j, const std::string& source) {
    Lesson lesson;
    try {
        if (!j.is_object()) throw ArgumentError("not a KVLens lesson (expected a JSON object)");
        if (jsonField<std::string>(j, "", "format", "") != kFormat)
            throw ArgumentError("not a KVLens lesson (\"format\" is not \"kvlens-lesson\")");
        const int version = jsonField<int>(j, "", "version", 0, true);
        if (version > Lesson::kVersion)
            throw ArgumentError("written by a newer KVLens (lesson version " + std::to_string(version) +
                                "); this one reads version " + std::to_string(Lesson::kVersion) + " — update KVLens");
        if (version < 1) throw ArgumentError("lesson version " + std::to_string(version) + " is not valid");
        checkFields(j, "", {"format", "version", "title", "summary", "needs", "start", "steps"});
        lesson.title = jsonField<std::string>(j, "", "title", "", true);
        lesson.summary = jsonField<std::string>(j, "", "summary", "");
        lesson.needs = jsonField<std::string>(j, "", "needs", "");
        json state = jsonField<json>(j, "", "start", json(), true);
        checkSessionFields(state, "start.");
        if (!state.contains("model")) state["model"] = json::object();
        sessionOf(state, "start");
        const json steps = jsonField<json>(j, "", "steps", json(), true);
        if (!steps.is_array() || steps.empty()) throw ArgumentError("\"steps\" must be a list of at least one step");
        const std::set<std::string> panels(lessonPanels().begin(), lessonPanels().end());
        for (size_t i = 0; i < steps.size(); ++i) {
            const std::string path = "steps[" + std::to_string(i) + "].";
            const json& s = steps[i];
            checkFields(s, path, {"title", "text", "set", "panels", "highlight", "question"});
            LessonStep step;
            step.title = jsonField<std::string>(s, path, "title", "", true);
            step.text = jsonField<std::string>(s, path, "text", "", true);
            if (step.title.empty() || step.text.empty())
                throw ArgumentError("\"" + path + "title\" and \"text\" must not be empty");
            if (s.contains("set")) state = patched(state, s["set"], path + "set.");
            step.state = sessionOf(state, path + "set");
            step.panels = jsonField<std::vector<std::string>>(s, path, "panels", {});
            for (const auto& p : step.panels)
                if (!panels.count(p)) {
                    std::string known;
                    for (const auto& n : lessonPanels()) known += (known.empty() ? "" : ", ") + n;
                    throw ArgumentError("\"" + path + "panels\" names \"" + p + "\": expected some of " + known);
                }
            if (s.contains("highlight")) step.highlight = highlightFrom(s["highlight"], path + "highlight.");
            if (s.contains("question")) {
                step.question = questionFrom(s["question"], path + "question.", state);
                // The next step starts from what the class saw last: the state after Reveal.
                if (s["question"].contains("reveal")) state = patched(state, s["question"]["reveal"], path + "question.reveal.");
            }
            lesson.steps.push_back(std::move(step));
        }
    } catch (const ArgumentError& e) {
        throw FormatError(source, e.what());
    }
    return lesson;
}

Lesson loadLesson(const fs::path& file) {
    json j;
    try {
        j = json::parse(readRegularFile(file, 16ull << 20));
    } catch (const json::parse_error& e) {
        throw FormatError(file.string(), jsonErrorText(e.what()));
    }
    return lessonFromJson(j, file.string());
}

int64_t tokenPosition(const std::vector<std::string>& labels, const std::string& word) {
    for (size_t i = 0; i < labels.size(); ++i) {
        std::string l = labels[i];
        if (l.rfind(" ", 0) == 0) l.erase(0, 1);
        else if (l.rfind("\xE2\x96\x81", 0) == 0) l.erase(0, 3);  // "▁"
        if (l == word) return static_cast<int64_t>(i);
    }
    return -1;
}

std::vector<int64_t> highlightPositions(const LessonHighlight& h, const std::vector<std::string>& labels) {
    std::vector<int64_t> out;
    auto add = [&](int64_t p) {
        if (p >= 0 && p < static_cast<int64_t>(labels.size()) && std::find(out.begin(), out.end(), p) == out.end())
            out.push_back(p);
    };
    for (int64_t p : h.positions) add(p);
    for (const auto& w : h.words) add(tokenPosition(labels, w));
    return out;
}

std::vector<int64_t> pickAnswer(const Trace& trace, const LessonQuestion& q) {
    const std::string label = parsePolicySpec(q.policy).label();
    const PolicyTrace* run = nullptr;
    for (const auto& p : trace.policies)
        if (!run && p.label == label) run = &p;
    if (!run) throw ArgumentError("the question asks about policy \"" + q.policy + "\", which this run does not have");
    if (q.layer >= static_cast<int64_t>(run->layers.size()) ||
        q.kvHead >= static_cast<int64_t>(run->layers[q.layer].heads.size()))
        throw ArgumentError("the question's layer " + std::to_string(q.layer) + ", KV head " + std::to_string(q.kvHead) +
                            " is not in this model");
    const HeadTrace& head = run->layers[q.layer].heads[q.kvHead];
    std::vector<int64_t> held;
    const int64_t n = std::min<int64_t>(trace.promptLength, static_cast<int64_t>(head.status.size()));
    for (int64_t p = 0; p < n; ++p)
        if (isHeld(head.status[p])) held.push_back(p);
    return held;
}

int measuredAnswer(const Trace& trace, const LessonQuestion& q, std::vector<double>* meanKl) {
    int best = -1;
    std::vector<double> kl;
    for (size_t i = 0; i < q.runs.size(); ++i) {
        const std::string label = parsePolicySpec(q.runs[i]).label();
        const auto run = std::find_if(trace.policies.begin(), trace.policies.end(),
                                      [&](const PolicyTrace& p) { return p.label == label; });
        if (run == trace.policies.end())
            throw ArgumentError("the question measures run \"" + q.runs[i] + "\", which this run does not have");
        kl.push_back(run->meanKl());
        if (!std::isnan(kl.back()) && (best < 0 || kl.back() < kl[static_cast<size_t>(best)])) best = static_cast<int>(i);
    }
    if (best < 0) throw ArgumentError("no run the question measures has a mean KL yet (it needs a decode step)");
    if (meanKl) *meanKl = std::move(kl);
    return best;
}

PickScore scorePick(const std::vector<int64_t>& picked, const std::vector<int64_t>& held) {
    PickScore s;
    s.picked = static_cast<int64_t>(picked.size());
    s.held = static_cast<int64_t>(held.size());
    for (int64_t p : picked) s.right += std::find(held.begin(), held.end(), p) != held.end();
    return s;
}

}  // namespace kvlens
