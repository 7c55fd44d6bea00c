#include "core/study/ranking.h"

#include <algorithm>
#include <cstdio>

#include "core/policy/policy_info.h"

namespace kvlens {
namespace {

RankedRun rowOf(const Trace& t, size_t r, const PolicyTrace* oracle) {
    const PolicyTrace& p = t.policies[r];
    RankedRun row;
    row.run = r;
    row.label = p.label;
    if (r > 0 && !p.layers.empty()) {
        double sum = 0;
        for (const auto& l : p.layers) sum += static_cast<double>(l.budget);
        row.budget = sum / static_cast<double>(p.layers.size());
    }
    if (p.failure.empty()) {  // a run that stopped is not ranked on what it measured before
        row.meanKl = p.meanKl();
        row.top1 = p.top1Agreement();
        row.perplexity = p.perplexity();
        row.retainedMass = p.meanRetainedMass();
    }
    row.meanBytes = p.meanBytesHeld();
    row.peakBytes = p.peakBytesHeld();
    if (oracle && r > 0) row.oracleAgreement = keptJaccardMean(p, *oracle);
    return row;
}

double median(std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string percent(double v) {
    char out[32];
    std::snprintf(out, sizeof out, "%.0f%%", 100.0 * v);
    return out;
}

}  // namespace

Ranking rankRuns(const Trace& t, double targetBytes, double tolerance) {
    Ranking out;
    out.tolerance = tolerance;
    const PolicyTrace* oracle = nullptr;
    for (const auto& p : t.policies)
        if (!oracle && !isFullCache(p.id) && findPolicy(p.id).hindsight) oracle = &p;
    std::vector<RankedRun> rows;
    std::vector<double> means;
    for (size_t r = 0; r < t.policies.size(); ++r) {
        rows.push_back(rowOf(t, r, oracle));
        if (r > 0 && std::isfinite(rows.back().meanBytes)) means.push_back(rows.back().meanBytes);
    }
    out.matched = std::isfinite(targetBytes);
    out.referenceBytes = out.matched ? targetBytes : median(means);
    for (size_t r = 1; r < rows.size(); ++r) {
        RankedRun& row = rows[r];
        if (!std::isfinite(row.meanBytes) || !(out.referenceBytes > 0)) continue;
        row.memoryShare = row.meanBytes / out.referenceBytes;
        row.unequalMemory = std::fabs(row.memoryShare - 1.0) > tolerance;
        out.unequal += row.unequalMemory;
    }
    // Rank by mean KL (lower is better), ties by top-1 agreement, then by the run's order.
    std::vector<size_t> order;
    for (size_t r = 1; r < rows.size(); ++r)
        if (std::isfinite(rows[r].meanKl)) order.push_back(r);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (rows[a].meanKl != rows[b].meanKl) return rows[a].meanKl < rows[b].meanKl;
        return rows[a].top1 > rows[b].top1;
    });
    out.rows.push_back(rows[0]);
    for (size_t i = 0; i < order.size(); ++i) {
        rows[order[i]].rank = static_cast<int>(i) + 1;
        out.rows.push_back(rows[order[i]]);
    }
    for (size_t r = 1; r < rows.size(); ++r)
        if (rows[r].rank == 0) out.rows.push_back(rows[r]);
    const size_t n = rows.size() - 1;
    const std::string reference = out.matched ? "the matched target" : "the median of the runs";
    if (n == 0 || !(out.referenceBytes > 0))
        out.note = "no eviction run held memory to compare";
    else if (out.unequal == 0)
        out.note = std::string(out.matched ? "compared at matched memory" : "compared at equal memory") + ": every run's mean KV held is within " +
                   percent(tolerance) + " of " + reference;
    else
        out.note = std::to_string(out.unequal) + " of " + std::to_string(n) + " runs held more than " + percent(tolerance) +
                   " more or less KV than " + reference + " over the run: " +
                   (out.matched ? "their budgets could not reach the target" : "not a comparison at matched memory");
    return out;
}

}  // namespace kvlens
