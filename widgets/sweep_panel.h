#pragma once
// The Sweep dock: open a sweep (a sweep file or its merged.json), run the
// current policies and the Needle dock's grid as a sweep in a local pool of
// kvlens-cli processes (resumable; docs/sweeps.md) with a progress bar and
// Cancel, the sweep's status, and its fidelity against budget (the figure
// `kvlens-cli sweep merge` writes). The needle grid of an opened sweep goes
// to the Needle dock. The work is app/gui/sweep_actions.h's.
#include <QWidget>
#include <vector>

#include "core/sweep/sweep.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace kvlens::ui {

class FidelityView;

class SweepPanel : public QWidget {
    Q_OBJECT
public:
    enum class Tasks { Needle, Fidelity, Both };
    explicit SweepPanel(QWidget* parent = nullptr);

    int workers() const;
    Tasks tasks() const;
    void setRunning(bool running);
    void setProgress(int64_t doneCells, int64_t cells);
    void setStatus(const QString& text);  // rich text: name, done / missing / failed
    void setCurves(std::vector<sweep::FidelityCurve> curves, const QString& title);
    FidelityView* view() const { return m_view; }
    QLabel* status() const { return m_status; }
    QProgressBar* progress() const { return m_progress; }
    QPushButton* runButton() const { return m_run; }

Q_SIGNALS:
    void openRequested();
    void runRequested();
    void cancelRequested();

private:
    QPushButton* m_open;
    QPushButton* m_run;
    QPushButton* m_cancel;
    QSpinBox* m_workers;
    QComboBox* m_tasks;
    QProgressBar* m_progress;
    QLabel* m_status;
    FidelityView* m_view;
};

}  // namespace kvlens::ui
