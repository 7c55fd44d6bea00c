#include "core/study/needle_grid.h"

#include <algorithm>

#include "core/error.h"
#include "core/policy/policy_info.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens::eval {
namespace {

NeedleProbe probeFor(const NeedleGridOptions& o, const TokenCounter& count, int64_t context, double depth,
                     uint64_t seed) {
    if (o.user) return makeNeedleProbe(*o.user, context, depth, count);
    return makeNeedleProbe(context, depth, seed);
}

std::vector<int64_t> encode(const Tokenizer& tok, const std::string& text, bool special) {
    std::vector<int64_t> ids;
    for (int32_t id : tok.encode(text, special)) ids.push_back(id);
    return ids;
}

// One answer of one run: its generation decoded and scored.
NeedleAnswer score(const Tokenizer& tok, const PolicyTrace& run, const NeedleProbe& probe, uint64_t seed) {
    std::vector<int32_t> ids(run.generated.begin(), run.generated.end());
    NeedleAnswer a;
    a.seed = seed;
    a.answer = tok.decode(ids, /*skipSpecialTokens=*/true);
    a.expected = probe.expected;
    a.exact = exactMatch(a.answer, probe.expected);
    a.overlap = wordOverlap(a.answer, probe.expected);
    return a;
}

void addAnswer(NeedleCell& cell, NeedleAnswer answer) {
    const auto n = static_cast<double>(cell.answers.size());
    cell.exact = (cell.exact * n + (answer.exact ? 1.0 : 0.0)) / (n + 1);
    cell.overlap = (cell.overlap * n + answer.overlap) / (n + 1);
    cell.answers.push_back(std::move(answer));
}

void validate(const NeedleGridOptions& o) {
    if (o.contexts.empty() || o.depths.empty()) throw ArgumentError("the needle grid needs at least one context and one depth");
    if (o.samples < 1) throw ArgumentError("needle samples must be at least 1, got " + std::to_string(o.samples));
    if (o.maxNewTokens < 0) throw ArgumentError("needle max new tokens must not be negative");
    for (double d : o.depths)
        if (!(d >= 0 && d <= 1)) throw ArgumentError("needle depth " + std::to_string(d) + " is outside [0, 1] (0-100%)");
    const bool evicts = std::any_of(o.policies.begin(), o.policies.end(), [](const PolicyConfig& p) { return !isFullCache(p); });
    if (evicts && o.budgets.empty()) throw ArgumentError("give a budget for the needle grid's policies");
}

}  // namespace

double NeedleGridResult::meanExact(const std::string& policy, const std::string& budget, int64_t context) const {
    double sum = 0;
    int64_t n = 0;
    for (const auto& c : cells)
        if (c.policy == policy && c.budget == budget && (context <= 0 || c.context == context)) {
            sum += c.exact;
            ++n;
        }
    return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

NeedleGridResult runNeedleGrid(const std::shared_ptr<const Model>& model, const std::shared_ptr<const Tokenizer>& tokenizer,
                               const NeedleGridOptions& o, const NeedleProgress& progress,
                               const std::atomic<bool>* cancel) {
    validate(o);
    if (!tokenizer) throw ArgumentError("the needle grid needs the model's tokenizer.json");
    std::vector<PolicyConfig> policies;
    for (const auto& p : o.policies)
        if (!isFullCache(p)) policies.push_back(p);
    // Without evicting policies one session with the full cache suffices.
    const std::vector<BudgetSpec> budgets = policies.empty() ? std::vector<BudgetSpec>{BudgetSpec{}} : o.budgets;
    const TokenCounter count = o.user ? tokenizerCounter(*tokenizer) : TokenCounter(countWords);

    NeedleGridResult result;
    result.options = o;
    const int64_t perCell = 1 + static_cast<int64_t>(policies.size() * budgets.size());
    const int64_t total = static_cast<int64_t>(o.contexts.size() * o.depths.size());
    for (int64_t context : o.contexts)
        for (double depth : o.depths) {
            const size_t first = result.cells.size();
            result.cells.push_back({context, depth, fullCachePolicy().id, "-"});
            for (const auto& b : budgets)
                for (const auto& p : policies) result.cells.push_back({context, depth, p.label(), b.text()});
            for (int64_t s = 0; s < o.samples; ++s) {
                const uint64_t seed = o.seed + static_cast<uint64_t>(s);
                const NeedleProbe probe = probeFor(o, count, context, depth, seed);
                SessionOptions so;
                so.prompt = encode(*tokenizer, probe.prompt, true);
                so.policies = policies;
                so.teacherForced = false;
                so.tokenizer = tokenizer;
                const int64_t answerTokens = static_cast<int64_t>(tokenizer->encode(probe.expected, false).size());
                const int64_t steps = o.maxNewTokens > 0 ? o.maxNewTokens : answerTokens + 2;
                for (size_t bi = 0; bi < budgets.size(); ++bi) {
                    so.budget = budgets[bi];
                    Session session(model, so);
                    session.setCancelFlag(cancel);
                    std::shared_ptr<const Trace> trace = session.start();
                    // Each step picks a run's next token from its logits and reads it.
                    for (int64_t k = 0; k < steps; ++k) trace = session.step();
                    size_t cell = first + 1 + bi * policies.size();
                    if (bi == 0) {
                        addAnswer(result.cells[first], score(*tokenizer, trace->policies[0], probe, seed));
                        result.cells[first].promptTokens = static_cast<int64_t>(so.prompt.size());
                    }
                    for (size_t pi = 1; pi < trace->policies.size(); ++pi, ++cell) {
                        addAnswer(result.cells[cell], score(*tokenizer, trace->policies[pi], probe, seed));
                        result.cells[cell].promptTokens = static_cast<int64_t>(so.prompt.size());
                    }
                }
            }
            if (progress) progress(static_cast<int64_t>(first / static_cast<size_t>(perCell)) + 1, total);
        }
    return result;
}

}  // namespace kvlens::eval
