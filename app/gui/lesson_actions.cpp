#include "app/gui/lesson_actions.h"

#include <QAction>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QMessageBox>
#include <QTimer>
#include <algorithm>
#include <cmath>

#include "app/gui/file_actions.h"
#include "app/gui/main_window.h"
#include "core/error.h"
#include "core/paths.h"
#include "core/policy/policy_info.h"
#include "core/run/trace.h"
#include "widgets/comparison_view.h"
#include "widgets/lesson_panel.h"

namespace kvlens::gui {

LessonActions::LessonActions(MainWindow* window, ui::LessonPanel* panel, QDockWidget* dock)
    : QObject(window), m_window(window), m_panel(panel), m_dock(dock) {
    connect(m_panel, &ui::LessonPanel::stepRequested, this, [this](int i) {
        const QString error = goTo(i);
        if (!error.isEmpty()) QMessageBox::warning(m_window, tr("Lesson"), error);
    });
    connect(m_panel, &ui::LessonPanel::revealRequested, this, &LessonActions::reveal);
    connect(m_panel, &ui::LessonPanel::presenterToggled, m_window, &MainWindow::setPresenter);
    connect(m_panel, &ui::LessonPanel::closeRequested, this, &LessonActions::closeLesson);
    // A Pick question is answered in the strips too: a click there picks or
    // drops the token, and the picks are ringed as they are made.
    connect(m_window->comparison(), &ui::ComparisonView::tokenClicked, this,
            [this](int index) { m_panel->togglePick(index); });
    connect(m_panel, &ui::LessonPanel::picksChanged, this, [this] {
        if (auto t = m_window->controller()->shownTrace()) traceShown(t);
    });
    connect(m_window->controller(), &Controller::traceShown, this,
            [this](const std::shared_ptr<const Trace>& t, int) { traceShown(t); });
    connect(m_window->controller(), &Controller::runFinished, this, [this] {
        // After the window has put the step it shows in place.
        QTimer::singleShot(0, this, &LessonActions::runFinished);
    });
}

QStringList LessonActions::shippedLessons() {
    QStringList out;
    try {
        const QDir dir(QString::fromStdString(findResource("lessons").string()));
        for (const QFileInfo& f : dir.entryInfoList({QStringLiteral("*.kvlens-lesson.json")}, QDir::Files, QDir::Name))
            out << f.absoluteFilePath();
    } catch (const Error&) {
    }
    return out;
}

void LessonActions::addMenu(QMenu* menu) {
    for (const QString& file : shippedLessons()) {
        QString title = QFileInfo(file).fileName();
        try {
            title = QString::fromStdString(loadLesson(file.toStdString()).title);
        } catch (const Error&) {
        }
        QAction* a = menu->addAction(title);
        a->setStatusTip(file);
        connect(a, &QAction::triggered, this, [this, file] {
            const QString error = openLesson(file);
            if (!error.isEmpty()) QMessageBox::warning(m_window, tr("Open lesson"), error);
        });
    }
    if (menu->isEmpty()) menu->addAction(tr("(no lessons found)"))->setEnabled(false);
    menu->addSeparator();
    auto add = [&](const QString& text, const QKeySequence& key, auto slot) {
        QAction* a = menu->addAction(text);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    add(tr("Open lesson &file…"), QKeySequence(), [this] {
        const QString f = QFileDialog::getOpenFileName(m_window, tr("Open lesson"), QString(),
                                                       tr("KVLens lessons (*.kvlens-lesson.json *.json)"));
        if (f.isEmpty()) return;
        const QString error = openLesson(f);
        if (!error.isEmpty()) QMessageBox::warning(m_window, tr("Open lesson"), error);
    });
    menu->addSeparator();
    add(tr("&Previous step"), QKeySequence(QStringLiteral("Alt+Left")), [this] { m_panel->stepRequested(step() - 1); });
    add(tr("&Next step"), QKeySequence(QStringLiteral("Alt+Right")), [this] { m_panel->stepRequested(step() + 1); });
    add(tr("&Reveal"), QKeySequence(QStringLiteral("Ctrl+Return")), [this] {
        if (!m_panel->revealed()) m_panel->reveal();
    });
    add(tr("&Close lesson"), QKeySequence(), [this] { closeLesson(); })->setObjectName(QStringLiteral("closeLesson"));
    QAction* presenter = add(tr("Presenter &mode"), QKeySequence(QStringLiteral("Ctrl+Shift+P")),
                             [this](bool on) { m_window->setPresenter(on); });
    presenter->setObjectName(QStringLiteral("presenterMode"));
    presenter->setCheckable(true);
    connect(m_window, &MainWindow::presenterChanged, this, [this, presenter](bool on) {
        presenter->setChecked(on);
        m_panel->setPresenter(on);
        // Presenter mode hides panels; the step's own stay.
        if (const LessonStep* s = m_panel->currentStep()) showPanels(s->panels);
    });
}

bool LessonActions::hasLesson() const { return m_panel->hasLesson(); }
int LessonActions::step() const { return m_panel->step(); }

QString LessonActions::openLesson(const QString& file) {
    Lesson lesson;
    try {
        lesson = loadLesson(file.toStdString());
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
    if (!m_window->files()->maybeSave()) return tr("Not opened: the session's unsaved changes stay in the window");
    const QString error = m_window->applySession(lesson.steps.front().state);
    if (!error.isEmpty()) {
        QString why = tr("%1: %2").arg(QFileInfo(file).fileName(), error);
        if (!lesson.needs.empty()) why += QStringLiteral("\n\n") + QString::fromStdString(lesson.needs);
        return why;
    }
    if (!hasLesson()) m_layout = m_window->saveState();  // a second lesson goes back to the same layout
    m_file = file;
    m_applied = sessionToJson(lesson.steps.front().state).dump();
    m_panel->setLesson(lesson);
    m_dock->show();
    m_dock->raise();
    // The lesson's text and question take the larger part of the right-hand column.
    m_window->resizeDocks({m_dock}, {m_window->height() * 11 / 20}, Qt::Vertical);
    m_window->resizeDocks({m_dock}, {std::max(420, m_window->width() * 3 / 10)}, Qt::Horizontal);
    return goTo(0);
}

QString LessonActions::goTo(int index) {
    if (!hasLesson()) return tr("No lesson is open");
    const auto& steps = m_panel->lesson().steps;
    index = std::clamp(index, 0, static_cast<int>(steps.size()) - 1);
    const LessonStep& s = steps[static_cast<size_t>(index)];
    const std::string wanted = sessionToJson(s.state).dump();
    if (wanted != m_applied) {
        const QString error = m_window->applySession(s.state);
        if (!error.isEmpty()) return tr("Step %1: %2").arg(index + 1).arg(error);
        m_applied = wanted;
    } else {
        // Same run: only the view may differ (a step that points elsewhere).
        m_window->applyView(s.state.view);
    }
    m_pendingPick = false;
    m_panel->showStep(index);
    showPanels(s.panels);
    m_window->files()->followLesson(tr("Lesson: %1").arg(QString::fromStdString(m_panel->lesson().title)));
    if (auto t = m_window->controller()->shownTrace()) traceShown(t);
    return {};
}

void LessonActions::closeLesson() {
    if (!hasLesson()) return;
    m_panel->setLesson(Lesson{});
    m_pendingPick = false;
    m_applied.clear();
    m_file.clear();
    m_window->comparison()->setHighlight({});
    if (!m_layout.isEmpty()) m_window->restoreState(m_layout);
    m_layout.clear();
    m_dock->hide();
    m_window->files()->followLesson(tr("Untitled"));
}

void LessonActions::showPanels(const std::vector<std::string>& panels) {
    if (panels.empty()) return;
    for (const std::string& name : lessonPanels())
        if (auto* d = m_window->findChild<QDockWidget*>(QString::fromStdString(name)))
            d->setVisible(std::find(panels.begin(), panels.end(), name) != panels.end());
    if (QDockWidget* last = m_window->findChild<QDockWidget*>(QString::fromStdString(panels.back()))) last->raise();
    m_dock->show();
}

void LessonActions::traceShown(const std::shared_ptr<const Trace>& trace) {
    const LessonStep* s = m_panel->currentStep();
    if (!trace || !s) return;
    ui::Highlight h;
    if (s->question && s->question->kind == LessonQuestion::Kind::Pick) {
        h.tokens = m_panel->pickedTokens();  // the class's picks (after Reveal, over the colours of what was kept)
    } else {
        h.tokens = highlightPositions(s->highlight, trace->labels);
        h.heads = s->highlight.heads;
        if (const auto& r = s->highlight.region) {
            const int64_t n = static_cast<int64_t>(trace->labels.size());
            auto at = [n](int64_t v) { return static_cast<int>(std::clamp<int64_t>(v < 0 ? n + v : v, 0, n - 1)); };
            h.region = QRect(QPoint(at(r->keyFirst), at(r->queryFirst)), QPoint(at(r->keyLast), at(r->queryLast)));
        }
    }
    m_window->comparison()->setHighlight(h);
    if (s->question && s->question->kind == LessonQuestion::Kind::Pick && !m_panel->revealed() &&
        m_panel->pickTokenCount() != std::min<int64_t>(trace->promptLength, static_cast<int64_t>(trace->labels.size())))
        m_panel->setPickTokens(trace->labels, trace->promptLength);
}

void LessonActions::reveal() {
    const LessonStep* s = m_panel->currentStep();
    if (!s || !s->question) return;
    const LessonQuestion& q = *s->question;
    // A written Choice is answered by the panel itself; a Pick or a measured
    // Choice by the run shown after Reveal.
    const bool pick = q.kind == LessonQuestion::Kind::Pick || q.measured();
    m_pendingPick = pick;
    if (q.reveal) {
        const std::string wanted = sessionToJson(*q.reveal).dump();
        if (wanted != m_applied) {
            const QString error = m_window->applySession(*q.reveal);
            if (!error.isEmpty()) {
                m_pendingPick = false;
                m_panel->showAnswer(error.toHtmlEscaped());
                return;
            }
            m_applied = wanted;
            m_window->files()->followLesson(tr("Lesson: %1").arg(QString::fromStdString(m_panel->lesson().title)));
            if (pick) return;  // answered when the run is done (runFinished)
        }
    }
    if (pick && !m_window->controller()->busy()) runFinished();
}

void LessonActions::runFinished() {
    if (!m_pendingPick) return;
    const auto trace = m_window->controller()->shownTrace();
    // A run of the state before Reveal may finish first (the Reveal's own
    // is debounced): the answer waits for a run that has the policies asked about.
    const LessonQuestion& q = *m_panel->currentStep()->question;
    if (!trace) return;
    for (const std::string& policy : q.measured() ? q.runs : std::vector<std::string>{q.policy})
        if (!hasRun(*trace, policy)) return;
    m_pendingPick = false;
    if (q.measured()) answerMeasured(*trace);
    else answerPick(*trace);
    traceShown(trace);
}

void LessonActions::answerMeasured(const Trace& trace) {
    const LessonQuestion& q = *m_panel->currentStep()->question;
    try {
        std::vector<double> kl;
        const int right = measuredAnswer(trace, q, &kl);
        QStringList parts;
        for (size_t i = 0; i < q.runs.size(); ++i)
            parts << tr("%1 %2").arg(QString::fromStdString(q.choices[i]),
                                     std::isnan(kl[i]) ? tr("n/a") : QString::number(kl[i], 'g', 3));
        m_panel->showChoiceAnswer(right, tr("Mean KL to the full cache on this run: %1.").arg(parts.join(QStringLiteral(", "))));
    } catch (const std::exception& e) {
        m_panel->showAnswer(QString::fromStdString(e.what()).toHtmlEscaped());
    }
}

bool LessonActions::hasRun(const Trace& trace, const std::string& policy) {
    const std::string label = parsePolicySpec(policy).label();
    for (const auto& p : trace.policies)
        if (p.label == label) return true;
    return false;
}

void LessonActions::answerPick(const Trace& trace) {
    const LessonQuestion& q = *m_panel->currentStep()->question;
    try {
        const std::vector<int64_t> held = pickAnswer(trace, q);
        const std::vector<int64_t> picked = m_panel->pickedTokens();
        const PickScore score = scorePick(picked, held);
        const QString name = QString::fromStdString(findPolicy(parsePolicySpec(q.policy).id).name);
        QString text;
        if (score.picked == 0)
            text = tr("<b>No tokens picked.</b> ");
        else
            text = tr("<b>You picked %1 token(s); %2 of them survive.</b> ").arg(score.picked).arg(score.right);
        text += tr("%1 holds %2 of the %3 prompt tokens in layer %4 · KV head %5: the ringed cells of its strip are "
                   "your picks, the colours what it kept. ")
                    .arg(name.toHtmlEscaped())
                    .arg(score.held)
                    .arg(trace.promptLength)
                    .arg(q.layer)
                    .arg(q.kvHead);
        m_panel->showAnswer(text + QString::fromStdString(q.why).toHtmlEscaped());
    } catch (const std::exception& e) {
        m_panel->showAnswer(QString::fromStdString(e.what()).toHtmlEscaped());
    }
}

}  // namespace kvlens::gui
