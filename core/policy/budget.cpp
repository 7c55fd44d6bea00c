// Budgets as the user gives them and the per-layer allocators. PyramidKV's
// schedule follows POLICIES.md line by line, edge cases included, because
// its floors (not a smooth formula) decide the published budgets.
#include "core/policy/budget.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/policy/text_util.h"

namespace kvlens {
namespace {

const char* kBudgetForms = "give tokens (64) or a percentage of the prompt (25%)";

LayerBudgets uniform(int64_t B, int64_t L, int64_t numLayers, std::string note) {
    LayerBudgets out;
    out.perLayer.assign(static_cast<size_t>(numLayers), B);
    out.compress = B < L;
    out.note = std::move(note);
    if (!out.compress && out.note.empty())
        out.note = "budget " + std::to_string(B) + " covers the prompt length " + std::to_string(L) +
                   ": nothing is evicted from the prompt";
    return out;
}

void checkLayers(int64_t numLayers) {
    if (numLayers < 1) throw ArgumentError("number of layers " + std::to_string(numLayers) + " must be at least 1");
}

}  // namespace

std::string BudgetSpec::text() const {
    std::ostringstream out;
    if (!perLayer.empty()) {
        for (size_t i = 0; i < perLayer.size(); ++i) out << (i ? "," : "") << perLayer[i];
    } else {
        out << value << (kind == Kind::Ratio ? "%" : "");
    }
    return out.str();
}

BudgetSpec parseBudget(const std::string& raw) {
    const std::string t = text::trimmed(raw);
    BudgetSpec spec;
    if (!t.empty() && t.back() == '%') {
        double v = 0;
        if (!text::parseReal(t.substr(0, t.size() - 1), &v))
            throw ArgumentError("budget '" + raw + "' is not a percentage; " + kBudgetForms);
        if (v <= 0) {
            spec.value = 1;
            spec.raised = true;
            spec.note = "budget " + t + " raised to 1 token (a cache holds at least one entry per head)";
            return spec;
        }
        spec.kind = BudgetSpec::Kind::Ratio;
        spec.value = std::min(v, 100.0);
        if (v > 100) spec.note = "budget " + t + " clamped to 100% of the prompt";
        return spec;
    }
    int64_t tokens = 0;
    if (!text::parseInt(t, &tokens)) throw ArgumentError("budget '" + raw + "' is not a whole number; " + kBudgetForms);
    spec.value = static_cast<double>(std::max<int64_t>(tokens, 1));
    spec.raised = tokens < 1;
    if (spec.raised) spec.note = "budget " + t + " raised to 1 token (a cache holds at least one entry per head)";
    return spec;
}

BudgetSpec parseLayerBudgets(const std::string& raw) {
    BudgetSpec spec;
    for (const auto& item : text::split(raw, ',')) {
        int64_t v = 0;
        if (!text::parseInt(text::trimmed(item), &v))
            throw ArgumentError("per-layer budgets '" + raw + "': '" + item + "' is not a whole number");
        if (v < 1) {
            spec.raised = true;
            spec.note = "per-layer budgets below 1 raised to 1 ('" + raw + "')";
        }
        spec.perLayer.push_back(std::max<int64_t>(v, 1));
    }
    if (spec.perLayer.empty())
        throw ArgumentError("per-layer budgets '" + raw + "': expected one whole number per layer, e.g. 64,48,32");
    double sum = 0;
    for (int64_t b : spec.perLayer) sum += static_cast<double>(b);
    spec.value = sum / static_cast<double>(spec.perLayer.size());
    return spec;
}

int64_t resolveBudget(const BudgetSpec& spec, int64_t promptLength) {
    double tokens = spec.value;
    if (spec.perLayer.empty() && spec.kind == BudgetSpec::Kind::Ratio)
        // value·L/100 rather than (value/100)·L: exact for whole percentages
        // (29% of 100 is 29, not 28.999…); the epsilon absorbs the rest.
        tokens = std::floor(spec.value * static_cast<double>(promptLength) / 100.0 + 1e-9);
    return std::max<int64_t>(1, std::llround(tokens));
}

LayerBudgets pyramidBudgets(int64_t B, int64_t W, int64_t L, int64_t numLayers, double beta) {
    checkLayers(numLayers);
    if (L < B) return uniform(B, L, numLayers, "");
    const int64_t b = B - W;
    if (b <= 0)
        return uniform(B, L, numLayers,
                       "budget " + std::to_string(B) + " leaves nothing beyond the window " + std::to_string(W) +
                           ": uniform budget");
    if (L < 2 * b)
        return uniform(B, L, numLayers,
                       "prompt length " + std::to_string(L) + " < 2(B-W) = " + std::to_string(2 * b) +
                           ": uniform budget (PyramidKV's rule)");
    if (numLayers == 1) return uniform(B, L, numLayers, "one layer: uniform budget");
    int64_t lo = static_cast<int64_t>(std::floor(static_cast<double>(b) / beta));
    int64_t hi = 2 * b - lo;
    if (hi >= L - W) {
        hi = L - W;
        lo = 2 * b - hi;
    }
    const int64_t step = (hi - lo) / (numLayers - 1);
    LayerBudgets out;
    for (int64_t l = 0; l < numLayers; ++l) out.perLayer.push_back(hi - l * step + W);
    // With W = 0 and b < beta the top layer's share floors to 0; a layer
    // always holds at least one entry.
    for (auto& v : out.perLayer)
        if (v < 1) {
            v = 1;
            out.note = "layer budgets below 1 raised to 1";
        }
    return out;
}

LayerBudgets allocateBudgets(Allocator allocator, int64_t B, int64_t W, int64_t L, int64_t numLayers, double beta,
                             const std::vector<int64_t>& custom) {
    checkLayers(numLayers);
    switch (allocator) {
    case Allocator::Uniform: return uniform(B, L, numLayers, "");
    case Allocator::Pyramid: return pyramidBudgets(B, W, L, numLayers, beta);
    case Allocator::Custom: break;
    }
    if (static_cast<int64_t>(custom.size()) != numLayers)
        throw ArgumentError("per-layer budgets give " + std::to_string(custom.size()) + " values for " +
                            std::to_string(numLayers) + " layers");
    LayerBudgets out;
    out.perLayer = custom;
    out.compress = false;
    for (auto& v : out.perLayer) {
        if (v < 1) {
            v = 1;
            out.note = "layer budgets below 1 raised to 1";
        }
        out.compress = out.compress || v < L;
    }
    return out;
}

namespace {

LayerBudgets allocateFor(const PolicyConfig& config, const BudgetSpec& spec, int64_t promptLength,
                         int64_t numLayers) {
    const int64_t B = resolveBudget(spec, promptLength);
    if (!spec.perLayer.empty())
        return allocateBudgets(Allocator::Custom, B, 0, promptLength, numLayers, 0, spec.perLayer);
    const bool pyramid = config.has("alloc") && config.text("alloc") == "pyramid";
    if (!pyramid) return allocateBudgets(Allocator::Uniform, B, 0, promptLength, numLayers, 0);
    const int64_t W = config.has("window") ? config.getInt("window") : 0;
    return allocateBudgets(Allocator::Pyramid, B, W, promptLength, numLayers, config.getReal("beta"));
}

}  // namespace

LayerBudgets policyBudgets(const PolicyConfig& config, const BudgetSpec& spec, int64_t promptLength,
                           int64_t numLayers) {
    LayerBudgets out = allocateFor(config, spec, promptLength, numLayers);
    // A threshold (or a rule of the policy's own) keeps what it keeps, whatever the budget: it always compresses.
    if (budgetIsOutcome(config)) out.compress = true;
    // The clamp of what the user typed comes first: it is the one they did not expect.
    if (!spec.note.empty()) out.note = out.note.empty() ? spec.note : spec.note + "; " + out.note;
    return out;
}

}  // namespace kvlens
