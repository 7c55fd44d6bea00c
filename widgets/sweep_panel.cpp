#include "widgets/sweep_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>
#include <QVBoxLayout>

#include "widgets/fidelity_figure.h"

namespace kvlens::ui {

SweepPanel::SweepPanel(QWidget* parent)
    : QWidget(parent),
      m_open(new QPushButton(tr("Open sweep…"), this)),
      m_run(new QPushButton(tr("Run as sweep…"), this)),
      m_cancel(new QPushButton(tr("Cancel"), this)),
      m_workers(new QSpinBox(this)),
      m_tasks(new QComboBox(this)),
      m_progress(new QProgressBar(this)),
      m_status(new QLabel(this)),
      m_view(new FidelityView(this)) {
    m_open->setToolTip(tr("Open a sweep file or a merged.json (kvlens-cli sweep): its needle grid goes to the "
                          "Needle dock, its fidelity against budget is drawn here"));
    m_run->setToolTip(tr("Write a sweep of the current policies and the Needle dock's contexts, depths, budgets and "
                         "samples into a folder and run it in a pool of kvlens-cli processes (resumable)"));
    m_workers->setRange(1, std::max(1, QThread::idealThreadCount()));
    m_workers->setPrefix(tr("workers "));
    m_workers->setToolTip(tr("kvlens-cli processes, one shard each"));
    m_tasks->addItems({tr("needle"), tr("fidelity on the prompt"), tr("both")});
    m_tasks->setToolTip(tr("Needle: the Needle dock's grid. Fidelity: the prompt text read teacher-forced in windows "
                           "of each context length (one per sample)"));
    m_cancel->setEnabled(false);
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_progress->setFormat(tr("%v of %m cells"));
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* row = new QHBoxLayout;
    row->addWidget(m_open);
    row->addWidget(m_run);
    row->addWidget(m_cancel);
    auto* row2 = new QHBoxLayout;
    row2->addWidget(m_tasks, 1);
    row2->addWidget(m_workers);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(row);
    layout->addLayout(row2);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(m_view, 1);
    connect(m_open, &QPushButton::clicked, this, &SweepPanel::openRequested);
    connect(m_run, &QPushButton::clicked, this, &SweepPanel::runRequested);
    connect(m_cancel, &QPushButton::clicked, this, &SweepPanel::cancelRequested);
}

int SweepPanel::workers() const { return m_workers->value(); }

SweepPanel::Tasks SweepPanel::tasks() const {
    return m_tasks->currentIndex() == 0 ? Tasks::Needle : m_tasks->currentIndex() == 1 ? Tasks::Fidelity : Tasks::Both;
}

void SweepPanel::setRunning(bool running) {
    m_run->setEnabled(!running);
    m_open->setEnabled(!running);
    m_cancel->setEnabled(running);
}

void SweepPanel::setProgress(int64_t doneCells, int64_t cells) {
    m_progress->setRange(0, static_cast<int>(std::max<int64_t>(1, cells)));
    m_progress->setValue(static_cast<int>(doneCells));
}

void SweepPanel::setStatus(const QString& text) { m_status->setText(text); }

void SweepPanel::setCurves(std::vector<sweep::FidelityCurve> curves, const QString& title) {
    m_view->setCurves(std::move(curves), title);
}

}  // namespace kvlens::ui
