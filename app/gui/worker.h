#pragma once
// The one worker thread's object: owns the Model and runs Sessions. Every
// request carries an id and a cancel flag; the controller raises the flag of
// a superseded request, the Session throws Cancelled between tokens, and the
// worker moves on to the newest request. Results leave as immutable Traces.
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "app/gui/metatypes.h"
#include "core/run/session.h"
#include "core/study/what_if.h"

namespace kvlens {
class Model;
}

namespace kvlens::gui {

struct RunRequest {
    quint64 id = 0;
    std::shared_ptr<std::atomic<bool>> cancel;
    QString prompt;
    std::vector<PolicyConfig> policies;
    BudgetSpec budget;
    int decodeSteps = 16;
    bool teacherForced = true;
    QString question;             // empty: none (SessionOptions::question)
    bool questionAware = false;
    QString calibration;          // Q-Filters' calibration text; empty: the prompt
    quint64 memoryBudget = 0;     // SessionOptions::memoryBudget (0: half the physical memory)
    int64_t layer = 0, head = 0;  // the attention map captured
    bool matchMemory = false;     // each policy's budget solved for the memory of `budget` (core/study/match_memory.h)
};

class Worker : public QObject {
    Q_OBJECT
public:
    explicit Worker(QObject* parent = nullptr);
    ~Worker() override;

    // Run on the worker thread (the controller invokes them queued).
    void load(quint64 id, const QString& dir, const RunSettings& settings);
    void run(const RunRequest& request);
    void runNeedle(quint64 id, const eval::NeedleGridOptions& options, std::shared_ptr<std::atomic<bool>> cancel);
    // The request once per (layer, query head), up to `steps` decode steps,
    // each capturing that pair's attention (export every layer × head).
    void runCaptures(quint64 id, const RunRequest& request, int steps, const std::vector<std::pair<int64_t, int64_t>>& pairs);
    // After a cancel by the user: the Session (and its caches) is dropped and
    // the allocator's free memory handed back to the system; the next run
    // starts afresh.
    void releaseSession();
    // The KV-sharing what-if (core/study/what_if.h): the loaded model with its
    // KV heads merged to kvHeads against itself on `prompt`; one line of result.
    void runWhatIf(quint64 id, const QString& prompt, const KvWhatIf& whatIf);

Q_SIGNALS:
    void whatIfDone(quint64 id, const QString& text, bool ok);
    void loadProgress(quint64 id, int percent, const QString& stage);
    // maxPositions: config.json's max_position_embeddings; learnedPositions:
    // the model cannot run past it at all (GPT-2).
    void modelLoaded(quint64 id, const kvlens::ModelSummary& summary,
                     const std::shared_ptr<const kvlens::Tokenizer>& tokenizer, qint64 maxPositions,
                     bool learnedPositions);
    void loadFailed(quint64 id, const QString& message);
    void traceReady(quint64 id, const std::shared_ptr<const kvlens::Trace>& trace);
    // promptMs: until the prompt's trace (every policy read the prompt); totalMs: all steps.
    void runFinished(quint64 id, double promptMs, double totalMs);
    void runFailed(quint64 id, const QString& message);
    // After the prompt's trace: what the run took over from the previous one
    // (Reuse::text(), e.g. "kept 5 runs and 16 steps; 1 shared the full cache's prompt read").
    void runReused(quint64 id, const QString& text);
    // What the memory guard dropped for this run (Session::memoryNote), empty for nothing.
    void runMemoryNote(quint64 id, const QString& text);
    // A run with matchMemory: the target's KV bytes and one line per policy on its budget.
    void runMatched(quint64 id, double targetBytes, const QString& text);
    // While a run reads its prompt (every 100 ms, per run) and after each
    // decode step: how far it is, and one line saying so.
    void runProgress(quint64 id, int percent, const QString& text);
    void needleProgress(quint64 id, qint64 done, qint64 total);
    void needleReady(quint64 id, const std::shared_ptr<const kvlens::eval::NeedleGridResult>& result);
    void needleFailed(quint64 id, const QString& message);  // empty message: cancelled
    void captureReady(quint64 id, qint64 layer, qint64 head, const std::shared_ptr<const kvlens::Trace>& trace);
    void capturesDone(quint64 id, const QString& error);  // empty: every pair was delivered

private:
    SessionOptions optionsFor(const RunRequest& r) const;
    // The options with each policy's budget matched to the memory of r.budget (runMatched says how).
    SessionOptions matchBudgets(const RunRequest& r, SessionOptions options, int steps);
    // The decode steps a request takes: its own, after an agnostic question's.
    static int stepsFor(const RunRequest& r, const SessionOptions& so);

    std::shared_ptr<const Model> m_model;
    std::unique_ptr<Session> m_session;  // the latest run's, taken over by the next
    std::shared_ptr<const Tokenizer> m_tokenizer;
};

}  // namespace kvlens::gui
