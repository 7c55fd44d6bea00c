// The Sweep dock on the bundled model, through the main window: the current
// policies and the Needle dock's grid run as a sweep by kvlens-cli's local
// pool (progress to the last cell, the grid in the Needle dock, a merged.json
// that opens again), the fidelity task drawing its curves, Cancel keeping
// what was done and Run continuing it, a folder holding another sweep
// refused, and a JSON that is not a sweep named in one sentence.
#include <QComboBox>
#include <QDockWidget>
#include <QLineEdit>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <fstream>

#include "app/gui/main_window.h"
#include "app/gui/sweep_actions.h"
#include "core/sweep/sweep.h"
#include "gui_test_main.h"
#include "widgets/fidelity_figure.h"
#include "widgets/needle_panel.h"
#include "widgets/needle_view.h"
#include "widgets/prompt_editor.h"
#include "widgets/sweep_panel.h"

using namespace kvlens;
using kvlens::gui::MainWindow;
using kvlens::gui::SweepActions;

namespace {

bool ready(const MainWindow& w) { return w.controller()->modelReady() && !w.controller()->busy(); }

}  // namespace

class SweepTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        qputenv("KVLENS_CLI", KVLENS_CLI_PATH);
    }

    void runOpenCancelContinue() {
        QTemporaryDir tmp;
        MainWindow w;
        w.show();
        w.start(QString());
        QTRY_VERIFY_WITH_TIMEOUT(ready(w), 60000);
        QCOMPARE(SweepActions::cliPath(), QStringLiteral(KVLENS_CLI_PATH));
        w.needlePanel()->contexts()->setText(QStringLiteral("64,96"));
        w.needlePanel()->budgets()->setText(QStringLiteral("25%"));
        SweepActions* s = w.sweeps();
        QSignalSpy finished(s, &SweepActions::finished);
        const QString folder = tmp.filePath(QStringLiteral("needle"));
        QCOMPARE(s->startSweep(folder), QString());
        QVERIFY(s->running());
        QVERIFY(!w.sweepPanel()->runButton()->isEnabled());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        QCOMPARE(finished.at(0).at(0).toInt(), 0);
        // 2 contexts x 3 depths (the dock's 0,50,100) x 1 sample; full + 3 policies x 1 budget.
        QCOMPARE(w.sweepPanel()->progress()->maximum(), 24);
        QCOMPARE(w.sweepPanel()->progress()->value(), 24);
        QVERIFY2(w.sweepPanel()->status()->text().contains(QStringLiteral("24 of 24 cells done")),
                 qPrintable(w.sweepPanel()->status()->text()));
        QVERIFY(w.needlePanel()->view()->result());
        QCOMPARE(w.needlePanel()->view()->result()->cells.size(), size_t{24});
        QVERIFY(w.sweepPanel()->view()->curves().empty());  // a needle sweep has no fidelity curves
        QVERIFY(QFile::exists(folder + QStringLiteral("/merged.json")));
        // The merged result opens on its own too.
        w.needlePanel()->setResult(nullptr);
        QCOMPARE(s->openSweep(folder + QStringLiteral("/merged.json")), QString());
        QCOMPARE(w.needlePanel()->view()->result()->cells.size(), size_t{24});

        // Other settings into the same folder: refused, nothing overwritten.
        w.needlePanel()->budgets()->setText(QStringLiteral("50%"));
        const QString refused = s->startSweep(folder);
        QVERIFY2(refused.contains(QStringLiteral("holds another sweep")), qPrintable(refused));
        QVERIFY(!s->running());

        // Fidelity on the prompt: curves in the dock. The prompt must hold the windows.
        QString prompt;
        for (int i = 0; i < 40; ++i) prompt += QStringLiteral("once upon a time there was a little girl named lily . ");
        w.promptEditor()->setText(prompt);
        QTRY_VERIFY_WITH_TIMEOUT(ready(w), 60000);
        w.sweepPanel()->findChild<QComboBox*>()->setCurrentIndex(1);
        QCOMPARE(s->startSweep(tmp.filePath(QStringLiteral("fidelity"))), QString());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 120000);
        QCOMPARE(finished.at(1).at(0).toInt(), 0);
        QCOMPARE(w.sweepPanel()->view()->curves().size(), size_t{3});  // one per policy

        // Cancel: the pool stops, what is done stays; running again continues to the end.
        w.needlePanel()->contexts()->setText(QStringLiteral("256,320,384,448"));
        w.sweepPanel()->findChild<QComboBox*>()->setCurrentIndex(0);
        const QString big = tmp.filePath(QStringLiteral("big"));
        QCOMPARE(s->startSweep(big), QString());
        QTRY_VERIFY_WITH_TIMEOUT(w.sweepPanel()->progress()->value() > 0, 120000);
        s->cancel();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 60000);
        if (finished.at(2).at(0).toInt() == 0) QSKIP("the sweep finished before Cancel reached it");
        QCOMPARE(finished.at(2).at(0).toInt(), 130);
        QVERIFY2(finished.at(2).at(1).toString().contains(QStringLiteral("cancelled")),
                 qPrintable(finished.at(2).at(1).toString()));
        const int kept = w.sweepPanel()->progress()->value();
        QVERIFY(kept > 0 && kept < w.sweepPanel()->progress()->maximum());
        QCOMPARE(s->startSweep(big), QString());  // the same folder, the same settings: continues
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 4, 120000);
        QCOMPARE(finished.at(3).at(0).toInt(), 0);
        QCOMPARE(w.sweepPanel()->progress()->value(), w.sweepPanel()->progress()->maximum());
    }

    void notASweepIsNamed() {
        QTemporaryDir tmp;
        MainWindow w;
        const QString f = tmp.filePath(QStringLiteral("other.json"));
        std::ofstream(f.toStdString()) << R"({"format": "kvlens-needle", "version": 1})";
        const QString e = w.sweeps()->openSweep(f);
        QVERIFY2(e.contains(QStringLiteral("other.json")) && e.contains(QStringLiteral("neither a sweep file")), qPrintable(e));
        std::ofstream(f.toStdString()) << "{broken";
        QVERIFY(w.sweeps()->openSweep(f).contains(QStringLiteral("not valid JSON at line")));
    }
};

KVLENS_GUI_TEST_MAIN(SweepTest)
#include "sweep_test.moc"
