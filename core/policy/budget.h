#pragma once
// Cache budgets: what the user asks for (tokens, a ratio of the prompt, or a
// per-layer list) and the per-layer allocators (uniform, PyramidKV's
// schedule, custom). Torch-free. Budgets count entries per KV head, protected
// sinks and windows included (POLICIES.md "Budget").
#include <cstdint>
#include <string>
#include <vector>

#include "core/policy/policy_info.h"

namespace kvlens {

struct BudgetSpec {
    enum class Kind { Tokens, Ratio };
    Kind kind = Kind::Tokens;
    double value = 0;                 // tokens, or percent of the prompt length
    std::vector<int64_t> perLayer;    // --budgets b0,b1,... (custom allocator); overrides value
    std::string note;                 // how the text given was clamped, empty if it was not
    bool raised = false;              // a value of zero or less was raised to 1 (the note says so)
    std::string text() const;         // "64", "25%", "64,48,32"
};

// "64" or "25%". Numbers outside the range are clamped with a note (0 or
// negative tokens/percent -> 1 token, above 100% -> 100%); text that is not
// a number throws ArgumentError with the text and why.
BudgetSpec parseBudget(const std::string& text);
// "64,48,32" (one per layer); values below 1 are raised to 1 with a note.
BudgetSpec parseLayerBudgets(const std::string& text);

enum class Allocator { Uniform, Pyramid, Custom };

struct LayerBudgets {
    std::vector<int64_t> perLayer;   // entries per KV head, per layer
    bool compress = true;            // false: the budget covers the prompt, nothing is evicted
    std::string note;                // e.g. "budget 900 clamped to the prompt length 512", empty if none
};

// Average budget in tokens for a prompt of `promptLength` (ratio resolved,
// at least 1).
int64_t resolveBudget(const BudgetSpec& spec, int64_t promptLength);

// PyramidKV's reference schedule (POLICIES.md), average budget B (window
// included), window W, prompt length L, N layers, beta.
LayerBudgets pyramidBudgets(int64_t B, int64_t W, int64_t L, int64_t numLayers, double beta);

// The per-layer budgets an allocator gives. `custom` is used for
// Allocator::Custom (its size must equal numLayers).
LayerBudgets allocateBudgets(Allocator allocator, int64_t B, int64_t W, int64_t L, int64_t numLayers, double beta,
                             const std::vector<int64_t>& custom = {});

// The per-layer budgets a policy runs with: spec.perLayer (custom) when
// given, else the config's `alloc` (uniform | pyramid, with its `beta` and,
// for PyramidKV's W, its `window` when it has one).
LayerBudgets policyBudgets(const PolicyConfig& config, const BudgetSpec& spec, int64_t promptLength,
                           int64_t numLayers);

}  // namespace kvlens
