#pragma once
// The needle-in-a-haystack grid: for every context length × depth, a probe
// (needle.h) is read by the full cache and by each policy at each budget in
// one free-running Session, each run answers greedily, and the answers are
// scored (exact match, word overlap). Torch-free header: the CLI and the
// GUI's needle view run it; part of kvlens_core (it drives a Session).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/eval/needle.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"

namespace kvlens {
class Model;
class Tokenizer;
}  // namespace kvlens

namespace kvlens::eval {

struct NeedleGridOptions {
    std::vector<int64_t> contexts{512, 1024};
    std::vector<double> depths{0, 0.25, 0.5, 0.75, 1.0};
    std::vector<PolicyConfig> policies;   // "full" is always scored too (once per probe)
    std::vector<BudgetSpec> budgets;      // each policy runs at each budget; needed when a policy evicts
    int64_t samples = 1;                  // probes per cell (seeds seed, seed+1, ...)
    uint64_t seed = 1;
    int64_t maxNewTokens = 0;             // 0: the expected answer's tokens + 2
    std::optional<UserNeedle> user;       // real models: the user's haystack, needle, question, answer
};

struct NeedleAnswer {
    uint64_t seed = 0;
    std::string answer;    // the decoded generation
    std::string expected;
    bool exact = false;
    double overlap = 0;
};

struct NeedleCell {
    int64_t context = 0;   // requested context length (tokens)
    double depth = 0;
    std::string policy;    // "full" or the policy's label
    std::string budget;    // the budget as given ("64", "25%"); "-" for full
    double exact = 0;      // mean over samples
    double overlap = 0;    // mean over samples
    int64_t promptTokens = 0;  // of the first sample (user haystacks come out close to `context`)
    std::vector<NeedleAnswer> answers;  // one per sample
};

struct NeedleGridResult {
    std::string model;  // directory name
    NeedleGridOptions options;
    std::vector<NeedleCell> cells;  // context-major, then depth, then full, then policies × budgets

    // Mean exact-match of one policy/budget over the whole grid (or one context when > 0).
    double meanExact(const std::string& policy, const std::string& budget, int64_t context = 0) const;
};

// Called after each cell: (cells done, cells in total).
using NeedleProgress = std::function<void(int64_t done, int64_t total)>;

// Throws ArgumentError for an empty grid, a depth outside [0, 1], a context
// that cannot hold the probe, or an evicting policy without budgets;
// Session's Cancelled when the flag is raised.
NeedleGridResult runNeedleGrid(const std::shared_ptr<const Model>& model, const std::shared_ptr<const Tokenizer>& tokenizer,
                               const NeedleGridOptions& options, const NeedleProgress& progress = {},
                               const std::atomic<bool>* cancel = nullptr);

}  // namespace kvlens::eval
