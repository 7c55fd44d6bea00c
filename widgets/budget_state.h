#pragma once
// What the budget editor edits: a preset (uniform, PyramidKV's schedule with
// its beta, or custom bars) and the per-layer budgets it gives, in entries per
// KV head. A plain value, so undo/redo can store it whole.
#include <cstdint>
#include <vector>

#include "core/policy/budget.h"

namespace kvlens::ui {

struct BudgetState {
    enum class Preset { Uniform, Pyramid, Custom };
    Preset preset = Preset::Uniform;
    int64_t budget = 64;               // average per layer (uniform and pyramid)
    double beta = 20;                  // pyramid
    std::vector<int64_t> perLayer;     // what the bars show; the custom budgets

    // What the Session receives: a token budget for uniform, per-layer
    // budgets (custom allocator) otherwise.
    BudgetSpec spec() const;
    // Fills perLayer from the preset for this model and prompt.
    void layout(int64_t numLayers, int64_t promptLength);
    int64_t total() const;  // Σ perLayer
    bool operator==(const BudgetState& o) const {
        return preset == o.preset && budget == o.budget && beta == o.beta && perLayer == o.perLayer;
    }
    bool operator!=(const BudgetState& o) const { return !(*this == o); }
};

}  // namespace kvlens::ui
