#pragma once
// CAKE's layer budgets (cake.cpp), for its tests. Internal to core/policy.
#include <cstdint>
#include <vector>

namespace kvlens {

// The budgets beyond the window W of `given` shared out in proportion to each
// layer's preference, capped at N - W, rounded as cake/utils.py
// adjust_budgets does; the window added back.
std::vector<int64_t> cakeLayerBudgets(const std::vector<int64_t>& given, const std::vector<double>& pref, int64_t W,
                                      int64_t N);

}  // namespace kvlens
