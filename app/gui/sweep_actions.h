#pragma once
// The Sweep dock's work (widgets/sweep_panel.h): opening a sweep — a sweep
// file with its results so far, or a merged.json — into the Needle dock and
// the fidelity figure, and running the current policies and the Needle
// dock's grid as a sweep: a sweep file written into a folder the user
// picks, run by `kvlens-cli sweep run --workers K` (the local back end of
// docs/sweeps.md) as a child process, its progress read from the results
// files. Cancel stops the pool cleanly (what is done stays; Run again
// continues), and so does closing the window.
#include <QObject>
#include <QString>
#include <QTimer>
#include <optional>

#include "core/sweep/sweep.h"

class QProcess;

namespace kvlens::ui {
class NeedlePanel;
class SweepPanel;
}  // namespace kvlens::ui

namespace kvlens::gui {

class MainWindow;

class SweepActions : public QObject {
    Q_OBJECT
public:
    SweepActions(MainWindow* window, ui::SweepPanel* panel, ui::NeedlePanel* needle);
    ~SweepActions() override;

    // Shows the sweep in the docks; the reason on failure (nothing changes then).
    QString openSweep(const QString& file);
    // Writes FOLDER/sweep.json from the window's state (a folder holding
    // another sweep is refused, the same one resumes) and starts the pool.
    QString startSweep(const QString& folder);
    void cancel();
    bool running() const { return m_process != nullptr; }
    QString sweepFile() const { return m_file; }
    // kvlens-cli: $KVLENS_CLI, beside this program, one folder up (the build
    // tree), or on PATH; empty when none is found.
    static QString cliPath();

Q_SIGNALS:
    // exitCode: 0 done, 1 a probe failed or cells are missing, 130 cancelled.
    void finished(int exitCode, const QString& message);

private:
    void poll();
    void done(int exitCode);
    MainWindow* m_window;
    ui::SweepPanel* m_panel;
    ui::NeedlePanel* m_needle;
    QProcess* m_process = nullptr;
    QTimer m_poll;
    QString m_file;
    std::optional<sweep::SweepSpec> m_spec;  // of the running sweep
    QByteArray m_stderr;
};

}  // namespace kvlens::gui
