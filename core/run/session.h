#pragma once
// Session: the full cache and N eviction policies run in lockstep on the same
// model and prompt. Teacher-forced, every run reads the same continuation
// (the full cache's choices, or a given text): the fair comparison.
// Free-running, each run generates its own. After the prompt and after each
// decode step the Session publishes an immutable, torch-free Trace.
// Torch-free header: the GUI worker owns a Session.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

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
    bool teacherForced = true;
    std::vector<int64_t> continuation;   // teacher-forced reference; empty: the full cache's own choices
    SamplingOptions sampling;            // how the full run (and free-running runs) pick tokens
    std::shared_ptr<const Tokenizer> tokenizer;  // for readable labels; optional
    struct Capture {
        bool enabled = false;
        int64_t layer = 0, head = 0;     // query head
    } attention;
};

// Thrown out of start()/step() when the cancel flag is raised.
struct Cancelled {};

class Session {
public:
    // Validates the options (budgets, policies, capture indices): throws
    // ArgumentError naming what is wrong.
    Session(std::shared_ptr<const Model> model, SessionOptions options);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Every run reads the prompt (each with its policy's schedule).
    std::shared_ptr<const Trace> start();
    // One decode step for every run.
    std::shared_ptr<const Trace> step();
    int64_t stepsDone() const;
    const SessionOptions& options() const;
    // Checked between tokens; when it becomes true, start()/step() throw Cancelled.
    void setCancelFlag(const std::atomic<bool>* flag);

    struct Impl;

private:
    std::unique_ptr<Impl> m;
};

}  // namespace kvlens
