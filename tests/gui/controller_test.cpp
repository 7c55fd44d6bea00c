// Controller: one worker, newest request wins, stale results are dropped on
// the GUI thread, cancelling a long run is immediate.
#include <QRegularExpression>
#include <QtTest>

#include "app/gui/controller.h"
#include "gui_test_main.h"
#include "core/paths.h"
#include "trace_fixtures.h"

using namespace kvlens;
using kvlens::gui::Controller;

namespace {

const QString kPrompt = QStringLiteral(
    "the code for the red door is 4 8 2 1 . the small cat sleeps under the tree . what is the code for the red door ?");

bool loadBundled(Controller& c) {
    QSignalSpy loaded(&c, &Controller::modelLoaded);
    c.loadModel(QString::fromStdString(bundledModelDir().string()), RunSettings{});
    return loaded.wait(60000);
}

bool settled(const Controller& c, int traces) {
    return !c.busy() && static_cast<int>(c.history().size()) == traces;
}

}  // namespace

class ControllerTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void staleResultsAreDropped() {
        Controller c;
        QSignalSpy shown(&c, &Controller::traceShown);
        c.acceptTrace(c.currentRunId() + 7, test::makeTrace(12));
        QCOMPARE(c.droppedResults(), 1);
        QVERIFY(c.history().empty());
        QCOMPARE(shown.count(), 0);
    }

    void newestRequestWins() {
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPrompt(kPrompt);
        c.setPolicies({parsePolicySpec("streaming")});
        c.setDecodeSteps(4);
        QSignalSpy issued(&c, &Controller::runIssued);
        for (int budget : {8, 12, 16}) {
            c.setBudget(parseBudget(std::to_string(budget)));
            c.runNow();
        }
        QVERIFY(issued.count() >= 3);
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 5), 60000);
        QCOMPARE(c.history().front()->promptLength, c.history().back()->promptLength);
        for (const auto& t : c.history()) {
            QCOMPARE(t->policies.size(), size_t{2});
            QCOMPARE(t->policies[1].layers[0].budget, int64_t{16});  // only the newest request's traces
        }
        QCOMPARE(c.history().back()->step, int64_t{4});
        qInfo("results of superseded requests dropped: %d", c.droppedResults());
    }

    void anEditTakesOverThePreviousRun() {
        // The worker keeps its Session: a parameter edit re-runs that policy
        // alone, the status names what was kept; a model load starts afresh.
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPrompt(kPrompt);
        c.setPolicies({parsePolicySpec("streaming"), parsePolicySpec("snapkv")});
        c.setBudget(parseBudget("12"));
        c.setDecodeSteps(3);
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 4), 60000);
        const auto before = c.history().back();
        c.setPolicies({parsePolicySpec("streaming"), parsePolicySpec("snapkv:window=4")});
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 4) && c.history().back() != before, 60000);
        QVERIFY2(c.reuse().startsWith(QStringLiteral("kept 2 runs and 3 steps")), qPrintable(c.reuse()));
        const auto& after = *c.history().back();
        QCOMPARE(after.policies[1].metrics.size(), before->policies[1].metrics.size());
        QCOMPARE(after.policies[1].layers[0].heads[0].status, before->policies[1].layers[0].heads[0].status);
        QCOMPARE(after.policies[2].label, std::string("snapkv:window=4"));
    }

    void loadFailureNamesTheFile() {
        QTemporaryDir dir;
        QFile config(dir.filePath("config.json"));
        QVERIFY(config.open(QIODevice::WriteOnly));
        config.write("{\"model_type\": ");
        config.close();
        Controller c;
        QSignalSpy failed(&c, &Controller::modelFailed);
        c.loadModel(dir.path(), RunSettings{});
        QVERIFY(failed.wait(30000));
        const QString message = failed.at(0).at(0).toString();
        QVERIFY2(message.contains("config.json"), qPrintable(message));
        QVERIFY(!c.modelReady());
        c.loadModel(dir.filePath("missing"), RunSettings{});
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(1).at(0).toString().contains("missing"), qPrintable(failed.at(1).at(0).toString()));
    }

    // File > Open GGUF model: a .gguf is imported once per content into the
    // cache (~/.cache/kvlens/imported/gguf1-<sha256 prefix>), then opened from there.
    void aGgufOpensThroughAnImportMadeOnce() {
        const QString gguf = QStringLiteral(KVLENS_SMOLLM2_GGUF);
        QVERIFY2(QFileInfo::exists(gguf), qPrintable(gguf + " is missing: scripts/fetch-smollm2.sh fetches it"));
        QTemporaryDir cache;
        qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
        Controller c;
        QSignalSpy loaded(&c, &Controller::modelLoaded), failed(&c, &Controller::modelFailed);
        QSignalSpy stages(&c, &Controller::modelLoading);
        c.loadModel(gguf, RunSettings{});
        QVERIFY(loaded.wait(300000));
        QCOMPARE(failed.count(), 0);
        const QString dir = QString::fromStdString(c.model().directory);
        QVERIFY2(dir.startsWith(cache.path() + QStringLiteral("/kvlens/imported/gguf1-")), qPrintable(dir));
        QCOMPARE(c.model().layers, 30);
        bool imported = false;
        for (const auto& s : stages) imported |= s.at(1).toString().contains(QStringLiteral("importing"));
        QVERIFY(imported);
        const QDateTime written = QFileInfo(dir + QStringLiteral("/model.safetensors")).lastModified();
        stages.clear();
        c.loadModel(gguf, RunSettings{});  // the same file again: opened from the cache, not imported
        QVERIFY(loaded.wait(120000));
        QCOMPARE(QString::fromStdString(c.model().directory), dir);
        QCOMPARE(QFileInfo(dir + QStringLiteral("/model.safetensors")).lastModified(), written);
        for (const auto& s : stages) QVERIFY(!s.at(1).toString().contains(QStringLiteral("importing")));
        // A file that only ends in .gguf: one sentence naming it; nothing imported.
        QFile bad(cache.filePath(QStringLiteral("bad.gguf")));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("GGUF\x03\x00\x00\x00 truncated");
        bad.close();
        c.loadModel(bad.fileName(), RunSettings{});
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("bad.gguf")), qPrintable(failed.at(0).at(0).toString()));
        QCOMPARE(QDir(cache.path() + QStringLiteral("/kvlens/imported")).entryList(QDir::Dirs | QDir::NoDotAndDotDot).size(), 1);
        qunsetenv("XDG_CACHE_HOME");
    }

    void freeRunning() {
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPrompt(kPrompt);
        c.setPolicies({parsePolicySpec("window")});
        c.setBudget(parseBudget("8"));
        c.setDecodeSteps(3);
        c.setTeacherForced(false);
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 4), 60000);
        const auto& t = *c.history().back();
        QVERIFY(!t.teacherForced);
        QCOMPARE(t.policies[1].generated.size(), size_t{3});
    }

    void emptyPromptAndBadBudgetNeverCrash() {
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPolicies({parsePolicySpec("snapkv"), parsePolicySpec("h2o")});
        c.setBudget(parseBudget("64"));
        c.setDecodeSteps(2);
        c.setPrompt(QString());
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 3), 60000);  // <bos> alone is a prompt
        QCOMPARE(c.history().back()->promptLength, int64_t{1});
        // A per-layer list of the wrong length is refused with a reason, not a crash.
        QSignalSpy failed(&c, &Controller::runFailed);
        BudgetSpec wrong;
        wrong.value = 8;
        wrong.perLayer = {8, 8};
        c.setBudget(wrong);
        c.runNow();
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(0).at(0).toString().contains("per-layer"), qPrintable(failed.at(0).at(0).toString()));
    }

    void needleGrid() {
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPolicies({parsePolicySpec("streaming")});
        eval::NeedleGridOptions o;
        o.contexts = {48};
        o.depths = {0, 1};
        o.budgets = {parseBudget("16")};
        QSignalSpy ready(&c, &Controller::needleReady);
        QSignalSpy progress(&c, &Controller::needleProgress);
        c.runNeedle(o);
        QVERIFY(c.needleRunning());
        QVERIFY(ready.wait(60000));
        const auto grid = ready.at(0).at(0).value<std::shared_ptr<const eval::NeedleGridResult>>();
        QCOMPARE(grid->cells.size(), size_t{4});  // 2 depths × (full + streaming@16)
        QVERIFY(progress.count() >= 2);
        QVERIFY(!c.needleRunning());

        // Cancelled: a grid far too big to finish in time gives way at once.
        o.contexts = {512, 1024};
        o.depths = {0, 0.25, 0.5, 0.75, 1};
        o.samples = 20;
        QSignalSpy failed(&c, &Controller::needleFailed);
        progress.clear();
        c.runNeedle(o);
        QTRY_VERIFY_WITH_TIMEOUT(progress.count() >= 1, 60000);
        c.cancelNeedle();
        QVERIFY(failed.wait(20000));
        QVERIFY(failed.at(0).at(0).toString().isEmpty());  // empty: cancelled, not an error
    }

    void cancellingIsImmediate() {
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPrompt(kPrompt);
        c.setPolicies({parsePolicySpec("h2o")});
        c.setBudget(parseBudget("16"));
        c.setDecodeSteps(2000);  // minutes of work if it were not cancelled
        QSignalSpy finished(&c, &Controller::runFinished);
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(c.history().size() >= 3, 60000);  // the long run is under way
        QElapsedTimer timer;
        timer.start();
        c.setDecodeSteps(1);
        c.runNow();
        const quint64 newest = c.currentRunId();
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 2), 20000);
        qInfo("a superseded 2000-step run gave way in %lld ms", static_cast<long long>(timer.elapsed()));
        QCOMPARE(finished.count(), 1);
        QCOMPARE(finished.at(0).at(0).value<quint64>(), newest);
    }

    // The status bar's progress: each run's prompt read, then the decode
    // steps; Cancel stops the run, keeps what arrived, and the next edit runs.
    void progressAndCancel() {
        Controller c;
        QVERIFY(loadBundled(c));
        c.setPrompt(kPrompt);
        c.setPolicies({parsePolicySpec("streaming"), parsePolicySpec("snapkv")});
        c.setBudget(parseBudget("12"));
        c.setDecodeSteps(2000);  // minutes of work if it were not cancelled
        QSignalSpy progress(&c, &Controller::runProgress), cancelled(&c, &Controller::runCancelled);
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(c.history().size() >= 3, 60000);
        QVERIFY(progress.count() >= 3);
        const QString first = progress.at(0).at(1).toString();
        // Each run from where it starts (the full cache may keep a prefix of
        // the run before) to the prompt's length.
        const QRegularExpression each(QStringLiteral("^Reading the prompt: full \\d+/(\\d+) · streaming \\d+/\\1 · snapkv \\d+/\\1$"));
        QVERIFY2(each.match(first).hasMatch(), qPrintable(first));
        QVERIFY2(progress.last().at(1).toString().startsWith(QStringLiteral("Decode step")), qPrintable(progress.last().at(1).toString()));
        c.cancelRun();
        QVERIFY(!c.busy());
        QCOMPARE(cancelled.count(), 1);
        const size_t kept = c.history().size();
        QTest::qWait(300);
        QCOMPARE(c.history().size(), kept);  // nothing more from the cancelled run
        c.cancelRun();                        // nothing running: nothing happens
        QCOMPARE(cancelled.count(), 1);
        c.setDecodeSteps(2);
        c.runNow();
        QTRY_VERIFY_WITH_TIMEOUT(settled(c, 3), 60000);
        // The cancelled run's Session was freed: nothing of it is taken over.
        QCOMPARE(c.reuse(), QStringLiteral("computed afresh"));
    }
};

KVLENS_GUI_TEST_MAIN(ControllerTest)
#include "controller_test.moc"
