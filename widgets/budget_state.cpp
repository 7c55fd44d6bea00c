#include "widgets/budget_state.h"

#include <algorithm>
#include <numeric>

namespace kvlens::ui {

BudgetSpec BudgetState::spec() const {
    BudgetSpec s;
    s.kind = BudgetSpec::Kind::Tokens;
    s.value = static_cast<double>(budget);
    if (preset != Preset::Uniform) {
        s.perLayer = perLayer;
    } else if (percent > 0) {
        s.kind = BudgetSpec::Kind::Ratio;
        s.value = percent;
    }
    return s;
}

void BudgetState::layout(int64_t numLayers, int64_t promptLength) {
    if (numLayers <= 0) return;
    if (percent > 0 && preset != Preset::Custom)
        budget = resolveBudget(BudgetSpec{BudgetSpec::Kind::Ratio, percent, {}, {}, false}, std::max<int64_t>(1, promptLength));
    budget = std::max<int64_t>(1, budget);
    switch (preset) {
        case Preset::Uniform:
            perLayer.assign(static_cast<size_t>(numLayers), budget);
            break;
        case Preset::Pyramid: {
            // No window reservation here: the bars are the schedule itself;
            // a policy's own window is kept inside each layer's budget.
            const LayerBudgets b = pyramidBudgets(budget, 0, std::max<int64_t>(1, promptLength), numLayers, beta);
            perLayer = b.compress ? b.perLayer : std::vector<int64_t>(static_cast<size_t>(numLayers), budget);
            break;
        }
        case Preset::Custom:
            if (static_cast<int64_t>(perLayer.size()) != numLayers)
                perLayer.resize(static_cast<size_t>(numLayers), budget);
            break;
    }
}

QString BudgetState::bText() const {
    return percent > 0 ? QString::number(percent) + QLatin1Char('%') : QString::number(budget);
}

int64_t BudgetState::total() const { return std::accumulate(perLayer.begin(), perLayer.end(), int64_t{0}); }

}  // namespace kvlens::ui
