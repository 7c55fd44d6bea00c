#include "app/gui/controller.h"

#include <algorithm>

#include "core/run/context_limit.h"

namespace kvlens::gui {

Controller::Controller(QObject* parent) : QObject(parent), m_worker(new Worker) {
    registerMetaTypes();
    m_thread.setObjectName(QStringLiteral("kvlens-worker"));
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(m_worker, &Worker::traceReady, this, &Controller::acceptTrace);
    connect(m_worker, &Worker::runFinished, this, &Controller::acceptFinished);
    connect(m_worker, &Worker::runReused, this, [this](quint64 id, const QString& text) {
        if (id == m_currentRun) m_reuse = text;
    });
    connect(m_worker, &Worker::runMatched, this, [this](quint64 id, double targetBytes, const QString& text) {
        if (id != m_currentRun) return;
        m_matchTarget = targetBytes;
        Q_EMIT memoryMatched(targetBytes, text);
    });
    connect(m_worker, &Worker::runMemoryNote, this, [this](quint64 id, const QString& text) {
        if (id == m_currentRun) Q_EMIT memoryNoted(text);
    });
    connect(m_worker, &Worker::runFailed, this, &Controller::acceptFailure);
    connect(m_worker, &Worker::runProgress, this, [this](quint64 id, int percent, const QString& text) {
        if (id == m_currentRun && m_busy) Q_EMIT runProgress(percent, text);
    });
    connect(m_worker, &Worker::loadProgress, this, [this](quint64 id, int percent, const QString& stage) {
        if (id == m_currentLoad) Q_EMIT modelLoading(percent, stage);
    });
    connect(m_worker, &Worker::modelLoaded, this,
            [this](quint64 id, const ModelSummary& s, const std::shared_ptr<const Tokenizer>& tok, qint64 maxPositions,
                   bool learnedPositions) {
                if (id != m_currentLoad) return;
                m_model = s;
                m_tokenizer = tok;
                m_maxPositions = maxPositions;
                m_learnedPositions = learnedPositions;
                m_promptTokens = -1;  // another tokenizer
                m_modelReady = true;
                m_layer = std::min<int64_t>(m_layer, s.layers - 1);
                m_head = std::min<int64_t>(m_head, s.heads - 1);
                Q_EMIT modelLoaded(s);
                issue();
            });
    connect(m_worker, &Worker::loadFailed, this, [this](quint64 id, const QString& message) {
        if (id != m_currentLoad) return;
        m_modelReady = m_tokenizer != nullptr;  // the worker keeps the previous model
        setBusy(false);
        Q_EMIT modelFailed(message);
    });
    connect(m_worker, &Worker::needleProgress, this, [this](quint64 id, qint64 done, qint64 total) {
        if (id == m_currentNeedle) Q_EMIT needleProgress(done, total);
    });
    connect(m_worker, &Worker::needleReady, this,
            [this](quint64 id, const std::shared_ptr<const eval::NeedleGridResult>& result) {
                if (id != m_currentNeedle) return;
                m_needleCancel.reset();
                Q_EMIT needleReady(result);
            });
    connect(m_worker, &Worker::needleFailed, this, [this](quint64 id, const QString& message) {
        if (id != m_currentNeedle) return;
        m_needleCancel.reset();
        Q_EMIT needleFailed(message);
    });
    connect(m_worker, &Worker::whatIfDone, this, [this](quint64 id, const QString& text, bool ok) {
        if (id == m_currentWhatIf) Q_EMIT whatIfDone(text, ok);
    });
    connect(m_worker, &Worker::captureReady, this, &Controller::captureReady);
    connect(m_worker, &Worker::capturesDone, this, &Controller::capturesDone);
    m_debounce.setSingleShot(true);
    connect(&m_debounce, &QTimer::timeout, this, &Controller::issue);
    m_thread.start();
}

Controller::~Controller() {
    supersede();
    cancelNeedle();
    m_thread.quit();
    m_thread.wait();
}

void Controller::supersede() {
    if (m_cancel) m_cancel->store(true);
}

void Controller::loadModel(const QString& dir, const RunSettings& settings) {
    supersede();
    cancelNeedle();
    m_debounce.stop();
    m_modelReady = false;
    m_currentLoad = ++m_nextId;
    m_currentRun = 0;  // results of runs on the old model are stale now
    setBusy(true);
    const quint64 id = m_currentLoad;
    Worker* w = m_worker;
    QMetaObject::invokeMethod(m_worker, [w, id, dir, settings] { w->load(id, dir, settings); }, Qt::QueuedConnection);
}

void Controller::setPrompt(const QString& text) {
    if (text == m_prompt) return;
    m_prompt = text;
    schedule(kPromptDebounceMs);
}

void Controller::setPolicies(const std::vector<PolicyConfig>& policies) {
    m_policies = policies;
    schedule(kEditDebounceMs);
}

void Controller::setBudget(const BudgetSpec& budget) {
    m_budget = budget;
    schedule(kEditDebounceMs);
}

void Controller::setSelection(int64_t layer, int64_t head) {
    if (layer == m_layer && head == m_head) return;
    m_layer = layer;
    m_head = head;
    schedule(kEditDebounceMs);  // the attention map of the new head needs a run
}

void Controller::setDecodeSteps(int steps) {
    m_decodeSteps = std::max(0, steps);
    schedule(kEditDebounceMs);
}

void Controller::setQuestion(const QString& text, bool aware) {
    if (text == m_question && aware == m_questionAware) return;
    m_question = text;
    m_questionAware = aware;
    schedule(kPromptDebounceMs);
}

void Controller::setCalibration(const QString& text) {
    if (text == m_calibration) return;
    m_calibration = text;
    schedule(kEditDebounceMs);
}

void Controller::setMemoryBudget(quint64 bytes) {
    if (bytes == m_memoryBudget) return;
    m_memoryBudget = bytes;
    schedule(kEditDebounceMs);
}

void Controller::setMatchMemory(bool on) {
    if (m_matchMemory == on) return;
    m_matchMemory = on;
    schedule(kEditDebounceMs);
}

void Controller::setTeacherForced(bool teacherForced) {
    m_teacherForced = teacherForced;
    schedule(kEditDebounceMs);
}

void Controller::schedule(int delayMs) {
    // A pending prompt debounce is not cut short by a quicker edit; the
    // newest state is read when the timer fires either way.
    if (m_debounce.isActive() && m_debounce.remainingTime() > delayMs && delayMs < kPromptDebounceMs) return;
    m_debounce.start(delayMs);
}

void Controller::runNow() {
    m_debounce.stop();
    m_longAnswer.reset();  // an explicit run asks again
    issue();
}

// Past the model's context a run is announced (contextChecked); past
// kHardContextFactor × it, it runs only if the user says so, asked once per
// prompt text. A refused run stops the one in progress and says why.
bool Controller::contextAllows() {
    if (m_countedPrompt != m_prompt || m_promptTokens < 0) {
        m_promptTokens = static_cast<int64_t>(m_tokenizer->encode(m_prompt.toStdString(), true).size());
        m_countedPrompt = m_prompt;
    }
    Q_EMIT promptCounted(static_cast<int>(m_promptTokens));
    const int64_t tokens = m_promptTokens + m_decodeSteps;
    const bool allowed = m_longAnswer && m_longAnswer->prompt == m_prompt && m_longAnswer->run;
    ContextCheck check = checkContextLength(tokens, m_maxPositions, m_learnedPositions, allowed);
    const bool mayInsist = checkContextLength(tokens, m_maxPositions, m_learnedPositions, true).level != ContextCheck::Level::Refuse;
    if (check.level == ContextCheck::Level::Refuse && mayInsist && !(m_longAnswer && m_longAnswer->prompt == m_prompt)) {
        m_askingLong = true;
        const bool run = m_longContext && m_longContext(QString::fromStdString(check.message));
        m_askingLong = false;
        m_longAnswer = LongAnswer{m_prompt, run};
        if (run) check = checkContextLength(tokens, m_maxPositions, m_learnedPositions, true);
    }
    const QString message = QString::fromStdString(check.message);
    Q_EMIT contextChecked(check.level == ContextCheck::Level::Warn ? message : QString());
    if (check.level != ContextCheck::Level::Refuse) return true;
    supersede();
    m_currentRun = 0;  // what the stopped run still delivers is dropped
    setBusy(false);
    Q_EMIT runFailed(message);
    return false;
}

void Controller::issue() {
    if (!m_modelReady || m_askingLong) return;  // the run follows the load (or the answer)
    if (!contextAllows()) return;
    supersede();
    RunRequest r = currentRequest();
    r.id = ++m_nextId;
    r.cancel = std::make_shared<std::atomic<bool>>(false);
    m_cancel = r.cancel;
    m_currentRun = r.id;
    m_last = r;
    m_freshRun = true;
    m_matchTarget = std::nan("");  // until the worker says what it matched
    m_reuse.clear();
    setBusy(true);
    Worker* w = m_worker;
    QMetaObject::invokeMethod(m_worker, [w, r] { w->run(r); }, Qt::QueuedConnection);
    Q_EMIT runIssued(r.id);
}

RunRequest Controller::currentRequest() const {
    RunRequest r;
    r.prompt = m_prompt;
    r.policies = m_policies;
    r.budget = m_budget;
    r.decodeSteps = m_decodeSteps;
    r.teacherForced = m_teacherForced;
    r.question = m_question;
    r.questionAware = m_questionAware;
    r.calibration = m_calibration;
    r.memoryBudget = m_memoryBudget;
    r.layer = m_layer;
    r.head = m_head;
    r.matchMemory = m_matchMemory;
    return r;
}

quint64 Controller::runCaptures(const std::vector<std::pair<int64_t, int64_t>>& pairs, int steps) {
    const quint64 id = ++m_nextId;
    RunRequest r = currentRequest();
    r.id = id;
    Worker* w = m_worker;
    QMetaObject::invokeMethod(m_worker, [w, id, r, steps, pairs] { w->runCaptures(id, r, steps, pairs); },
                              Qt::QueuedConnection);
    return id;
}

void Controller::runNeedle(eval::NeedleGridOptions options) {
    if (!m_modelReady) {
        Q_EMIT needleFailed(tr("no model is loaded"));
        return;
    }
    if (m_needleCancel) m_needleCancel->store(true);
    options.policies = m_policies;
    m_needleCancel = std::make_shared<std::atomic<bool>>(false);
    m_currentNeedle = ++m_nextId;
    const quint64 id = m_currentNeedle;
    auto cancel = m_needleCancel;
    Worker* w = m_worker;
    QMetaObject::invokeMethod(m_worker, [w, id, options, cancel] { w->runNeedle(id, options, cancel); },
                              Qt::QueuedConnection);
}

void Controller::runWhatIf(int kind, int value) {
    if (!m_modelReady) {
        Q_EMIT whatIfDone(tr("no model is loaded"), false);
        return;
    }
    m_currentWhatIf = ++m_nextId;
    const quint64 id = m_currentWhatIf;
    const QString prompt = currentRequest().prompt;
    Worker* w = m_worker;
    KvWhatIf whatIf;
    whatIf.kind = kind == 1 ? KvWhatIf::Kind::ShareLayers : KvWhatIf::Kind::MergeHeads;
    whatIf.value = value;
    QMetaObject::invokeMethod(m_worker, [w, id, prompt, whatIf] { w->runWhatIf(id, prompt, whatIf); },
                              Qt::QueuedConnection);
}

void Controller::cancelRun() {
    if (!m_busy || m_currentRun == 0) return;
    supersede();
    m_debounce.stop();
    m_currentRun = 0;  // whatever the run still delivers is dropped
    setBusy(false);
    // Queued: runs once the cancelled run has returned on the worker thread.
    Worker* w = m_worker;
    QMetaObject::invokeMethod(m_worker, [w] { w->releaseSession(); }, Qt::QueuedConnection);
    Q_EMIT runCancelled();
}

void Controller::cancelNeedle() {
    if (m_needleCancel) m_needleCancel->store(true);
}

void Controller::acceptTrace(quint64 id, const std::shared_ptr<const Trace>& trace) {
    if (id != m_currentRun || !trace) {
        ++m_dropped;  // a superseded request finished a step before it saw its flag
        return;
    }
    // The previous run's traces stay on screen until the new run has one.
    if (m_freshRun) m_history.clear();
    m_freshRun = false;
    m_history.push_back(trace);
    Q_EMIT historyChanged(static_cast<int>(m_history.size()));
    showCurrent();
}

void Controller::acceptFinished(quint64 id, double promptMs, double totalMs) {
    if (id != m_currentRun) return;
    setBusy(false);
    Q_EMIT runFinished(id, promptMs, totalMs);
}

void Controller::acceptFailure(quint64 id, const QString& message) {
    if (id != m_currentRun) return;
    setBusy(false);
    Q_EMIT runFailed(message);
}

void Controller::setBusy(bool busy) {
    if (busy == m_busy) return;
    m_busy = busy;
    Q_EMIT busyChanged(busy);
}

int Controller::shownStep() const {
    if (m_history.empty()) return 0;
    const int last = static_cast<int>(m_history.size()) - 1;
    return m_wantedStep < 0 ? last : std::min(m_wantedStep, last);
}

std::shared_ptr<const Trace> Controller::shownTrace() const {
    return m_history.empty() ? nullptr : m_history[static_cast<size_t>(shownStep())];
}

void Controller::setShownStep(int step) {
    const int last = static_cast<int>(m_history.size()) - 1;
    // Scrubbing to the newest step of a run still in progress follows it.
    m_wantedStep = (step >= last && m_busy) ? -1 : std::max(0, step);
    showCurrent();
}

void Controller::showCurrent() {
    if (!m_history.empty()) Q_EMIT traceShown(shownTrace(), shownStep());
}

}  // namespace kvlens::gui
