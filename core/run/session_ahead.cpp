// The Session's steps read ahead: teacher-forced tokens known before their steps.
#include "core/run/session_impl.h"

#include <c10/core/InferenceMode.h>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/memory_guard.h"
#include "core/run/prompt_scores.h"

namespace kvlens {

bool Session::Impl::runFullAhead(int64_t s, bool followed) {
    if (!followed || !opt.teacherForced || opt.plannedSteps <= 0 || !computed(0, s + 1) || runs[0]->hasStepsAhead())
        return false;
    const int64_t k = std::min(kAhead, opt.plannedSteps - s);
    if (k < 2) return false;
    fullAhead.resize(static_cast<size_t>(s + k), -1);
    fullAheadSampler.resize(static_cast<size_t>(s + k), samplers[0]);
    runs[0]->beginRunningAhead();
    for (int64_t j = 0; j < k; ++j) {
        const int64_t forced = forcedToken(s + j);
        const int64_t t = forced >= 0 ? forced : samplers[0].next(runs[0]->logits());
        if (t < 0 || t >= model->config().vocabSize)
            throw ArgumentError("continuation token id " + std::to_string(t) + " is outside the vocabulary");
        runs[0]->readTokenAhead(t);
        fullAhead[static_cast<size_t>(s + j)] = t;
        fullAheadSampler[static_cast<size_t>(s + j)] = samplers[0];
    }
    runs[0]->endRunningAhead();
    return true;
}

std::vector<size_t> Session::Impl::policyRunsAt(int64_t s) const {
    std::vector<size_t> out;
    for (size_t r = 1; r < runs.size(); ++r)
        if (failure[r].empty() && computed(r, s + 1)) out.push_back(r);
    return out;
}

bool Session::Impl::anyReadsAhead(const std::vector<size_t>& candidates) const {
    return std::any_of(candidates.begin(), candidates.end(), [&](size_t r) { return runs[r]->readsAhead(); });
}

std::vector<int64_t> Session::Impl::knownTokens(int64_t s) const {
    const int64_t V = model->config().vocabSize;
    std::vector<int64_t> known;
    if (!opt.teacherForced) return known;
    for (int64_t step = s; step < s + kAhead && (opt.plannedSteps <= 0 || step < opt.plannedSteps); ++step) {
        // The token read at `step` sits at this position of the sequence.
        const auto at = static_cast<size_t>(static_cast<int64_t>(opt.prompt.size()) + step);
        const int64_t forced = forcedToken(step);
        const int64_t t = !computed(0, step + 1) ? (at < previousTokens.size() ? previousTokens[at] : -1)  // caught up on
                          : forced >= 0 ? forced
                          : step < static_cast<int64_t>(fullAhead.size()) ? fullAhead[static_cast<size_t>(step)]
                                                                          : -1;
        if (t < 0 || t >= V) break;
        known.push_back(t);
    }
    return known;
}

void Session::Impl::readAhead(int64_t s, const std::vector<size_t>& candidates) {
    std::vector<size_t> which;
    for (size_t r : candidates)
        if (runs[r]->readsAhead()) which.push_back(r);
    if (which.empty()) return;
    const std::vector<int64_t> known = knownTokens(s);
    if (known.size() < 2) return;  // one step: the lockstep forward reads it
    std::vector<Model::Segment> segments;
    for (size_t r : which) segments.push_back(runs[r]->beginTokensAhead(known));
    std::vector<ForwardResult> results = model->forward(segments);
    for (size_t i = 0; i < which.size(); ++i) runs[which[i]]->endTokensAhead(std::move(results[i]));
}

}  // namespace kvlens
