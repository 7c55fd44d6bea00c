#include "core/policy/scorer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/policy/select.h"

namespace kvlens {
namespace {

// Plan with every entry evicted, scores NaN, and the protected sets marked
// kept; returns the protected sets per head.
std::vector<Protected> startPlan(const LayerState& state, int64_t sinks, int64_t window, int64_t budget,
                                 Plan& plan) {
    const int64_t H = state.numKvHeads;
    plan.keep.assign(static_cast<size_t>(H), {});
    plan.reasons.assign(static_cast<size_t>(H), {});
    std::vector<Protected> prot;
    for (int64_t h = 0; h < H; ++h) {
        const int64_t len = state.length(h);
        const Protected p = protectedSet(len, sinks, window, budget);
        auto& reasons = plan.reasons[static_cast<size_t>(h)];
        reasons.assign(static_cast<size_t>(len), KeepReason::Evicted);
        for (int64_t i = 0; i < len; ++i)
            if (p.contains(i, len)) reasons[static_cast<size_t>(i)] = i < p.sinks ? KeepReason::Sink : KeepReason::Window;
        prot.push_back(p);
    }
    return prot;
}

// Fills plan.keep from the reasons (sorted by construction).
void finishPlan(Plan& plan) {
    for (size_t h = 0; h < plan.reasons.size(); ++h) plan.keep[h].reserve(plan.reasons[h].size());
    for (size_t h = 0; h < plan.reasons.size(); ++h)
        for (size_t i = 0; i < plan.reasons[h].size(); ++i)
            if (plan.reasons[h][i] != KeepReason::Evicted) plan.keep[h].push_back(static_cast<int64_t>(i));
}

// Scores on the CPU as fp32 [H, L], NaN wherever a rule decides or nothing
// is stored: one pass, reading the (often strided) score view in place.
at::Tensor displayScores(const at::Tensor& raw, const LayerState& state, const Plan& plan) {
    const int64_t H = state.numKvHeads, L = state.maxLength();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    at::Tensor s = at::empty({H, L}, at::TensorOptions().dtype(at::kFloat));
    float* p = s.data_ptr<float>();
    const at::Tensor src = raw.defined() ? raw.to(at::kCPU, at::kFloat) : at::Tensor();
    const float* q = src.defined() ? src.data_ptr<float>() : nullptr;
    const int64_t s0 = q ? src.stride(0) : 0, s1 = q ? src.stride(1) : 0;
    for (int64_t h = 0; h < H; ++h) {
        const int64_t len = state.length(h);
        const auto& reasons = plan.reasons[h];
        for (int64_t i = 0; i < L; ++i) {
            const bool rule = i >= len || reasons[i] == KeepReason::Sink || reasons[i] == KeepReason::Window;
            p[h * L + i] = rule || !q ? nan : q[h * s0 + i * s1];
        }
    }
    return s;
}

// The candidates of one head: entries no rule kept, with their scores.
std::vector<Candidate> candidates(const LayerState& state, const Plan& plan, int64_t h) {
    const int64_t L = plan.scores.size(1);
    const float* s = plan.scores.data_ptr<float>();
    std::vector<Candidate> out;
    out.reserve(static_cast<size_t>(state.length(h)));
    for (int64_t i = 0; i < state.length(h); ++i)
        if (plan.reasons[h][i] == KeepReason::Evicted) out.push_back({s[h * L + i], state.positions[h][i], h, i});
    return out;
}

// Keeps the `slots` best candidates of head h by score. Every_step policies
// drop one entry per head per step: then a few linear scans over the scores
// find the worst, without building and selecting candidate lists.
void keepBest(const LayerState& state, Plan& plan, int64_t h, int64_t slots) {
    auto& reasons = plan.reasons[h];
    const int64_t len = state.length(h);
    int64_t count = 0;
    for (int64_t i = 0; i < len; ++i) count += reasons[i] == KeepReason::Evicted ? 1 : 0;
    const int64_t drop = count - std::max<int64_t>(0, slots);
    if (drop > 16) {
        for (const Candidate& c : bestUnordered(candidates(state, plan, h), slots)) reasons[c.index] = KeepReason::Score;
        return;
    }
    for (int64_t i = 0; i < len; ++i)
        if (reasons[i] == KeepReason::Evicted) reasons[i] = KeepReason::Score;
    const float* row = plan.scores.data_ptr<float>() + h * plan.scores.size(1);
    const auto& pos = state.positions[h];
    for (int64_t d = 0; d < drop; ++d) {
        int64_t worst = -1;
        for (int64_t i = 0; i < len; ++i) {
            if (reasons[i] != KeepReason::Score) continue;
            if (worst < 0 || ranksBefore({row[worst], pos[worst], h, worst}, {row[i], pos[i], h, i})) worst = i;
        }
        reasons[worst] = KeepReason::Evicted;
    }
}

}  // namespace

ScorerPolicy::ScorerPolicy(const PolicyInfo& info, PolicyConfig config)
    : Policy(info, std::move(config)),
      m_adaptive(this->config().has("heads") && this->config().text("heads") == "adaptive"),
      m_alpha(this->config().has("alpha") ? this->config().getReal("alpha") : 0.0) {}

Plan ScorerPolicy::plan(const LayerState& state) {
    const int64_t B = std::max<int64_t>(0, state.budget), H = state.numKvHeads;
    const int64_t S = sinks(state), W = window(state);
    Plan plan;
    const std::vector<Protected> prot = startPlan(state, S, W, B, plan);
    plan.scores = displayScores(score(state), state, plan);

    int64_t total = 0, protectedTotal = 0;
    for (int64_t h = 0; h < H; ++h) {
        total += state.length(h);
        protectedTotal += prot[h].count();
    }
    if (m_adaptive && total > H * B) {
        // Ada-KV's safeguard: ⌊α·(B − W)⌋ of what the rules leave to scores
        // (the epsilon keeps 0.29·100 at 29 despite binary fractions).
        const Protected nominal = protectedSet(std::numeric_limits<int64_t>::max(), S, W, B);
        const double share = m_alpha * static_cast<double>(B - nominal.count());
        const auto floorPerHead = static_cast<int64_t>(std::floor(share + 1e-9));
        std::vector<std::vector<Candidate>> cands;
        for (int64_t h = 0; h < H; ++h) cands.push_back(candidates(state, plan, h));
        for (const auto& head : allocateAdaptive(cands, floorPerHead, H * B - protectedTotal))
            for (const Candidate& c : head) plan.reasons[c.head][c.index] = KeepReason::Score;
    } else {
        // Uniform heads, or an adaptive layer that fits: top-k per head,
        // which keeps a whole head when it fits its budget.
        for (int64_t h = 0; h < H; ++h) keepBest(state, plan, h, m_adaptive ? state.length(h) : B - prot[h].count());
    }
    finishPlan(plan);
    return plan;
}

Plan keepEverything(const LayerState& state, int64_t sinks, int64_t window) {
    Plan plan;
    startPlan(state, sinks, window, std::numeric_limits<int64_t>::max(), plan);
    for (auto& head : plan.reasons)
        for (auto& r : head)
            if (r == KeepReason::Evicted) r = KeepReason::Score;
    plan.scores = displayScores(at::Tensor(), state, plan);
    finishPlan(plan);
    return plan;
}

}  // namespace kvlens
