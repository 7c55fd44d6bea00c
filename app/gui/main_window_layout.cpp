// The main window's layout: the central column, the docks (each in a scroll
// area) and the size of the first start, which together keep the window
// within the screen it opens on (tests/gui/screen_fit_test).
#include <QComboBox>
#include <QDockWidget>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QScreen>
#include <QScrollArea>
#include <QVBoxLayout>

#include "app/gui/lesson_actions.h"
#include "app/gui/main_window.h"
#include "widgets/agreement_view.h"
#include "widgets/budget_editor.h"
#include "widgets/comparison_view.h"
#include "widgets/eviction_timeline.h"
#include "widgets/lesson_panel.h"
#include "widgets/memory_view.h"
#include "widgets/metrics_panel.h"
#include "widgets/model_panel.h"
#include "widgets/needle_panel.h"
#include "widgets/policy_list.h"
#include "widgets/prompt_editor.h"
#include "widgets/ranking_view.h"
#include "widgets/sweep_panel.h"
#include "widgets/transport_bar.h"

namespace kvlens::gui {
namespace {

// What a window manager's frame adds around the client area: borders and
// the title bar.
constexpr QSize kFrameAllowance(16, 40);

// Each dock's content sits in a scroll area: a panel that needs more room
// than the screen gives (large text, presenter mode) scrolls instead of
// widening the window past the screen. Wrap: text that reflows to the width
// (no horizontal scrolling). Own: the panel scrolls its own part (the
// lesson's text, above buttons that stay in view).
enum class Fit { Scroll, Wrap, Own };
QDockWidget* dock(QMainWindow* w, const QString& title, const QString& name, QWidget* content, Qt::DockWidgetArea area,
                  Fit fit = Fit::Scroll) {
    auto* d = new QDockWidget(title, w);
    d->setObjectName(name);  // restoreState() finds docks by name
    if (fit == Fit::Own) {
        d->setWidget(content);
    } else {
        auto* scroll = new QScrollArea(d);
        scroll->setWidget(content);
        scroll->setWidgetResizable(true);
        scroll->setFrameShape(QFrame::NoFrame);
        if (fit == Fit::Wrap) scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        d->setWidget(scroll);
    }
    w->addDockWidget(area, d);
    return d;
}

}  // namespace

void MainWindow::fitToScreen() {
    // The first start: 1400 x 900, or the screen's available area when that
    // is smaller (less the room a window manager's frame takes).
    const QScreen* shown = screen() ? screen() : QGuiApplication::primaryScreen();
    resize(QSize(1400, 900).boundedTo(shown->availableGeometry().size() - kFrameAllowance));
}

QWidget* MainWindow::buildCentral() {
    auto* central = new QWidget(this);
    auto* second = new QHBoxLayout;
    second->addWidget(m_selection, 1);
    second->addWidget(new QLabel(tr("colour scale"), central));
    m_scale->addItems({QStringLiteral("linear"), QStringLiteral("log"), QStringLiteral("power")});
    m_scale->setToolTip(tr("Attention colour scale, shared by every column"));
    second->addWidget(m_scale);
    m_error->setStyleSheet(QStringLiteral("color: #B03000"));
    m_error->setWordWrap(true);
    m_error->hide();
    m_notice->setStyleSheet(QStringLiteral("color: #8A5A00"));
    m_notice->setWordWrap(true);
    m_notice->hide();
    m_selection->setToolTip(tr("Click a cell of a layers × heads grid to select another layer and head"));
    // It wraps rather than setting the window's minimum width (large text).
    m_selection->setWordWrap(true);
    m_selection->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_transport);
    layout->addLayout(second);
    layout->addWidget(m_error);
    layout->addWidget(m_notice);
    layout->addWidget(m_comparison, 1);
    return central;
}

void MainWindow::buildDocks() {
    setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
    QDockWidget* prompt = dock(this, tr("Prompt"), QStringLiteral("prompt"), m_prompt, Qt::LeftDockWidgetArea);
    QDockWidget* policies = dock(this, tr("Policies"), QStringLiteral("policies"), m_policies, Qt::LeftDockWidgetArea);
    QDockWidget* model = dock(this, tr("Model"), QStringLiteral("model"), m_model, Qt::LeftDockWidgetArea);
    QDockWidget* budget = dock(this, tr("Budget"), QStringLiteral("budget"), m_budget, Qt::LeftDockWidgetArea);
    QDockWidget* metrics = dock(this, tr("Metrics"), QStringLiteral("metrics"), m_metrics, Qt::RightDockWidgetArea);
    auto* timelineBox = new QWidget(this);
    auto* tl = new QVBoxLayout(timelineBox);
    tl->setContentsMargins(2, 2, 2, 2);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("policy"), timelineBox));
    row->addWidget(m_timelinePolicy);
    row->addStretch(1);
    tl->addLayout(row);
    tl->addWidget(m_timeline, 1);
    QDockWidget* timeline = dock(this, tr("Eviction timeline"), QStringLiteral("timeline"), timelineBox,
                                 Qt::BottomDockWidgetArea);
    QDockWidget* needle = dock(this, tr("Needle"), QStringLiteral("needle"), m_needle, Qt::RightDockWidgetArea);
    tabifyDockWidget(policies, model);
    policies->raise();
    QDockWidget* memory = dock(this, tr("KV memory"), QStringLiteral("memory"), m_memory, Qt::RightDockWidgetArea);
    QDockWidget* sweeps = dock(this, tr("Sweep"), QStringLiteral("sweep"), m_sweep, Qt::RightDockWidgetArea);
    QDockWidget* agreement = dock(this, tr("Agreement"), QStringLiteral("agreement"), m_agreement, Qt::RightDockWidgetArea);
    QDockWidget* ranking = dock(this, tr("Ranking"), QStringLiteral("ranking"), m_ranking, Qt::RightDockWidgetArea);
    tabifyDockWidget(metrics, ranking);
    tabifyDockWidget(ranking, agreement);
    tabifyDockWidget(agreement, needle);
    tabifyDockWidget(needle, sweeps);
    tabifyDockWidget(sweeps, memory);
    metrics->raise();
    // Its own row under the right-hand tabs; its text wraps to the width.
    QDockWidget* lesson = dock(this, tr("Lesson"), QStringLiteral("lesson"), m_lessonPanel, Qt::RightDockWidgetArea, Fit::Own);
    lesson->hide();  // until a lesson opens
    m_lessons = new LessonActions(this, m_lessonPanel, lesson);
}

// Dock sizes only take once the window has its size, so this runs from
// start() (after show()), and only when no saved layout was restored.
void MainWindow::applyDefaultLayout() {
    auto* prompt = findChild<QDockWidget*>(QStringLiteral("prompt"));
    auto* policies = findChild<QDockWidget*>(QStringLiteral("policies"));
    auto* budget = findChild<QDockWidget*>(QStringLiteral("budget"));
    auto* metrics = findChild<QDockWidget*>(QStringLiteral("metrics"));
    auto* timeline = findChild<QDockWidget*>(QStringLiteral("timeline"));
    resizeDocks({prompt, policies, budget}, {170, 380, 300}, Qt::Vertical);
    resizeDocks({prompt, metrics}, {330, 390}, Qt::Horizontal);
    resizeDocks({timeline}, {150}, Qt::Vertical);
}

}  // namespace kvlens::gui
