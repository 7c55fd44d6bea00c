#pragma once
// The GUI's controller: the state the user edits (prompt, policies, budget,
// selected layer/head, decode steps), the one worker thread, and the traces
// of the current run. A newer request supersedes an older one (its cancel
// flag is raised at once); results of any request but the newest are
// dropped here, on the GUI thread, by id.
#include <QObject>
#include <QThread>
#include <QTimer>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "app/gui/worker.h"

namespace kvlens::gui {

class Controller : public QObject {
    Q_OBJECT
public:
    static constexpr int kPromptDebounceMs = 300;
    static constexpr int kEditDebounceMs = 20;  // coalesces a burst of edits (e.g. undo of several)
    // Asked before a run past kHardContextFactor × the model's context
    // (core/run/context_limit.h): true runs it. Unset: such a run is refused.
    using LongContextDecider = std::function<bool(const QString& message)>;

    explicit Controller(QObject* parent = nullptr);
    ~Controller() override;  // stops and joins the worker thread

    void loadModel(const QString& dir, const RunSettings& settings);
    void setPrompt(const QString& text);  // debounced
    void setPolicies(const std::vector<PolicyConfig>& policies);
    void setBudget(const BudgetSpec& budget);
    void setSelection(int64_t layer, int64_t head);
    void setDecodeSteps(int steps);
    void setTeacherForced(bool teacherForced);
    // Each policy's budget solved so that it holds the memory of the budget over the run.
    void setMatchMemory(bool on);
    bool matchMemory() const { return m_matchMemory; }
    // The shown run's matched memory target in KV bytes, NaN when its budgets were not matched.
    double matchTarget() const { return m_matchTarget; }
    // A question about the prompt (SessionOptions::question), debounced;
    // aware: it ends the prompt and is the window policies' observation window.
    void setQuestion(const QString& text, bool aware);
    // Q-Filters' calibration text (SessionOptions::calibration); empty: the prompt.
    void setCalibration(const QString& text);
    const QString& calibration() const { return m_calibration; }
    // The prompt's tokens as last counted (BOS included), -1 before the first count.
    int64_t promptTokens() const { return m_promptTokens; }
    // The memory a run may plan for, in bytes; 0: half the physical memory
    // (SessionOptions::memoryBudget). A change runs again.
    void setMemoryBudget(quint64 bytes);
    void setShownStep(int step);  // the decode step the views show
    void runNow();                // issue the request at once (skips the debounce; asks again about a long prompt)
    void setLongContextDecider(LongContextDecider d) { m_longContext = std::move(d); }
    int64_t maxPositions() const { return m_maxPositions; }
    // A needle grid with the current policies. It holds the worker until it
    // is done: runs requested meanwhile wait (the views keep their traces);
    // only cancelNeedle(), a newer grid or a model load stop it.
    void runNeedle(eval::NeedleGridOptions options);
    // A KV-sharing what-if on the current prompt (core/study/what_if.h; kind
    // as ui::MemoryView::WhatIfKind): whatIfDone when it is computed.
    void runWhatIf(int kind, int value);
    void cancelNeedle();
    // Stops the current run (the Cancel button): the views keep what they show.
    void cancelRun();
    // The current state once per (layer, query head) up to `steps` decode
    // steps (export every layer × head); results come as captureReady and
    // capturesDone with the returned id. Runs queued meanwhile wait.
    quint64 runCaptures(const std::vector<std::pair<int64_t, int64_t>>& pairs, int steps);
    bool needleRunning() const { return m_needleCancel != nullptr; }

