#pragma once
// A comparison at matched memory (issue 50): at one budget B the policies
// hold different memory over a run, because their schedules differ (a
// prefill_once policy compresses the prompt to B once, then grows by one
// entry per step; an every_step policy stays at B). Matching gives each
// policy the budget whose mean KV bytes held over the run (the mean over
// its predictions, PolicyTrace::meanBytesHeld) is nearest to a target:
// what a cache of B entries per KV head in every layer holds. Torch-free header.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/policy/budget.h"
#include "core/run/session.h"

namespace kvlens {

class Model;

struct MemoryMatch {
    std::string label;             // the policy's label
    BudgetSpec budget;             // the budget it runs with (tokens), or the given one when not matchable
    double meanBytes = 0;          // the mean KV bytes it held over the run at that budget
    int runs = 0;                  // runs the search took
    // Why the budget was not solved for, empty when it was: a policy whose
    // holding is an outcome (select=threshold, a budget-free rule) keeps the
    // given budget; a target beyond what the policy holds with the whole
    // prompt gets the largest budget.
    std::string note;
};

struct MemoryMatching {
    double targetBytes = 0;        // the mean KV bytes every policy is matched to
    int64_t targetTokens = 0;      // B, the budget the target is the memory of
    std::vector<MemoryMatch> policies;  // one per entry of SessionOptions::policies
};

// Solves, policy by policy, the budget (whole tokens, 1 .. the prompt's
// length) whose mean KV bytes held over `steps` decode steps is nearest to
// that of a cache holding resolveBudget(options.budget) entries per KV
// head in every layer. Each try is a Session of the full cache and that
// policy, taking over the full cache's prompt read from the try before.
// `progress`, when given, is told after each try ("snapkv: budget 57 holds
// 61.3 entries per KV head"); `cancel`, when raised, stops it (Cancelled).
// Throws ArgumentError for per-layer budgets (--budgets).
MemoryMatching matchMemory(const std::shared_ptr<const Model>& model, const SessionOptions& options, int64_t steps,
                           const std::function<void(const std::string&)>& progress = {},
                           const std::atomic<bool>* cancel = nullptr);

// `options` with each policy's matched budget (SessionOptions::budgets).
SessionOptions withMatchedBudgets(SessionOptions options, const MemoryMatching& matching);

}  // namespace kvlens
