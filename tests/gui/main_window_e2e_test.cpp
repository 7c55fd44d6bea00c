// End to end: the main window on the bundled model runs the example with
// full + three policies; dragging a budget bar re-runs and the comparison
// view shows the new budget; Ctrl+Z restores it. Also reports how long a
// ~512-token prompt takes with full + 5 policies.
#include <QtTest>

#include "app/gui/examples.h"
#include "app/gui/main_window.h"
#include "gui_test_main.h"
#include "widgets/budget_bars.h"
#include "widgets/budget_editor.h"
#include "widgets/comparison_view.h"
#include "widgets/policy_column.h"
#include "widgets/policy_list.h"
#include "widgets/prompt_editor.h"
#include "widgets/transport_bar.h"

using namespace kvlens;
using kvlens::gui::Controller;
using kvlens::gui::MainWindow;

namespace {

bool complete(const MainWindow& w) {
    const Controller* c = w.controller();
    return c->modelReady() && !c->busy() && !c->history().empty() &&
           static_cast<int>(c->history().size()) == w.transport()->decodeSteps() + 1;
}

int64_t shownBudget(const MainWindow& w, int policy, int layer) {
    const auto t = w.comparison()->trace();
    return t ? t->policies[static_cast<size_t>(policy)].layers[static_cast<size_t>(layer)].budget : -1;
}

}  // namespace

class MainWindowE2eTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void startsAndFollowsBudgetDrag() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QElapsedTimer timer;
        timer.start();
        w.start(QString());
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        qInfo("bundled model loaded and example shown in %lld ms", static_cast<long long>(timer.elapsed()));
        QCOMPARE(w.comparison()->columnCount(), 4);
        const char* ids[] = {"full", "streaming", "h2o", "snapkv"};
        for (int i = 0; i < 4; ++i) QVERIFY(w.comparison()->column(i)->headerText().contains(ids[i]));
        QCOMPARE(shownBudget(w, 1, 0), int64_t{64});
        const int updates = w.comparison()->updates();

        // Drag layer 0's bar down to about 20 entries.
        ui::BudgetBars* bars = w.budgetEditor()->bars();
        const QPoint from = bars->pointFor(0, 64), to = bars->pointFor(0, 20);
        QTest::mousePress(bars, Qt::LeftButton, {}, from);
        QTest::mouseMove(bars, to);
        QTest::mouseRelease(bars, Qt::LeftButton, {}, to);
        const auto sent = w.controller()->lastRequest().budget;
        QTRY_VERIFY_WITH_TIMEOUT(w.controller()->lastRequest().budget.perLayer.size() == 3, 5000);  // one per layer
        const int64_t dragged = w.controller()->lastRequest().budget.perLayer[0];
        QVERIFY2(std::abs(dragged - 20) <= 2, qPrintable(QString::number(dragged)));
        QCOMPARE(w.controller()->lastRequest().budget.perLayer[1], int64_t{64});
        Q_UNUSED(sent);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && shownBudget(w, 1, 0) == dragged, 60000);
        QVERIFY(w.comparison()->updates() > updates);
        QCOMPARE(shownBudget(w, 1, 1), int64_t{64});
        const auto t = w.comparison()->trace();
        QVERIFY(t->policies[1].layers[0].heads[0].held <= dragged);
        QVERIFY(t->policies[1].layers[1].heads[0].held > dragged);

        // Ctrl+Z undoes the drag: uniform 64 again. Shortcuts reach only the
        // active window (on X11 it must be activated first).
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && shownBudget(w, 1, 0) == 64, 60000);
        QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier | Qt::ShiftModifier);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && shownBudget(w, 1, 0) == dragged, 60000);
    }

    void timesALongPrompt() {
        MainWindow w;
        w.show();
        w.start(QString());
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        QString text;
        for (const auto& e : gui::loadExamples())
            if (e.name == QLatin1String("long-haystack")) text = e.text;
        QVERIFY(!text.isEmpty());
        QSignalSpy finished(w.controller(), &Controller::runFinished);
        w.promptEditor()->setText(text);  // full + streaming, h2o, snapkv (the defaults)
        QVERIFY(finished.wait(120000));
        auto report = [&] {
            const auto trace = w.controller()->history().back();
            qInfo("full + %d policies, %lld-token prompt, %d decode steps: prompt %.0f ms, total %.0f ms",
                  static_cast<int>(trace->policies.size()) - 1, static_cast<long long>(trace->promptLength),
                  w.transport()->decodeSteps(), finished.last().at(1).toDouble(), finished.last().at(2).toDouble());
            return trace->policies.size();
        };
        QCOMPARE(report(), size_t{4});
        std::vector<PolicyConfig> policies;
        for (const char* id : {"streaming", "h2o", "snapkv", "tova", "pyramidkv"}) policies.push_back(parsePolicySpec(id));
        w.policyList()->setPolicies(policies);
        w.controller()->setPolicies(policies);
        QVERIFY(finished.wait(120000));
        QCOMPARE(report(), size_t{6});
    }
};

KVLENS_GUI_TEST_MAIN(MainWindowE2eTest)
#include "main_window_e2e_test.moc"
