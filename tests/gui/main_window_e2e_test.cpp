// End to end: the main window on the bundled model runs the example with
// full + three policies; dragging a budget bar re-runs and the comparison
// view shows the new budget; Ctrl+Z restores it. Also reports how long a
// ~512-token prompt takes with full + 5 policies. Runs past the model's
// context warn, and past 4× it ask first; a model's sliding window is shown.
// The real `kvlens` binary: killed and restarted it leaves its autosave
// alone while the restore question is open, and --screenshot exits 1 saying
// why when the model cannot load or the file cannot be written.
#include <QCheckBox>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QTableWidget>
#include <QImage>
#include <QScrollArea>
#include <QScrollBar>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QStatusBar>
#include <QSettings>
#include <QtTest>
#include <algorithm>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "app/gui/examples.h"
#include "app/gui/main_window.h"
#include "core/paths.h"
#include "gui_test_main.h"
#include "widgets/budget_bars.h"
#include "widgets/budget_editor.h"
#include "widgets/comparison_view.h"
#include "widgets/model_panel.h"
#include "widgets/policy_column.h"
#include "widgets/policy_list.h"
#include "widgets/prompt_editor.h"
#include "widgets/ranking_view.h"
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

// The policy list and the controller given `ids` (as the user's list edit does).
void setPolicies(MainWindow& w, std::initializer_list<const char*> ids) {
    std::vector<PolicyConfig> policies;
    for (const char* id : ids) policies.push_back(parsePolicySpec(id));
    w.policyList()->setPolicies(policies);
    w.controller()->setPolicies(policies);
}

// The window at 1400 x 900 on the bundled model, its first run complete.
bool startAt1400(MainWindow& w) {
    w.resize(1400, 900);
    w.show();
    if (!QTest::qWaitForWindowExposed(&w)) return false;
    w.start(QString());
    return QTest::qWaitFor([&] { return complete(w); }, 60000);
}

int64_t shownBudget(const MainWindow& w, int policy, int layer) {
    const auto t = w.comparison()->trace();
    return t ? t->policies[static_cast<size_t>(policy)].layers[static_cast<size_t>(layer)].budget : -1;
}

// The bundled model copied into `dir` with `changes` applied to its config.json.
QString modelWith(const QTemporaryDir& dir, const QJsonObject& changes) {
    const QDir from(QString::fromStdString(bundledModelDir().string()));
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
        QFile::copy(from.filePath(QLatin1String(f)), dir.filePath(QLatin1String(f)));
    QFile config(dir.filePath(QStringLiteral("config.json")));
    config.open(QIODevice::ReadOnly);
    QJsonObject c = QJsonDocument::fromJson(config.readAll()).object();
    config.close();
    for (auto it = changes.begin(); it != changes.end(); ++it) c.insert(it.key(), it.value());
    config.open(QIODevice::WriteOnly | QIODevice::Truncate);
    config.write(QJsonDocument(c).toJson());
    return dir.path();
}

// `kvlens` on the offscreen platform with its own settings and autosave under `home`.
void prepareApp(QProcess& app, const QTemporaryDir& home) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    env.insert(QStringLiteral("XDG_DATA_HOME"), home.filePath(QStringLiteral("data")));
    env.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
    env.insert(QStringLiteral("XDG_RUNTIME_DIR"), home.path());
    app.setProcessEnvironment(env);
    app.setProgram(QStringLiteral(KVLENS_GUI_PATH));
}

QByteArray readAll(const QString& file) {
    QFile f(file);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// What changes when a file is written again, even with the same bytes.
QString identity(const QString& file) {
    struct stat st {};
    if (::stat(file.toLocal8Bit().constData(), &st) != 0) return QStringLiteral("missing");
    return QStringLiteral("inode %1, mtime %2.%3, %4 bytes")
        .arg(st.st_ino)
        .arg(st.st_mtim.tv_sec)
        .arg(st.st_mtim.tv_nsec)
        .arg(st.st_size);
}

}  // namespace

