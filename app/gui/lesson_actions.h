#pragma once
// The Lessons menu and the lesson dock's work (widgets/lesson_panel.h):
// opening a lesson (the shipped ones in resources/lessons, or a file), and
// for each step putting its state in place through the window's
// applySession (so a step is exactly the session it describes), showing
// the docks it names, ringing what it highlights once the run's tokens are
// known, and for a Pick question working out the answer from the run the
// class sees after Reveal. Presenter mode is the window's (MainWindow::
// setPresenter); the dock's toggle and the menu's item both ask for it.
#include <QByteArray>
#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>

#include "core/io/lesson_file.h"

class QMenu;
class QDockWidget;

namespace kvlens {
struct Trace;
}

namespace kvlens::ui {
class LessonPanel;
}

namespace kvlens::gui {

class MainWindow;

class LessonActions : public QObject {
    Q_OBJECT
public:
    LessonActions(MainWindow* window, ui::LessonPanel* panel, QDockWidget* dock);

    void addMenu(QMenu* lessons);
    // The shipped lessons, by file name (01-…, 02-…).
    static QStringList shippedLessons();
    // Opens a lesson at its first step; the reason on failure (the window
    // and any lesson open keep their state).
    QString openLesson(const QString& file);
    // Puts step `index` in place; the reason when its state does not apply.
    QString goTo(int index);
    void reveal();
    // Lessons ▸ Close lesson: the docks and their sizes as they were before
    // the lesson opened; the window keeps the last step's runs, as an
    // unsaved "Untitled" session.
    void closeLesson();
    bool hasLesson() const;
    int step() const;
    // A Pick or measured question waiting for its run to finish before the answer shows.
    bool waitingForReveal() const { return m_pendingPick; }

private:
    void traceShown(const std::shared_ptr<const Trace>& trace);
    void runFinished();
    void showPanels(const std::vector<std::string>& panels);
    void answerPick(const Trace& trace);
    void answerMeasured(const Trace& trace);  // a measured Choice: the run with the lowest mean KL
    static bool hasRun(const Trace& trace, const std::string& policy);

    MainWindow* m_window;
    ui::LessonPanel* m_panel;
    QDockWidget* m_dock;
    QString m_file;
    std::string m_applied;  // the session JSON last put in place, so a step that changes nothing does not re-run
    bool m_pendingPick = false;
    QByteArray m_layout;  // the window's docks before the lesson (QMainWindow::saveState)
};

}  // namespace kvlens::gui
