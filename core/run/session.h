#pragma once
// Session: the full cache and N eviction policies run in lockstep on the same
// model and prompt. Teacher-forced, every run reads the same continuation
// (the full cache's choices, or a given text): the fair comparison.
// Free-running, each run generates its own. After the prompt and after each
// decode step the Session publishes an immutable, torch-free Trace.
// Torch-free header: the GUI worker owns a Session.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/sampler_options.h"
#include "core/run/trace.h"

namespace kvlens {

class Model;
class Tokenizer;

struct SessionOptions {
    std::vector<int64_t> prompt;
    std::vector<PolicyConfig> policies;  // "full" is added as run 0 (and ignored here if listed)
    BudgetSpec budget;
    // Each policy's own budget, one per entry of `policies` (compare
    // --match-memory gives every policy the budget that holds the same
    // memory); empty: every policy has `budget`.
    std::vector<BudgetSpec> budgets;
    bool teacherForced = true;
    std::vector<int64_t> continuation;   // teacher-forced reference; empty: the full cache's own choices
    SamplingOptions sampling;            // how the full run (and free-running runs) pick tokens
    std::shared_ptr<const Tokenizer> tokenizer;  // for readable labels; optional
    struct Capture {
        bool enabled = false;
        int64_t layer = 0, head = 0;     // query head
    } attention;
    // Keep what a later Session needs to take over after an edit (the
    // interactive refresh): the full cache's prompt record (its queries,
    // keys and values: about 1 + 2/G times the KV cache of the prompt), its
    // per-step results and the published Traces. The GUI sets it; a batch
    // run (compare, export, needle) need not hold that memory.
    bool refreshable = false;
    // A question about the prompt (kvpress's `question`), empty for none.
    // Aware (kvpress query_aware, Finch): it ends the prompt the runs read,
    // and every policy with an observation window (a `window` parameter)
    // observes exactly the question (window = its length, which also keeps
    // it). Agnostic (kvpress's default pipeline, KVzip's setting): the
    // prompt is read and compressed without it, then every run reads the
    // question (the first question.size() decode steps, teacher-forced or
    // not) before it generates; the continuation follows it.
    enum class QuestionMode { Aware, Agnostic };
    std::vector<int64_t> question;
    QuestionMode questionMode = QuestionMode::Agnostic;
    // A calibration prompt (token ids), empty for none: Q-Filters computes
    // its filters from the model's queries over it instead of the prompt's
    // (the reference's calibration corpus, chosen by the user).
    std::vector<int64_t> calibration;
    // Decode steps the caller means to take (0: unknown): the hindsight
    // oracle's default horizon (`oracle:horizon=0`; 16 when unknown), which it reads ahead.
    int64_t plannedSteps = 0;
    // The memory the Session may plan for, in bytes (0: defaultMemoryBudget(),
    // core/run/memory_guard.h). Past it the attention map keeps only the
    // latest queries (memoryNote() says so); a run that would not fit even
    // without it is refused (MemoryError).
    uint64_t memoryBudget = 0;
};

// "aware" | "agnostic", and back (ArgumentError naming the text otherwise).
// Inline: torch-free code (the CLI's argument parsing, its fuzzer) uses them.
inline const char* questionModeName(SessionOptions::QuestionMode m) {
    return m == SessionOptions::QuestionMode::Aware ? "aware" : "agnostic";
}
inline SessionOptions::QuestionMode parseQuestionMode(const std::string& text) {
    if (text == "aware") return SessionOptions::QuestionMode::Aware;
    if (text == "agnostic") return SessionOptions::QuestionMode::Agnostic;
    throw ArgumentError("question mode '" + text + "': expected aware or agnostic");
}
// The decode steps an agnostic question takes before the answer's (its
// tokens), 0 otherwise: callers step that many more.
inline int64_t questionSteps(const SessionOptions& o) {
    return o.questionMode == SessionOptions::QuestionMode::Agnostic ? static_cast<int64_t>(o.question.size()) : 0;
}

// What a Session took over from the one before it (Session's third constructor).
struct Reuse {
    int64_t promptTokens = 0;   // prompt tokens the full cache did not read again
    int64_t steps = 0;          // decode steps whose results were taken over (kept runs)
    int runsKept = 0;           // runs (the full cache included) whose results were taken over
    int runsShared = 0;         // runs that shared the full cache's prompt read (followed it or replayed its record)
    int runsRead = 0;           // runs that read the prompt themselves
    int runsReadPast = 0;       // of those, the ones that replayed the prefix no trim touches from the full cache's record
    std::string text() const;   // one line, e.g. "kept 5 runs and 16 steps; 1 shared the full cache's prompt read"
};

// How far start() has read the prompt for one run it computes.
struct RunProgress {
    std::string label;            // the policy's label ("full" for the full cache)
    int64_t done = 0, total = 0;  // prompt tokens read, followed or replayed, of the prompt's
};

// Thrown out of start()/step() when the cancel flag is raised.
struct Cancelled {};

class Session {
public:
    // Validates the options (budgets, policies, capture indices): throws
    // ArgumentError naming what is wrong.
    Session(std::shared_ptr<const Model> model, SessionOptions options);
    // The interactive refresh (issue 17): a Session after an edit, taking
    // over from `previous` (a started, refreshable Session on the same
    // model, which it consumes) what the edit left valid. Same prompt and
    // continuation: the full cache and every run whose policy, parameters
    // and budgets are unchanged keep their results, step for step; the
    // others replay the prompt record (prefill_once, prefill_then_step) or
    // read the prompt, then catch up. A prompt that shares a prefix with the
    // previous one: the full cache goes back to that prefix and reads the
    // rest (the policies replay the extended record). Anything else starts
    // afresh. The Traces are those of a new Session (within 1e-5 where the
    // full cache read the prompt in other chunks).
    Session(std::shared_ptr<const Model> model, SessionOptions options, std::unique_ptr<Session> previous);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Every run reads the prompt (each with its policy's schedule).
    std::shared_ptr<const Trace> start();
    // One decode step for every run.
    std::shared_ptr<const Trace> step();
    const SessionOptions& options() const;
    // Checked between tokens; when it becomes true, start()/step() throw
    // Cancelled. step() checks it before it changes anything; start() of a
    // Session that kept the previous one's full cache does not check it (a
    // cancelled one would leave nothing for the next edit to take over).
    void setCancelFlag(const std::atomic<bool>* flag);
    // Called while start() reads the prompt, from the threads reading it (at
    // most every 100 ms, and once when the prompt is read): the runs this
    // Session computes, each with its tokens so far. The runs taken over
    // from a previous Session are not listed.
    void setProgressCallback(std::function<void(const std::vector<RunProgress>&)> callback);
    // What was taken over from the previous Session (zeros without one).
    const Reuse& reuse() const;
    // What the memory guard dropped to keep the run within its budget, one
    // sentence; empty when nothing was.
    const std::string& memoryNote() const;

    struct Impl;

private:
    std::unique_ptr<Impl> m;
};

}  // namespace kvlens
