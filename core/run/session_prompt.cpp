// The Session's prompt read: shared with the full cache, batched, or token by token.
#include "core/run/session_impl.h"

#include <c10/core/InferenceMode.h>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/memory_guard.h"
#include "core/run/prompt_scores.h"

namespace kvlens {

void Session::Impl::readPrompt() {
    // One shared prefill: the full cache reads the prompt and every run that
    // reads it with full attention follows that forward
    // (PolicyRun::sharesPrefill); the others read it their own way
    // alongside. Taking over from a previous Session, the followers first
    // replay the record of the prefix the full cache kept, or all of it when
    // the full cache reads nothing.
    const bool fullReads = takenFrom[0] < 0;
    std::vector<PolicyRun*> followers;
    std::vector<size_t> readers, following;
    for (size_t r = 1; r < runs.size(); ++r) {
        if (takenFrom[r] >= 0) continue;
        if (runs[r]->sharesPrefill()) {
            followers.push_back(runs[r].get());
            following.push_back(r);
        } else {
            readers.push_back(r);
        }
    }
    if (!record) {
        // From the start: the record is kept for a later Session while it
        // stays under its cap (and only when one may take over).
        const ModelConfig& c = model->config();
        const double perToken = double(c.numLayers) * double(c.numHeads + 2 * c.numKvHeads) * double(c.headDim) *
                                double(at::elementSize(model->dtype()));
        record = std::make_shared<PromptRecord>();
        record->complete = opt.refreshable && perToken * double(opt.prompt.size()) <= double(kRecordBytes);
    }
    // The runs reading token by token read together: one batched forward per
    // token for all of them (the weights read once), as a decode step. That
    // job first (the longest), then the full cache (or the replay), then the
    // batched reads.
    // A reader sees its untouched prefix with full attention, as the full
    // cache did: with the record of it at hand (a Session taking over), it
    // replays that instead of reading it again (all but the last prompt
    // token, which gives its logits). A budget edit of StreamingLLM then
    // reads 75 % of the prompt at a 25 % budget.
    const int64_t T = static_cast<int64_t>(opt.prompt.size());
    const int64_t recorded = record->complete ? record->length() : 0;
    std::vector<PromptRecord> prefixes(runs.size());
    for (size_t r : readers) {
        const int64_t n = std::min({recorded, runs[r]->untouchedPrefix(), T - 1});
        if (n > 0 && !runs[r]->cache().rerotate()) {
            prefixes[r] = record->prefix(n);
            ++reused.runsReadPast;
        }
    }
    auto replayPrefix = [&](size_t r) {
        if (prefixes[r].length() > 0) PolicyRun::replayRecord(*model, prefixes[r], {runs[r].get()});
    };
    std::vector<size_t> online;
    for (size_t r : readers)
        if (runs[r]->readsPromptTokenByToken()) online.push_back(r);
    std::vector<size_t> order;
    if (!online.empty()) order.push_back(runs.size());  // stands for the online runs
    order.push_back(0);
    for (size_t r : readers)
        if (!runs[r]->readsPromptTokenByToken()) order.push_back(r);
    bool finished = false;  // the followers compressed (in the replay's job)
    runInRuns(order, [&](size_t r, const std::function<void()>& check) {
        if (r == runs.size()) {
            readOnline(online, prefixes, check);
            return;
        }
        if (r != 0) {
            replayPrefix(r);
            runs[r]->readPrompt(opt.prompt, check);
            return;
        }
        if (fullReads && runs[0]->cache().seqLen() == 0) {
            runs[0]->readPromptShared(opt.prompt, followers, record->complete ? record.get() : nullptr, check);
            return;
        }
        PolicyRun::replayRecord(*model, *record, followers);
        if (fullReads) {
            runs[0]->readPromptShared(opt.prompt, followers, record.get(), check);
            // Steps planned: the followers compress, the full cache takes
            // its steps ahead and they read them ahead, while the runs
            // reading the prompt themselves still read it.
            // Nothing to overlap (no run reads the prompt itself): step()
            // does it, after the prompt's Trace is out.
            if (!opt.teacherForced || opt.plannedSteps < 2 || order.size() < 2) return;
            const at::Tensor promptLogits = runs[0]->logits();
            for (size_t f : following) runs[f]->finishSharedPrompt(promptLogits);
            finished = true;
            if (runFullAhead(0, anyReadsAhead(following))) readAhead(0, following);
            return;
        }
        // The full cache kept (an edit of policies or budgets): the
        // followers compress now and read the steps they catch up on ahead,
        // while the runs reading the prompt themselves still read it.
        for (size_t f : following) runs[f]->finishSharedPrompt(record->logits);
        finished = true;
        readAhead(0, following);
    });
    if (!record->complete) record->chunks.clear();
    const at::Tensor logits = fullReads ? runs[0]->logits() : record->logits;
    if (!finished) runInRuns(following, [&](size_t r, const std::function<void()>&) { runs[r]->finishSharedPrompt(logits); });
    reused.runsShared = static_cast<int>(followers.size());
    reused.runsRead = static_cast<int>(readers.size()) + (fullReads ? 1 : 0);
}

void Session::Impl::readOnline(const std::vector<size_t>& online, const std::vector<PromptRecord>& prefixes,
                               const std::function<void()>& check) {
    const int64_t T = static_cast<int64_t>(opt.prompt.size());
    std::vector<int64_t> next(online.size());
    int64_t from = T;
    for (size_t i = 0; i < online.size(); ++i) {
        const PromptRecord& prefix = prefixes[online[i]];
        if (prefix.length() > 0) PolicyRun::replayRecord(*model, prefix, {runs[online[i]].get()});
        next[i] = runs[online[i]]->beginOnlinePrompt(opt.prompt, check);
        from = std::min(from, next[i]);
    }
    for (int64_t t = from; t < T; ++t) {
        check();
        std::vector<Model::Segment> segments;
        std::vector<size_t> reading;
        for (size_t i = 0; i < online.size(); ++i)
            if (next[i] <= t) {  // past its batched prefix
                segments.push_back(runs[online[i]]->beginPromptToken(opt.prompt[static_cast<size_t>(t)]));
                reading.push_back(i);
            }
        std::vector<ForwardResult> results = model->forward(segments);
        for (size_t j = 0; j < reading.size(); ++j) runs[online[reading[j]]]->endPromptToken(std::move(results[j]));
    }
    for (size_t r : online) runs[r]->endPrompt();
}

}  // namespace kvlens
