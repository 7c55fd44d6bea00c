#include "core/study/match_memory.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "core/error.h"
#include "core/model/model.h"
#include "core/policy/policy_info.h"

namespace kvlens {
namespace {

BudgetSpec tokens(int64_t b) {
    BudgetSpec s;
    s.kind = BudgetSpec::Kind::Tokens;
    s.value = static_cast<double>(b);
    return s;
}

// Runs the full cache and one policy at one budget, each try taking over
// the full cache (its prompt read and steps) from the one before.
class Prober {
public:
    Prober(std::shared_ptr<const Model> model, const SessionOptions& options, int64_t steps,
           const std::atomic<bool>* cancel)
        : m_model(std::move(model)), m_options(options), m_steps(steps), m_cancel(cancel) {
        m_options.budgets.clear();
        m_options.attention.enabled = false;
        m_options.refreshable = true;
    }
    // The run's trace after its last step.
    std::shared_ptr<const Trace> run(const PolicyConfig& policy, const BudgetSpec& budget) {
        SessionOptions o = m_options;
        o.policies = {policy};
        o.budget = budget;
        auto session = std::make_unique<Session>(m_model, std::move(o), std::move(m_last));
        session->setCancelFlag(m_cancel);
        std::shared_ptr<const Trace> t = session->start();
        for (int64_t s = 0; s < m_steps; ++s) t = session->step();
        m_last = std::move(session);
        return t;
    }

private:
    std::shared_ptr<const Model> m_model;
    SessionOptions m_options;
    int64_t m_steps;
    const std::atomic<bool>* m_cancel;
    std::unique_ptr<Session> m_last;
};

std::string entries(double bytes, double perToken) {
    char out[64];
    std::snprintf(out, sizeof out, "%.1f entries per KV head", bytes / perToken);
    return out;
}

}  // namespace

MemoryMatching matchMemory(const std::shared_ptr<const Model>& model, const SessionOptions& options, int64_t steps,
                           const std::function<void(const std::string&)>& progress, const std::atomic<bool>* cancel) {
    if (!options.budget.perLayer.empty())
        throw ArgumentError("matching memory solves one budget per policy: give --budget, not per-layer --budgets");
    Prober prober(model, options, steps, cancel);
    // The full cache at the first prediction holds the prompt it read: its bytes per token.
    const std::shared_ptr<const Trace> first = prober.run(fullCacheConfig(), options.budget);
    const PolicyTrace& full = first->policies.at(0);
    if (full.metrics.empty() || first->promptLength <= 0)
        throw Error("matchMemory: the full cache made no prediction to measure");
    const int64_t T = first->promptLength;
    const double perToken = static_cast<double>(full.metrics.front().bytesHeld) / static_cast<double>(T);
    MemoryMatching out;
    out.targetTokens = resolveBudget(options.budget, T);
    out.targetBytes = perToken * static_cast<double>(out.targetTokens);
    for (const PolicyConfig& p : options.policies) {
        MemoryMatch m;
        m.label = p.label();
        std::map<int64_t, double> held;  // budget -> mean bytes held
        auto f = [&](int64_t b) {
            if (auto it = held.find(b); it != held.end()) return it->second;
            const double bytes = prober.run(p, tokens(b))->policies.at(1).meanBytesHeld();
            ++m.runs;
            if (progress) progress(m.label + ": budget " + std::to_string(b) + " holds " + entries(bytes, perToken));
            return held[b] = bytes;
        };
        if (isFullCache(p) || budgetIsOutcome(p)) {
            m.budget = options.budget;
            m.meanBytes = prober.run(p, options.budget)->policies.at(isFullCache(p) ? 0 : 1).meanBytesHeld();
            m.note = isFullCache(p) ? "the full cache holds every token"
                                    : "holds what its rule keeps, whatever the budget: kept at " + options.budget.text();
            out.policies.push_back(m);
            continue;
        }
        // The smallest budget holding at least the target (the means grow with the budget), then the nearer of it and the one below.
        int64_t lo = 1, hi = T;
        if (f(hi) < out.targetBytes) {
            lo = hi;
            m.note = "holds at most " + entries(f(hi), perToken) + " over the run (the whole prompt): below the target";
        } else if (f(lo) > out.targetBytes) {
            hi = lo;
            m.note = "holds " + entries(f(lo), perToken) + " over the run at a budget of 1: above the target";
        }
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (f(mid) >= out.targetBytes) hi = mid;
            else lo = mid + 1;
        }
        int64_t best = lo;
        if (best > 1 && std::fabs(f(best - 1) - out.targetBytes) <= std::fabs(f(best) - out.targetBytes)) --best;
        m.budget = tokens(best);
        m.meanBytes = f(best);
        out.policies.push_back(m);
    }
    return out;
}

SessionOptions withMatchedBudgets(SessionOptions options, const MemoryMatching& matching) {
    if (matching.policies.size() != options.policies.size())
        throw Error("withMatchedBudgets: " + std::to_string(matching.policies.size()) + " matches for " +
                    std::to_string(options.policies.size()) + " policies");
    options.budgets.clear();
    for (const MemoryMatch& m : matching.policies) options.budgets.push_back(m.budget);
    return options;
}

}  // namespace kvlens
