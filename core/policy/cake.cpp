// CAKE, cascading and adaptive KV-cache eviction (Qin et al., ICLR 2025;
// antgroup/cakekv `cake/model/modify_llama.py`, `cake/cake_cache.py`,
// `cake/utils.py`). Two parts:
// - a scorer: the last W queries' attention over the keys before the window,
//   its mean over those queries plus gamma times its (unbiased) variance,
//   average-pooled along the keys, averaged over the group's query heads;
//   the window is kept;
// - a layer allocator: each layer's preference is the entropy of that
//   attention (summed over heads, queries and keys) to the power 1/tau1
//   times its summed variance over the queries to the power 1/tau2; the
//   layers' budgets beyond the window are shared out in proportion, capped
//   at what a layer holds, rounded as the reference rounds.
// The reference decides layer by layer during the prefill and re-trims the
// earlier layers as it goes (cascading); its final budgets are the
// proportional split over all layers computed here once, at the end of the
// prompt (docs/policies.md).
#include <ATen/ATen.h>

#include <cmath>
#include <numeric>

#include "core/policy/cake.h"
#include "core/policy/factory.h"
#include "core/policy/snapkv.h"

namespace kvlens {

// Shares `amount` tokens out evenly over the layers below `cap` (the first
// ones get one more while a remainder is left), again while some hit the
// cap: cake/utils.py adjust_budgets' rule.
void shareOut(std::vector<int64_t>& b, int64_t amount, int64_t cap) {
    while (amount > 0) {
        std::vector<size_t> open;
        for (size_t l = 0; l < b.size(); ++l)
            if (b[l] < cap) open.push_back(l);
        if (open.empty()) return;
        const auto n = static_cast<int64_t>(open.size());
        const int64_t each = amount / n, rest = amount % n;
        for (int64_t i = 0; i < n; ++i) {
            int64_t& v = b[open[static_cast<size_t>(i)]];
            const int64_t add = std::min(each + (i < rest ? 1 : 0), cap - v);
            v += add;
            amount -= add;
        }
    }
}

// CAKE's layer budgets: `given` the allocator's (window included), `pref`
// each layer's preference, W the window, N the entries a layer holds.
std::vector<int64_t> cakeLayerBudgets(const std::vector<int64_t>& given, const std::vector<double>& pref, int64_t W,
                                      int64_t N) {
    const double total = std::accumulate(pref.begin(), pref.end(), 0.0);
    if (!(total > 0) || !std::isfinite(total)) return given;  // no preference to go by
    int64_t T = 0;  // the budget beyond the windows
    for (int64_t g : given) {
        if (g < W) return given;  // a layer whose window fills its budget: nothing of it to share
        T += g - W;
    }
    if (T == 0) return given;
    const int64_t cap = std::max<int64_t>(0, N - W);
    std::vector<int64_t> b(given.size());
    int64_t excess = 0;
    for (size_t l = 0; l < b.size(); ++l) {
        b[l] = static_cast<int64_t>(std::floor(pref[l] / total * static_cast<double>(T)));
        if (b[l] > cap) excess += b[l] - cap, b[l] = cap;
    }
    shareOut(b, excess, cap);
    shareOut(b, T - std::accumulate(b.begin(), b.end(), int64_t{0}), cap);  // what the rounding left
    for (auto& v : b) v += W;
    return b;
}

namespace {

class CakePolicy : public WindowScorer {
public:
    CakePolicy(const PolicyInfo& info, PolicyConfig config)
        : WindowScorer(info, std::move(config)),
          m_gamma(this->config().getReal("gamma")),
          m_tau1(this->config().getReal("tau1")),
          m_tau2(this->config().getReal("tau2")),
          m_layers(this->config().getBool("layer_budgets")) {}

    // Layer budgets are chosen once, at the first trim where a layer holds
    // more than its budget (the end of a prompt longer than the budget);
    // the cache keeps them (PolicyRun::budgetOf), so later trims need no
    // look across layers.
    bool crossLayer() const override {
        return m_layers && m_chosen.empty() &&
               (config().schedule == Schedule::PrefillOnce || config().schedule == Schedule::PrefillThenStep);
    }

    void planAcrossLayers(const std::vector<LayerState>& states, std::vector<int64_t>& perLayer) override {
        bool over = false;  // a prompt within every layer's budget evicts nothing: nothing to share (the reference's rule)
        for (size_t l = 0; l < states.size(); ++l) {
            int64_t held = 0;
            for (int64_t h = 0; h < states[l].numKvHeads; ++h) held += states[l].length(h);
            over = over || held > states[l].numKvHeads * perLayer[l];
        }
        if (!over) return;
        std::vector<double> pref;
        int64_t N = 0;
        for (const LayerState& s : states) {
            pref.push_back(preference(s));
            N = std::max(N, s.maxLength());
        }
        m_chosen = cakeLayerBudgets(perLayer, pref, window(states.front()), N);
        perLayer = m_chosen;
    }

protected:
    at::Tensor score(const LayerState& state) override {
        const at::Tensor attn = windowAttention(state);  // [Hkv, G, m, L]
        if (!attn.defined()) return {};
        const int64_t Hkv = attn.size(0), G = attn.size(1), L = attn.size(3);
        const at::Tensor before = beforeWindow(state).unsqueeze(1);  // [Hkv, 1, L]
        const at::Tensor a = prefix(attn, state);
        const at::Tensor s = a.mean(2) + m_gamma * variance(a);     // [Hkv, G, L]
        const at::Tensor pooled = pool1d(s, before, kernel(), pool());
        return reduceGroups(pooled.reshape({Hkv * G, L}), Hkv, config().gqa);
    }

private:
    // The window's attention on the keys before the window, 0 elsewhere.
    at::Tensor prefix(const at::Tensor& attn, const LayerState& state) const {
        return attn.masked_fill(~beforeWindow(state).unsqueeze(1).unsqueeze(2), 0.0);
    }
    // Unbiased variance over the window's queries, [Hkv, G, L]; 0 with one query.
    static at::Tensor variance(const at::Tensor& a) {
        if (a.size(2) < 2) return at::zeros_like(a.select(2, 0));
        return a.var(2, /*unbiased=*/true);
    }
    // disp^(1/tau1) * var^(1/tau2) of the layer's window attention. (Its
    // plan computes the attention again: keeping every layer's until then
    // costs Hq x W x L floats a layer, and measured no faster.)
    double preference(const LayerState& state) const {
        const at::Tensor attn = windowAttention(state);
        if (!attn.defined()) return 0;
        const at::Tensor a = prefix(attn, state).to(at::kDouble);
        const double disp = -(a * (a + 1e-10).log()).sum().item<double>();
        const double var = variance(a).sum().item<double>();
        return std::pow(std::max(0.0, disp), 1.0 / m_tau1) * std::pow(std::max(0.0, var), 1.0 / m_tau2);
    }

    double m_gamma, m_tau1, m_tau2;
    bool m_layers;
    std::vector<int64_t> m_chosen;  // the layer budgets, once chosen
};

const BuiltinMaker kMaker{"cake", construct<CakePolicy>};

}  // namespace

}  // namespace kvlens