class MainWindowE2eTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        // A run of this test that crashed leaves "not a clean exit" and an
        // autosave: the restore question would take the keyboard.
        QSettings().clear();
    }

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

    // Full + 8 policies: the columns scroll inside the comparison view; the
    // window keeps its size and the Metrics dock stays whole.
    void eightPoliciesScrollInsideTheWindow() {
        MainWindow w;
        QVERIFY(startAt1400(w));
        setPolicies(w, {"streaming", "h2o", "snapkv", "tova", "pyramidkv", "adakv", "window", "andpro"});
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.comparison()->columnCount() == 9, 60000);
        QTest::qWait(100);
        QVERIFY2(w.minimumSizeHint().width() <= 1400, qPrintable(QString::number(w.minimumSizeHint().width())));
        QCOMPARE(w.width(), 1400);
        QVERIFY(w.comparison()->scrollArea()->horizontalScrollBar()->maximum() > 0);
        const auto* metrics = w.findChild<QDockWidget*>(QStringLiteral("metrics"));
        QVERIFY(metrics && metrics->isVisible());
        QVERIFY(metrics->geometry().right() < w.width());
        QVERIFY(metrics->width() >= 300);
        for (int i = 0; i < w.comparison()->columnCount(); ++i)
            QCOMPARE(w.comparison()->column(i)->width(), w.comparison()->columnWidth());
    }

    // The Ranking dock ranks the runs and says they held unequal memory;
    // Match memory reruns with each policy's budget solved (the worker,
    // the controller and the view together), and says which it found.
    void rankingDockMatchesMemory() {
        MainWindow w;
        QVERIFY(startAt1400(w));
        setPolicies(w, {"streaming", "h2o:schedule=every_step", "snapkv"});
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.comparison()->columnCount() == 4, 60000);
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("ranking"));
        QVERIFY(dock);
        dock->raise();
        ui::RankingView* ranking = w.rankingView();
        QCOMPARE(ranking->table()->rowCount(), 4);
        QVERIFY(!ranking->ranking().matched);
        QVERIFY2(ranking->ranking().unequal > 0, qPrintable(ranking->note()->text()));  // snapkv grows after the prompt
        ranking->matchSwitch()->setChecked(true);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && ranking->ranking().matched, 60000);
        QCOMPARE(ranking->ranking().unequal, 0);
        QVERIFY2(ranking->note()->text().startsWith(QStringLiteral("compared at matched memory")),
                 qPrintable(ranking->note()->text()));
        const auto t = w.comparison()->trace();
        QVERIFY(t->policies[3].layers[0].budget < t->policies[1].layers[0].budget);  // snapkv's budget solved lower
        if (const QByteArray shot = qgetenv("KVLENS_RANKING_SHOT"); !shot.isEmpty()) w.grab().save(QString::fromLocal8Bit(shot));
        ranking->matchSwitch()->setChecked(false);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && !ranking->ranking().matched, 60000);
    }

    // Past max_position_embeddings (32 here) a run warns and runs; past 4×
    // it is asked about once per prompt: No leaves it unrun, Run again asks
    // again, Yes runs it.
    void longPromptsWarnAndAskFirst() {
        QTemporaryDir dir;
        MainWindow w;
        int asked = 0;
        bool answer = true;
        QString question;
        w.start(modelWith(dir, {{QStringLiteral("max_position_embeddings"), 32}}));
        w.controller()->setLongContextDecider([&](const QString& message) {
            question = message;
            return ++asked, answer;
        });
        QTRY_VERIFY_WITH_TIMEOUT(w.controller()->modelReady() && !w.controller()->busy(), 60000);
        QCOMPARE(w.controller()->maxPositions(), int64_t{32});
        const auto tokenizer = w.controller()->tokenizer();
        const int steps = w.transport()->decodeSteps();
        auto length = [&](const QString& p) { return static_cast<int>(tokenizer->encode(p.toStdString(), true).size()) + steps; };
        auto longerThan = [&](int n) {
            QString p = QStringLiteral("the cat sat .");
            while (length(p) <= n) p += QStringLiteral(" the cat sat on the mat .");
            return p;
        };
        auto runs = [&w](const QString& p) {
            return QTest::qWaitFor([&] { return complete(w) && w.controller()->lastRequest().prompt == p; }, 60000);
        };
        const QString within = QStringLiteral("the cat .");
        QVERIFY(length(within) <= 32);
        w.promptEditor()->setText(within);
        QVERIFY(runs(within));
        QCOMPARE(w.contextNotice(), QString());

        asked = 0;
        const QString past = longerThan(32);
        QVERIFY(length(past) <= 4 * 32);
        w.promptEditor()->setText(past);
        QVERIFY(runs(past));
        QVERIFY2(w.contextNotice().contains(QStringLiteral("past the 32")), qPrintable(w.contextNotice()));
        QCOMPARE(asked, 0);

        answer = false;
        const QString far = longerThan(4 * 32);
        w.promptEditor()->setText(far);
        QTRY_COMPARE_WITH_TIMEOUT(asked, 1, 10000);
        QVERIFY2(question.contains(QStringLiteral("past the 32")), qPrintable(question));
        QTest::qWait(200);
        QCOMPARE(w.controller()->lastRequest().prompt, past);  // not run
        QVERIFY(!w.controller()->busy());
        // The columns still show the earlier prompt's run, and say so.
        QVERIFY2(w.comparison()->staleNote().startsWith(QStringLiteral("Previous run")),
                 qPrintable(w.comparison()->staleNote()));
        w.controller()->setSelection(1, 1);  // another edit, the same prompt: not asked again
        QTest::qWait(200);
        QCOMPARE(asked, 1);
        QCOMPARE(w.controller()->lastRequest().prompt, past);

        answer = true;
        w.controller()->runNow();
        QCOMPARE(asked, 2);
        QVERIFY(runs(far));
        QCOMPARE(w.comparison()->staleNote(), QString());  // the current run: no mark
        // A run cancelled before its first result leaves the last one, marked.
        w.controller()->setSelection(0, 0);
        w.controller()->runNow();
        QVERIFY(w.controller()->busy());
        w.controller()->cancelRun();
        QVERIFY2(w.comparison()->staleNote().contains(QStringLiteral("cancelled")), qPrintable(w.comparison()->staleNote()));
        QVERIFY(w.contextNotice().contains(QStringLiteral("past the 32")));
    }

    // Issue 50's memory guard in the app: under an address-space limit a
    // long prompt's attention map keeps the latest queries, the run
    // finishes, and the notice under the transport bar says what it dropped.
    void aLongPromptUnderAMemoryLimitRunsAndSaysWhatItDropped() {
        QTemporaryDir dir;
        MainWindow w;
        w.start(modelWith(dir, {{QStringLiteral("max_position_embeddings"), 10000}}));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        QVERIFY(w.contextNotice().isEmpty());
        setPolicies(w, {"snapkv"});
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.comparison()->columnCount() == 2, 60000);
        uint64_t pages = 0;
        std::ifstream("/proc/self/statm") >> pages;
        rlimit before{};
        QCOMPARE(getrlimit(RLIMIT_AS, &before), 0);
        rlimit limited = before;
        limited.rlim_cur = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + (1024ull << 20);
        QCOMPARE(setrlimit(RLIMIT_AS, &limited), 0);
        QString words;
        for (int i = 0; i < 3000; ++i) words += QStringLiteral("the cat sat . ");
        w.promptEditor()->setText(words);
        const bool ran = QTest::qWaitFor([&] { return complete(w) && w.controller()->history().back()->promptLength > 9000; }, 60000);
        const QString notice = w.contextNotice();
        setrlimit(RLIMIT_AS, &before);
        QVERIFY2(ran, qPrintable(notice + " | " + QString::number(w.controller()->history().back()->promptLength) + " | " +
                                 w.statusBar()->currentMessage()));
        QVERIFY2(notice.contains(QStringLiteral("To stay within memory: attention captured for the last")), qPrintable(notice));
        const auto& rows = w.controller()->history().back()->attention.back().rows;  // snapkv's map
        QVERIFY(!rows[1000]);
        QVERIFY(rows.back());
    }

    void aSlidingWindowIsShownWithTheModel() {
        QTemporaryDir dir;
        MainWindow w;
        w.start(modelWith(dir, {{QStringLiteral("model_type"), QStringLiteral("mistral")},
                                {QStringLiteral("architectures"), QJsonArray{QStringLiteral("MistralForCausalLM")}},
                                {QStringLiteral("sliding_window"), 16}}));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        QCOMPARE(w.controller()->history().back()->slidingWindow, int64_t{16});
        QVERIFY2(w.modelPanel()->slidingWindowText().contains(QStringLiteral("sliding window of 16 tokens")),
                 qPrintable(w.modelPanel()->slidingWindowText()));
    }

    // The real app, killed (SIGKILL) once its autosave exists, then started
    // again: the restore question is open, and for as long as its start-up
    // run and autosave took the first time (twice over, at least 8 s)
    // nothing writes the autosave.
    void aKilledAppsAutosaveWaitsForTheQuestion() {
        QTemporaryDir home;
        const QString autosave = home.filePath(QStringLiteral("data/KVLens/kvlens/autosave.kvlens.json"));
        QProcess app;
        prepareApp(app, home);
        QElapsedTimer timer;
        timer.start();
        app.start();
        QVERIFY(app.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(QFileInfo::exists(autosave), 60000);
        const qint64 firstSave = timer.elapsed();
        app.kill();
        QVERIFY(app.waitForFinished());
        const QByteArray bytes = readAll(autosave);
        const QString before = identity(autosave);
        QVERIFY(bytes.contains("\"prompt\""));

        app.start();
        QVERIFY(app.waitForStarted());
        const qint64 watch = std::max<qint64>(8000, 2 * firstSave);
        timer.restart();
        while (timer.elapsed() < watch) {
            QTest::qWait(200);
            QCOMPARE(app.state(), QProcess::Running);
            QCOMPARE(identity(autosave), before);
        }
        QCOMPARE(readAll(autosave), bytes);
        qInfo("autosave untouched for %lld ms (the first took %lld ms)", static_cast<long long>(watch),
              static_cast<long long>(firstSave));
        app.kill();
        QVERIFY(app.waitForFinished());
    }

    void screenshotFailuresExitWithTheReason() {
        QTemporaryDir home;
        QProcess app;
        prepareApp(app, home);
        const QString shot = home.filePath(QStringLiteral("shot.png"));
        app.setArguments({QStringLiteral("--model"), home.filePath(QStringLiteral("no-such-model")),
                          QStringLiteral("--screenshot"), shot});
        QElapsedTimer timer;
        timer.start();
        app.start();
        QVERIFY(app.waitForFinished(60000));
        QCOMPARE(app.exitStatus(), QProcess::NormalExit);
        QCOMPARE(app.exitCode(), 1);
        QString err = QString::fromLocal8Bit(app.readAllStandardError());
        QVERIFY2(err.contains(QStringLiteral("cannot load the model")) && err.contains(QStringLiteral("no-such-model")),
                 qPrintable(err));
        QVERIFY(!QFileInfo::exists(shot));
        qInfo("a model that cannot load: exit 1 after %lld ms", static_cast<long long>(timer.elapsed()));

        // A model folder whose config.json is a FIFO: one sentence at once (it hung).
        QDir(home.path()).mkdir(QStringLiteral("fifo-model"));
        QVERIFY(::mkfifo(home.filePath(QStringLiteral("fifo-model/config.json")).toLocal8Bit().constData(), 0600) == 0);
        app.setArguments({QStringLiteral("--model"), home.filePath(QStringLiteral("fifo-model")), QStringLiteral("--screenshot"), shot});
        app.start();
        QVERIFY(app.waitForFinished(30000));
        QCOMPARE(app.exitCode(), 1);
        err = QString::fromLocal8Bit(app.readAllStandardError());
        QVERIFY2(err.contains(QStringLiteral("not a regular file (a FIFO)")), qPrintable(err));
        // A lesson step the lesson does not have is named, not clamped (issue 50).
        app.setArguments({QStringLiteral("--lesson"), QStringLiteral("04-layer-budgets"), QStringLiteral("--lesson-step"),
                          QStringLiteral("99"), QStringLiteral("--screenshot"), shot});
        app.start();
        QVERIFY(app.waitForFinished(60000));
        QCOMPARE(app.exitCode(), 1);
        err = QString::fromLocal8Bit(app.readAllStandardError());
        QVERIFY2(err.contains(QStringLiteral("--lesson-step 99: the lesson has 3 steps")), qPrintable(err));
        QVERIFY(!QFileInfo::exists(shot));

        app.setArguments({QStringLiteral("--screenshot"), QStringLiteral("/dev/full")});
        app.start();
        QVERIFY(app.waitForFinished(120000));
        QCOMPARE(app.exitCode(), 1);
        err = QString::fromLocal8Bit(app.readAllStandardError());
        QVERIFY2(err.contains(QStringLiteral("cannot write /dev/full: No space left on device")), qPrintable(err));

        app.setArguments({QStringLiteral("--screenshot"), shot});
        app.start();
        QVERIFY(app.waitForFinished(120000));
        QCOMPARE(app.exitCode(), 0);
        QVERIFY(!QImage(shot).isNull());
    }

    // With no display, --help and --version still answer, and a start says
    // what is missing in one sentence (Qt aborted; issue 50).
    void withoutADisplayHelpAnswersAndAStartSaysWhy() {
        QTemporaryDir home;
        QProcess app;
        prepareApp(app, home);
        QProcessEnvironment env = app.processEnvironment();
        for (const char* name : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) env.remove(QString::fromLatin1(name));
        app.setProcessEnvironment(env);
        app.setArguments({QStringLiteral("--help")});
        app.start();
        QVERIFY(app.waitForFinished(60000));
        QCOMPARE(app.exitStatus(), QProcess::NormalExit);
        QCOMPARE(app.exitCode(), 0);
        const QString help = QString::fromLocal8Bit(app.readAllStandardOutput());
        QVERIFY2(help.contains(QStringLiteral("--screenshot")), qPrintable(help));
        app.setArguments({});
        app.start();
        QVERIFY(app.waitForFinished(60000));
        QCOMPARE(app.exitStatus(), QProcess::NormalExit);
        QCOMPARE(app.exitCode(), 1);
        const QString err = QString::fromLocal8Bit(app.readAllStandardError());
        QVERIFY2(err.startsWith(QStringLiteral("kvlens: there is no display")) && err.count(u'\n') == 1, qPrintable(err));
    }
};

KVLENS_GUI_TEST_MAIN(MainWindowE2eTest)
#include "main_window_e2e_test.moc"