    bool modelReady() const { return m_modelReady; }
    const ModelSummary& model() const { return m_model; }
    std::shared_ptr<const Tokenizer> tokenizer() const { return m_tokenizer; }
    const std::vector<std::shared_ptr<const Trace>>& history() const { return m_history; }
    std::shared_ptr<const Trace> shownTrace() const;
    int shownStep() const;
    const RunRequest& lastRequest() const { return m_last; }
    quint64 currentRunId() const { return m_currentRun; }
    // What the current run took over from the one before (Reuse::text()), empty until its prompt is read.
    const QString& reuse() const { return m_reuse; }
    int droppedResults() const { return m_dropped; }
    bool busy() const { return m_busy; }
    int64_t layer() const { return m_layer; }
    int64_t head() const { return m_head; }

public Q_SLOTS:
    // What the worker delivers (queued). Public so tests can deliver results too.
    void acceptTrace(quint64 id, const std::shared_ptr<const kvlens::Trace>& trace);
    void acceptFinished(quint64 id, double promptMs, double totalMs);
    void acceptFailure(quint64 id, const QString& message);

Q_SIGNALS:
    void modelLoading(int percent, const QString& stage);
    void modelLoaded(const kvlens::ModelSummary& summary);
    void modelFailed(const QString& message);
    void runIssued(quint64 id);
    void traceShown(const std::shared_ptr<const kvlens::Trace>& trace, int step);
    void historyChanged(int steps);
    void runFinished(quint64 id, double promptMs, double totalMs);
    void runFailed(const QString& message);
    // A run's budgets were matched (Worker::runMatched): the target and how each policy met it.
    void memoryMatched(double targetBytes, const QString& text);
    // Before each run: why its length is past the model's context (a
    // warning: it runs), or empty when it is within it.
    void contextChecked(const QString& warning);
    // What the memory guard dropped for the current run (empty: nothing).
    void memoryNoted(const QString& note);
    // Before each run: the prompt's length in tokens (BOS included).
    void promptCounted(int tokens);
    void busyChanged(bool busy);
    // The current run's progress (Worker::runProgress).
    void runProgress(int percent, const QString& text);
    // cancelRun() stopped the current run (and freed what it held); the
    // views keep the last results.
    void runCancelled();
    void needleProgress(qint64 done, qint64 total);
    void needleReady(const std::shared_ptr<const kvlens::eval::NeedleGridResult>& result);
    void needleFailed(const QString& message);  // empty: cancelled
    void whatIfDone(const QString& text, bool ok);
    void captureReady(quint64 id, qint64 layer, qint64 head, const std::shared_ptr<const kvlens::Trace>& trace);
    void capturesDone(quint64 id, const QString& error);

private:
    RunRequest currentRequest() const;
    void schedule(int delayMs);
    void issue();
    void supersede();
    void setBusy(bool busy);
    void showCurrent();
    bool contextAllows();

    QThread m_thread;
    Worker* m_worker;
    QTimer m_debounce;
    quint64 m_nextId = 0, m_currentRun = 0, m_currentLoad = 0;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    std::shared_ptr<std::atomic<bool>> m_needleCancel;
    quint64 m_currentNeedle = 0;
    quint64 m_currentWhatIf = 0;
    bool m_modelReady = false, m_busy = false, m_freshRun = false;
    ModelSummary m_model;
    std::shared_ptr<const Tokenizer> m_tokenizer;
    int64_t m_maxPositions = 0;
    bool m_learnedPositions = false;
    LongContextDecider m_longContext;
    bool m_askingLong = false;
    QString m_countedPrompt;     // the prompt whose token count m_promptTokens is (-1: none yet)
    int64_t m_promptTokens = -1;
    struct LongAnswer {
        QString prompt;          // the prompt the user was asked about
        bool run = false;
    };
    std::optional<LongAnswer> m_longAnswer;

    QString m_prompt;
    std::vector<PolicyConfig> m_policies;
    BudgetSpec m_budget;
    int m_decodeSteps = 16;
    bool m_teacherForced = true;
    QString m_question;
    QString m_calibration;
    quint64 m_memoryBudget = 0;
    bool m_questionAware = false;
    int64_t m_layer = 0, m_head = 0;
    RunRequest m_last;

    std::vector<std::shared_ptr<const Trace>> m_history;
    QString m_reuse;
    bool m_matchMemory = false;
    double m_matchTarget = std::nan("");
    int m_wantedStep = -1;  // -1: follow the newest step
    int m_dropped = 0;
};

}  // namespace kvlens::gui
