#pragma once
// What the budget editor edits: a preset (uniform, PyramidKV's schedule with
// its beta, or custom bars) and the per-layer budgets it gives, in entries per
// KV head. A plain value, so undo/redo can store it whole.
#include <QString>
#include <cstdint>
#include <vector>

#include "core/policy/budget.h"

namespace kvlens::ui {

struct BudgetState {
    enum class Preset { Uniform, Pyramid, Custom };
    Preset preset = Preset::Uniform;
    int64_t budget = 64;               // average per layer (uniform and pyramid)
    // > 0: B is this percent of the prompt ("25%"), and `budget` follows the
    // prompt's length (layout()); the session gets the ratio itself.
    double percent = 0;
    double beta = 20;                  // pyramid
    std::vector<int64_t> perLayer;     // what the bars show; the custom budgets

    // What the Session receives: a token budget (or the percent) for
    // uniform, per-layer budgets (custom allocator) otherwise.
    BudgetSpec spec() const;
    // Fills perLayer from the preset for this model and prompt.
    void layout(int64_t numLayers, int64_t promptLength);
    int64_t total() const;  // Σ perLayer
    QString bText() const;  // what B reads: "64" or "25%"
    bool operator==(const BudgetState& o) const {
        return preset == o.preset && budget == o.budget && percent == o.percent && beta == o.beta &&
               perLayer == o.perLayer;
    }
    bool operator!=(const BudgetState& o) const { return !(*this == o); }
};

}  // namespace kvlens::ui
