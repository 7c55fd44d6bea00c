// The File menu's work on the bundled model, through the main window:
// figure/data/export-all files from the GUI, session save → open → the same
// traces, corrupted / future-version / missing-model sessions reported
// without a modal dialog, autosave and its restore after an unclean exit,
// and kvlens-cli export writing the same PNG as the GUI's export. While the
// restore question waits nothing writes the autosave; a failed export says
// why and leaves the old file.
#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QDockWidget>
#include <QImage>
#include <QMessageBox>
#include <QProcess>
#include <QStatusBar>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QComboBox>
#include <QMenu>
#include <QMenuBar>
#include <QListWidget>
#include <QtTest>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>

#include "widgets/memory_view.h"
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "app/gui/file_actions.h"
#include "app/gui/main_window.h"
#include "widgets/budget_editor.h"
#include "widgets/ranking_view.h"
#include "core/io/export_data.h"
#include "core/study/needle_io.h"
#include "core/io/session_file.h"
#include "core/paths.h"
#include "gui_test_main.h"
#include "trace_fixtures.h"
#include "widgets/comparison_view.h"
#include "widgets/export_dialog.h"
#include "widgets/model_panel.h"
#include "widgets/needle_panel.h"
#include "widgets/policy_column.h"
#include "widgets/palette.h"
#include "widgets/policy_list.h"
#include "widgets/prompt_editor.h"
#include "widgets/transport_bar.h"
#include "script_fixture.h"
#include "write_fixtures.h"

using namespace kvlens;
using kvlens::gui::Controller;
using kvlens::gui::FileActions;
using kvlens::gui::MainWindow;

namespace {

const char* const kPrompt = "The code for the red door is 4821. The cat sat on the mat and looked at the garden. "
                            "The code for the red door is";

bool complete(const MainWindow& w) {
    const Controller* c = w.controller();
    return c->modelReady() && !c->busy() && !c->history().empty() &&
           static_cast<int>(c->history().size()) == w.transport()->decodeSteps() + 1;
}

SessionFile exampleSession() {
    SessionFile s;
    s.prompt = kPrompt;
    s.policies = {"snapkv", "h2o"};
    s.budget = "16";
    s.decodeSteps = 3;
    s.view.layer = 2;
    s.view.head = 3;
    s.view.colourScale = "power";
    return s;
}

bool sameFloats(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
    return true;
}

// Tokens, every status and score of every policy, layer and KV head, and the attention maps.
bool sameTraces(const Trace& a, const Trace& b, QString* why) {
    if (a.tokens != b.tokens) return *why = QStringLiteral("tokens differ"), false;
    if (a.policies.size() != b.policies.size()) return *why = QStringLiteral("policy count differs"), false;
    for (size_t p = 0; p < a.policies.size(); ++p) {
        if (a.policies[p].label != b.policies[p].label) return *why = QStringLiteral("labels differ"), false;
        for (size_t l = 0; l < a.policies[p].layers.size(); ++l)
            for (size_t h = 0; h < a.policies[p].layers[l].heads.size(); ++h) {
                const HeadTrace &x = a.policies[p].layers[l].heads[h], &y = b.policies[p].layers[l].heads[h];
                if (x.status != y.status || !sameFloats(x.score, y.score))
                    return *why = QStringLiteral("policy %1 layer %2 head %3 differs").arg(p).arg(l).arg(h), false;
            }
    }
    if (a.attention.size() != b.attention.size()) return *why = QStringLiteral("attention count differs"), false;
    for (size_t i = 0; i < a.attention.size(); ++i)
        if (!sameFloats(a.attention[i].dense(), b.attention[i].dense()))
            return *why = QStringLiteral("attention %1 differs").arg(i), false;
    return true;
}

// The submenu `title` of one of the window's menus, null if none.
QMenu* submenu(MainWindow& w, const QString& title) {
    for (QAction* top : w.menuBar()->actions())
        if (top->menu())
            for (QAction* a : top->menu()->actions())
                if (a->menu() && a->text() == title) return a->menu();
    return nullptr;
}

struct Reported {
    QStringList titles, texts;
};

// A window on the bundled model with its messages and autosave kept in `dir`.
void prepare(MainWindow& w, const QTemporaryDir& dir, Reported* reported) {
    w.files()->setReporter([reported](const QString& title, const QString& text) {
        reported->titles << title;
        reported->texts << text;
    });
    w.files()->setAutosaveFile(dir.filePath(QStringLiteral("autosave.kvlens.json")));
    w.files()->setRestoreDecider([](const QString&) { return false; });
}

// prepare(), then start on the bundled model and wait for its first run (false after 60 s).
bool startOnBundledModel(MainWindow& w, const QTemporaryDir& dir, Reported* reported) {
    prepare(w, dir, reported);
    w.start(QString());
    return QTest::qWaitFor([&w] { return complete(w); }, 60000);
}

QString writeText(const QString& file, const std::string& text) {
    std::ofstream(file.toStdString()) << text;
    return file;
}

// startOnBundledModel(), then exampleSession() opened and run.
bool startOnExample(MainWindow& w, const QTemporaryDir& dir, Reported* reported) {
    if (!startOnBundledModel(w, dir, reported)) return false;
    if (!w.files()->openSession(writeText(dir.filePath(QStringLiteral("s.json")), sessionToJson(exampleSession()).dump())))
        return false;
    return QTest::qWaitFor([&w] { return complete(w) && w.controller()->lastRequest().layer == 2; }, 60000);
}

// An autosave left by a run that was killed: `session` in dir's autosave
// file and the clean-exit flag down. Returns the file's bytes.
QByteArray leaveAutosave(const QTemporaryDir& dir, const SessionFile& session) {
    const QString file = writeText(dir.filePath(QStringLiteral("autosave.kvlens.json")), sessionToJson(session).dump(1));
    gui::Settings().cleanExit.set(false);
    return test::readAll(file);
}

// prepare(), but the restore question is the real non-modal box.
QMessageBox* startWithTheRestoreQuestion(MainWindow& w, const QTemporaryDir& dir, Reported* reported) {
    prepare(w, dir, reported);
    w.files()->setRestoreDecider({});
    w.files()->setAutosaveDelay(50);
    w.start(QString());
    for (QMessageBox* box : w.findChildren<QMessageBox*>())
        if (box->windowTitle() == QLatin1String("Restore the last session?")) return box;
    return nullptr;
}

SessionFile autosavedSession() {
    SessionFile s = exampleSession();
    s.prompt = "the cat sat on the mat . the code for the blue door is 7 7 1 2 .";
    return s;
}

}  // namespace

class FileActionsTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void sessionSaveOpenReproducesTraces() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        const QString file = dir.filePath(QStringLiteral("a.kvlens.json"));
        QVERIFY(w.files()->openSession(writeText(file, sessionToJson(exampleSession()).dump())));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().layer == 2, 60000);
        QCOMPARE(w.comparison()->selectedHead(), int64_t{3});
        const auto before = w.controller()->history().back();
        QCOMPARE(before->policies.size(), size_t{3});
        QCOMPARE(before->step, int64_t{3});

        const QString saved = dir.filePath(QStringLiteral("saved.kvlens.json"));
        QVERIFY(w.files()->saveSession(saved));
        QCOMPARE(w.files()->recentSessions().value(0), QFileInfo(saved).absoluteFilePath());
        const SessionFile s = loadSession(saved.toStdString());
        QCOMPARE(s.prompt, std::string(kPrompt));
        QCOMPARE(s.policies, (std::vector<std::string>{"snapkv", "h2o"}));
        QCOMPARE(s.colours, (std::vector<int>{0, 1}));
        QCOMPARE(s.budget, std::string("16"));
        QVERIFY(s.modelDir.empty());  // the bundled model
        QVERIFY(!s.modelFingerprint.empty());

        // Change everything, then open the saved session: the same traces.
        w.promptEditor()->setText(QStringLiteral("something else entirely"));
        w.comparison()->setSelection(0, 1);
        w.controller()->setSelection(0, 1);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().layer == 0, 60000);
        QVERIFY(w.files()->openSession(saved));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().layer == 2 &&
                                     w.controller()->lastRequest().prompt == QLatin1String(kPrompt),
                                 60000);
        QString why;
        QVERIFY2(sameTraces(*before, *w.controller()->history().back(), &why), qPrintable(why));
        QVERIFY(reported.texts.isEmpty());
        // Colours come back with the session: h2o keeps slot 1 though it is now the only policy.
        SessionFile alone = s;
        alone.policies = {"h2o"};
        alone.colours = {1};
        const QString one = dir.filePath(QStringLiteral("one.kvlens.json"));
        QVERIFY(w.files()->openSession(writeText(one, sessionToJson(alone).dump())));
        QCOMPARE(w.policyList()->colourSlots(), std::vector<int>{1});
        QCOMPARE(w.policyList()->list()->item(0)->foreground().color(), ui::slotColour(1));
        // A percent budget is shown as one in B and saved as one (it showed 64
        // and saved "64"); the Budget dock's chosen run travels too.
        SessionFile share = s;
        share.budget = "25%";
        share.view.budgetRun = "h2o";
        share.view.rankBy = "kv_mean";
        const QString quarter = dir.filePath(QStringLiteral("quarter.kvlens.json"));
        QVERIFY(w.files()->openSession(writeText(quarter, sessionToJson(share).dump())));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().budget.kind == BudgetSpec::Kind::Ratio, 60000);
        QCOMPARE(w.controller()->lastRequest().budget.value, 25.0);
        QCOMPARE(w.budgetEditor()->findChild<QSpinBox*>()->text(), QStringLiteral("25%"));
        QTRY_COMPARE(w.budgetEditor()->shownRun(), QStringLiteral("h2o"));
        // The Ranking dock in the session's order: the least memory held first.
        QCOMPARE(w.rankingView()->sortKey(), QStringLiteral("kv_mean"));
        QTableWidget* ranked = w.rankingView()->table();
        for (int r = 1; r < ranked->rowCount(); ++r)
            QVERIFY(ranked->item(r - 1, 7)->data(Qt::UserRole).toDouble() <= ranked->item(r, 7)->data(Qt::UserRole).toDouble());
        const QString again = dir.filePath(QStringLiteral("again.kvlens.json"));
        QVERIFY(w.files()->saveSession(again));
        QCOMPARE(loadSession(again.toStdString()).budget, std::string("25%"));
        QCOMPARE(loadSession(again.toStdString()).view.budgetRun, std::string("h2o"));
        QCOMPARE(loadSession(again.toStdString()).view.rankBy, std::string("kv_mean"));
    }

    // The title names the session and marks unsaved changes; closing the
    // window or opening another session asks Save / Discard / Cancel.
    void titleMarksUnsavedChangesAndAsksBeforeLosingThem() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        QCOMPARE(w.windowTitle(), QStringLiteral("Untitled[*] — KVLens"));
        QVERIFY(!w.isWindowModified());
        QStringList asked;
        int answer = QMessageBox::Cancel;
        w.files()->setUnsavedDecider([&](const QString& name) { return asked << name, answer; });
        QVERIFY(w.close());  // nothing changed: nothing asked
        QVERIFY(asked.isEmpty());

        QVERIFY(!w.promptEditor()->exampleName().isEmpty());  // the start-up example
        // Help: every shortcut of the menus, and the versions.
        const QString keys = w.shortcutsText();
        QVERIFY2(keys.contains(QStringLiteral("Save session")) && keys.contains(QStringLiteral("F5")), qPrintable(keys));
        const QString about = w.aboutText();
        QVERIFY2(about.contains(QLatin1String(qVersion())) && about.contains(QStringLiteral("LibTorch ")), qPrintable(about));
        QVERIFY(!w.guideText().isEmpty());
        const QString edit = QStringLiteral("an edit that is not saved yet .");
        w.promptEditor()->setText(edit);
        QVERIFY(w.promptEditor()->exampleName().isEmpty());  // no longer that example
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == edit, 60000);
        QVERIFY(w.isWindowModified());
        // Cancel keeps the window and the edit.
        QVERIFY(!w.close());
        QCOMPARE(asked, QStringList{QStringLiteral("Untitled")});
        QCOMPARE(w.promptEditor()->text(), edit);

        // Saved: named after the file, unmodified; an edit marks it again.
        const QString file = dir.filePath(QStringLiteral("mine.kvlens.json"));
        QVERIFY(w.files()->saveSession(file));
        QCOMPARE(w.windowTitle(), QStringLiteral("mine.kvlens.json[*] — KVLens"));
        QVERIFY(!w.isWindowModified());
        const QString second = QStringLiteral("a second edit .");
        w.promptEditor()->setText(second);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == second, 60000);
        QVERIFY(w.isWindowModified());
        // Undoing it by hand is no change.
        w.promptEditor()->setText(edit);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == edit, 60000);
        QVERIFY(!w.isWindowModified());
        w.promptEditor()->setText(second);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == second, 60000);

        // Opening a workshop session: Cancel opens nothing, Save writes the
        // file first, and the workshop session names the window.
        QMenu* workshop = submenu(w, QStringLiteral("Workshop sessions"));
        QVERIFY(workshop);
        QAction* sinks = nullptr;
        for (QAction* s : workshop->actions())
            if (s->text() == QLatin1String("attention sinks")) sinks = s;
        QVERIFY(sinks);
        asked.clear();
        sinks->trigger();
        QCOMPARE(asked, QStringList{QStringLiteral("mine.kvlens.json")});
        QCOMPARE(w.promptEditor()->text(), second);
        answer = QMessageBox::Save;
        sinks->trigger();
        QCOMPARE(loadSession(file.toStdString()).prompt, second.toStdString());
        QVERIFY(w.promptEditor()->text() != second);
        QCOMPARE(w.windowTitle(), QStringLiteral("attention sinks[*] — KVLens"));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        QVERIFY(!w.isWindowModified());
        QVERIFY(w.close());
        QCOMPARE(asked.size(), 2);
        QVERIFY2(reported.texts.isEmpty(), qPrintable(reported.texts.join(u'\n')));
    }

    // File > Workshop sessions lists the shipped sessions; one opens like a
    // saved session, without becoming the file Save writes or a recent one.
    void workshopSessionsOpenFromTheFileMenu() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        QMenu* workshop = submenu(w, QStringLiteral("Workshop sessions"));
        QVERIFY(workshop);
        QStringList titles;
        QAction* needle = nullptr;
        for (QAction* a : workshop->actions()) {
            titles << a->text();
            if (a->text() == QLatin1String("needle snapkv vs streaming")) needle = a;
        }
        QCOMPARE(titles, (QStringList{QStringLiteral("attention sinks"), QStringLiteral("needle snapkv vs streaming"),
                                      QStringLiteral("pyramidkv layer budgets"), QStringLiteral("gqa grouping")}));
        QVERIFY(needle);
        needle->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().layer == 1, 60000);
        QCOMPARE(w.comparison()->selectedHead(), int64_t{2});
        QCOMPARE(w.controller()->history().back()->policies.size(), size_t{4});  // full + 3
        QVERIFY(w.files()->currentFile().isEmpty());
        QVERIFY(!w.files()->recentSessions().join(u';').contains(QLatin1String("needle-snapkv")));
        QVERIFY2(reported.texts.isEmpty(), qPrintable(reported.texts.join(u'\n')));
    }

    void badSessionsReportAndChangeNothing() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        const QString prompt = w.promptEditor()->text();

        QVERIFY(!w.files()->openSession(writeText(dir.filePath(QStringLiteral("bad.json")), "{\"format\": \"kvlens-se")));
        QCOMPARE(reported.texts.size(), 1);
        QVERIFY2(reported.texts[0].contains(QStringLiteral("bad.json")), qPrintable(reported.texts[0]));

        nlohmann::json future = sessionToJson(exampleSession());
        future["version"] = SessionFile::kVersion + 1;
        QVERIFY(!w.files()->openSession(writeText(dir.filePath(QStringLiteral("future.json")), future.dump())));
        QCOMPARE(reported.texts.size(), 2);
        QVERIFY2(reported.texts[1].contains(QStringLiteral("version")) && reported.texts[1].contains(QStringLiteral("newer")),
                 qPrintable(reported.texts[1]));

        SessionFile missing = exampleSession();
        missing.modelDir = "/nonexistent/model-dir";
        QVERIFY(!w.files()->openSession(writeText(dir.filePath(QStringLiteral("missing.json")), sessionToJson(missing).dump())));
        QCOMPARE(reported.texts.size(), 3);
        QVERIFY2(reported.texts[2].contains(QStringLiteral("/nonexistent/model-dir")), qPrintable(reported.texts[2]));
        QVERIFY(reported.titles.contains(QStringLiteral("Cannot open the session")));

        QCOMPARE(w.promptEditor()->text(), prompt);  // nothing changed
        QCOMPARE(w.files()->currentFile(), QString());
    }

    // The bad-input suite through the window (tests/robustness has the core
    // side): a broken model folder, the model folder deleted while in use,
    // sessions the fuzzer broke and out-of-range budgets. Every case reports
    // or notes, and the window goes on running edits.
    // File > Import llama2.c model: stories260K (read in place from
    // ../shared/data) becomes a folder the window opens and runs on; a
    // foreign tokenizer is refused with the file named and the model in use kept.
    void importsALlama2cModelAndOpensIt() {
        const QString data = QStringLiteral(KVLENS_SHARED_DATA);
        if (!QFileInfo::exists(data + "/stories260K/stories260K.bin")) QSKIP("no ../shared/data");
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        const QString inUse = w.modelPanel()->directory();
        const QString bad = w.importLlama2c(data + "/stories260K/stories260K.bin", data + "/llama2c/tokenizer.bin",
                                            dir.filePath(QStringLiteral("wrong")));
        QVERIFY2(bad.contains(QStringLiteral("tokenizer.bin")), qPrintable(bad));
        QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("wrong"))));
        QCOMPARE(w.modelPanel()->directory(), inUse);

        QSignalSpy loaded(w.controller(), &Controller::modelLoaded);
        const QString out = dir.filePath(QStringLiteral("stories260K"));
        QCOMPARE(w.importLlama2c(data + "/stories260K/stories260K.bin", data + "/stories260K/tok512.bin", out), QString());
        QVERIFY(loaded.wait(30000));
        const auto summary = loaded.at(0).at(0).value<kvlens::ModelSummary>();
        QCOMPARE(summary.layers, int64_t{5});
        QCOMPARE(summary.heads, int64_t{8});
        QCOMPARE(summary.kvHeads, int64_t{4});
        QCOMPARE(w.modelPanel()->directory(), out);
        w.promptEditor()->setText(QStringLiteral("Once upon a time, there was a little girl named Lily."));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt.startsWith("Once upon"), 60000);
    }

    // The KV memory dock's what-ifs: the bundled model's 2 KV heads merged to 1, and its layers sharing KV in pairs.
    void memoryDockRunsTheKvSharingWhatIfs() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        kvlens::ui::MemoryView* m = w.memoryView();
        QCOMPARE(m->table()->rowCount(), 6);  // MHA, GQA (the model's), MQA, CLA k=2 and k=3, YOCO
        QCOMPARE(m->whatIfValue()->maximum(), 2);
        m->whatIfValue()->setValue(1);
        m->whatIfButton()->click();
        QTRY_VERIFY_WITH_TIMEOUT(m->whatIfText().startsWith(QStringLiteral("KV heads merged 2 → 1")), 60000);
        QVERIFY2(m->whatIfText().contains(QStringLiteral("mean KL")), qPrintable(m->whatIfText()));
        // The needle probes of both models: the bundled model as trained finds every needle at 256 tokens.
        QVERIFY2(m->whatIfText().contains(QStringLiteral("needle exact match (full cache, 6 probes) 100 % as trained")),
                 qPrintable(m->whatIfText()));
        // Layers sharing KV (CLA): up to the model's 3 layers, from 2.
        m->whatIfKind()->setCurrentIndex(1);
        QCOMPARE(m->whatIfValue()->maximum(), 3);
        QCOMPARE(m->whatIfValue()->value(), 2);
        m->whatIfButton()->click();
        QTRY_VERIFY_WITH_TIMEOUT(m->whatIfText().startsWith(QStringLiteral("every 2 layers read the first one's K/V")),
                                 60000);
        QVERIFY2(m->whatIfText().contains(QStringLiteral("2 of 3 layers compute K/V")), qPrintable(m->whatIfText()));
        if (qEnvironmentVariableIsSet("KVLENS_SCREENSHOT_DIR")) {  // to look at
            w.findChild<QDockWidget*>(QStringLiteral("memory"))->raise();
            w.resize(1400, 900);
            QTest::qWait(500);
            w.grab().save(qEnvironmentVariable("KVLENS_SCREENSHOT_DIR") + QStringLiteral("/memory-dock.png"));
        }
    }

    void badInputsLeaveTheWindowWorking() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        prepare(w, dir, &reported);
        // A copy of the bundled model: the window runs on it, then it is deleted.
        const QString copy = dir.filePath(QStringLiteral("model"));
        QVERIFY(QDir().mkpath(copy));
        for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
            QVERIFY(QFile::copy(QString::fromStdString((bundledModelDir() / f).string()), copy + "/" + f));
        w.start(copy);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        QVERIFY(QDir(copy).removeRecursively());
        w.promptEditor()->setText(QStringLiteral("the model folder is gone but the model is loaded"));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt.startsWith("the model folder"), 60000);
        QVERIFY(w.files()->saveSession(dir.filePath(QStringLiteral("after-delete.kvlens.json"))));

        // A truncated model: refused with the file named; the loaded model stays.
        const QString broken = dir.filePath(QStringLiteral("broken"));
        QVERIFY(QDir().mkpath(broken));
        QVERIFY(QFile::copy(QString::fromStdString((bundledModelDir() / "config.json").string()), broken + "/config.json"));
        QFile weights(broken + "/model.safetensors");
        QVERIFY(weights.open(QIODevice::WriteOnly));
        weights.write(QByteArray(100, '\x7f'));
        weights.close();
        QSignalSpy failed(w.controller(), &Controller::modelFailed);
        const QString inUse = w.modelPanel()->directory();
        w.modelPanel()->setDirectory(broken);  // as typed by the user
        w.controller()->loadModel(broken, RunSettings{});
        QVERIFY(failed.wait(30000));
        QVERIFY2(failed.at(0).at(0).toString().contains(QStringLiteral("model.safetensors")),
                 qPrintable(failed.at(0).at(0).toString()));
        QVERIFY(w.controller()->modelReady());
        // The panel and the status bar say what failed and what is still in use.
        QCOMPARE(w.modelPanel()->directory(), inUse);
        const QString failure = w.modelPanel()->failureText();
        QVERIFY2(failure.contains(broken) && failure.contains(QStringLiteral("Still in use: ") + inUse), qPrintable(failure));
        QVERIFY2(w.statusBar()->currentMessage().startsWith(QStringLiteral("The model did not load; still using")),
                 qPrintable(w.statusBar()->currentMessage()));
        w.promptEditor()->setText(QStringLiteral("still running on the model that loaded"));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt.startsWith("still running"), 60000);

        // Sessions: a "format" that is not a string (tests/fuzz found it) and
        // an unknown policy are reported; a budget of 0 opens, clamped, with
        // the note in the policy's column header.
        const int before = reported.texts.size();
        QVERIFY(!w.files()->openSession(writeText(dir.filePath(QStringLiteral("fuzzed.json")), "{\"format\": 99999999999}")));
        QVERIFY2(reported.texts.value(before).contains(QStringLiteral("not a KVLens session")),
                 qPrintable(reported.texts.value(before)));
        SessionFile unknown = exampleSession();
        unknown.policies = {"nosuch"};
        QVERIFY(!w.files()->openSession(writeText(dir.filePath(QStringLiteral("unknown.json")), sessionToJson(unknown).dump())));
        QVERIFY2(reported.texts.value(before + 1).contains(QStringLiteral("nosuch")), qPrintable(reported.texts.value(before + 1)));
        // A saved budget of zero or less, or a view outside the model, is
        // refused naming the field (it opened as B = 1, or kept the old
        // results; issue 50); above 100% opens clamped, with the note.
        for (const auto& [field, edit] : std::vector<std::pair<QString, std::function<void(SessionFile&)>>>{
                 {QStringLiteral("\"budget\": '-5' holds a budget of zero or less"), [](SessionFile& f) { f.budget = "-5"; }},
                 {QStringLiteral("\"budget\": '0'"), [](SessionFile& f) { f.budget = "0"; }},
                 {QStringLiteral("\"budgets\": '4,0'"), [](SessionFile& f) { f.budgets = "4,0"; }},
                 {QStringLiteral("\"view.layer\" is 99: the model has"), [](SessionFile& f) { f.view.layer = 99; }},
                 {QStringLiteral("\"view.head\" is 40: the model has"), [](SessionFile& f) { f.view.head = 40; }}}) {
            SessionFile bad = exampleSession();
            bad.policies = {"h2o"};
            edit(bad);
            const int reports = reported.texts.size();
            QVERIFY(!w.files()->openSession(writeText(dir.filePath(QStringLiteral("bad.json")), sessionToJson(bad).dump())));
            QVERIFY2(reported.texts.value(reports).contains(field), qPrintable(reported.texts.value(reports)));
        }
        SessionFile above = exampleSession();
        above.policies = {"h2o"};
        above.budget = "150%";
        QVERIFY(w.files()->openSession(writeText(dir.filePath(QStringLiteral("above.json")), sessionToJson(above).dump())));
        const QString status = w.statusBar()->currentMessage();
        QVERIFY2(status.contains(QStringLiteral("budget 150% clamped to 100%")), qPrintable(status));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == QLatin1String(kPrompt), 60000);
    }

    // Issue 20: a TorchScript scorer added from a file runs as a column,
    // is saved in the session by path with its fingerprint, and a session
    // whose scorer changed since says so when opened; a bad file says why
    // and changes nothing.
    void aScorerFromAFileRunsAndIsSaved() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnExample(w, dir, &reported));
        const QString scorer = dir.filePath(QStringLiteral("lownorm.pt"));
        test::writeScorer(scorer.toStdString(), "-(keys * keys).sum(-1)");
        const QString bad = writeText(dir.filePath(QStringLiteral("bad.pt")), "not a module");
        const QString error = w.policyList()->addPolicyFromFile(bad);
        QVERIFY2(error.contains(QStringLiteral("is not a TorchScript module")), qPrintable(error));
        QCOMPARE(w.policyList()->policies().size(), size_t{2});
        QCOMPARE(w.policyList()->addPolicyFromFile(scorer), QString());
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.comparison()->columnCount() == 4, 60000);
        QVERIFY2(w.comparison()->column(3)->headerText().contains(QStringLiteral("script-lownorm")),
                 qPrintable(w.comparison()->column(3)->headerText()));
        const auto trace = w.controller()->shownTrace();
        QVERIFY(trace->policies[3].bytesHeld < trace->policies[0].bytesHeld);  // it evicted
        const QString saved = dir.filePath(QStringLiteral("with-scorer.kvlens.json"));
        QVERIFY(w.files()->saveSession(saved));
        const SessionFile s = loadSession(saved.toStdString());
        const std::string path = QFileInfo(scorer).absoluteFilePath().toStdString();
        QCOMPARE(s.policies.back(), "script:" + path);
        QVERIFY(s.scripts.count(path) && s.scripts.at(path).rfind("fnv1a64:", 0) == 0);
        // The scorer changes on disk: opening the session runs it and says so.
        test::writeScorer(scorer.toStdString(), "(keys * keys).sum(-1)");
        QVERIFY(w.files()->openSession(saved));
        const QString status = w.statusBar()->currentMessage();
        QVERIFY2(status.contains(QStringLiteral("lownorm.pt changed since this session was saved")), qPrintable(status));
        QVERIFY2(reported.texts.isEmpty(), qPrintable(reported.texts.join(QLatin1Char('\n'))));
    }

    // Issue 21 item 13: one export dialog — run, what, format, size in mm or
    // px, text size, resolution, the file — with a preview drawn as the file
    // will be; nothing covers its fields; its choice writes that file.
    void oneExportDialogWithAPreview() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnExample(w, dir, &reported));
        auto source = w.files()->exportSource();
        QVERIFY(source);
        source->folder = dir.path();
        ui::ExportChoice initial;
        initial.run = 1;
        ui::ExportDialog d(*source, initial, &w);
        d.show();
        QVERIFY(QTest::qWaitForWindowExposed(&d));
        // No field lies over another (a stray spin box covered the run once).
        QList<QWidget*> fields;
        for (QWidget* f : d.findChildren<QWidget*>())
            if (f->isVisible() && (qobject_cast<QComboBox*>(f) || qobject_cast<QAbstractSpinBox*>(f) || qobject_cast<QLineEdit*>(f)))
                fields << f;
        QVERIFY(fields.size() >= 8);
        for (QWidget* a : fields)
            for (QWidget* b : fields)
                if (a != b && !a->isAncestorOf(b) && !b->isAncestorOf(a))  // a spin box's own line edit
                    QVERIFY2(!QRect(a->mapTo(&d, QPoint(0, 0)), a->size()).intersects(QRect(b->mapTo(&d, QPoint(0, 0)), b->size())),
                             qPrintable(a->metaObject()->className() + QStringLiteral(" over ") + b->metaObject()->className()));
        // The default name says what the file shows; the preview is the figure.
        QVERIFY2(QFileInfo(d.pathEdit()->text()).fileName().startsWith(w.files()->describedName(1)), qPrintable(d.pathEdit()->text()));
        QVERIFY(d.pathEdit()->text().endsWith(QStringLiteral(".png")));
        const QImage before = d.previewImage();
        QVERIFY(!before.isNull() && before.width() > 100);
        QVERIFY(before.pixelColor(before.width() / 2, before.height() / 2) != QColor(Qt::white));
        d.textBox()->setValue(13);
        QVERIFY(d.previewImage() != before);  // larger text, drawn
        // Size: the figure's own in mm; in px at 144 dpi, two pixels a point.
        QCOMPARE(d.unitBox()->currentText(), QStringLiteral("mm"));
        const QSizeF natural = d.choice().size;
        QVERIFY(natural.width() > 100);
        QCOMPARE(d.widthBox()->value(), std::round(natural.width() * 25.4 / 72 * 10) / 10);
        d.unitBox()->setCurrentText(QStringLiteral("px"));
        QCOMPARE(d.widthBox()->value(), std::round(natural.width() * 2));
        d.unitBox()->setCurrentText(QStringLiteral("mm"));
        d.widthBox()->setValue(80);
        d.heightBox()->setValue(60);
        d.dpiBox()->setValue(300);
        const QString png = dir.filePath(QStringLiteral("fig.png"));
        d.pathEdit()->setText(png);
        Q_EMIT d.pathEdit()->textEdited(png);
        QCOMPARE(w.files()->runExport(d.choice()), QString());
        const QImage img(png);
        QVERIFY(!img.isNull());
        QVERIFY2(std::abs(img.width() - 945) <= 1 && std::abs(img.height() - 709) <= 1,
                 qPrintable(QStringLiteral("%1 x %2").arg(img.width()).arg(img.height())));
        QVERIFY(std::abs(img.dotsPerMeterX() - 300 / 0.0254) < 2);
        // Another format keeps the chosen name; a vector file has the size in points.
        d.formatBox()->setCurrentText(QStringLiteral("svg"));
        QCOMPARE(d.pathEdit()->text(), dir.filePath(QStringLiteral("fig.svg")));
        QCOMPARE(w.files()->runExport(d.choice()), QString());
        QSvgRenderer svg(dir.filePath(QStringLiteral("fig.svg")));
        QVERIFY(svg.isValid());
        QVERIFY(std::abs(svg.viewBoxF().width() - 80 * 72 / 25.4) < 1);
        // Data: the table's first lines, metadata header first; .npy says what it holds.
        d.formatBox()->setCurrentText(QStringLiteral("csv"));
        QVERIFY(!d.widthBox()->isEnabled());
        QVERIFY2(d.previewText().startsWith(QStringLiteral("# ")), qPrintable(d.previewText()));
        d.contentBox()->setCurrentText(QStringLiteral("status"));
        QVERIFY(d.previewText().contains(QStringLiteral("status")));
        d.formatBox()->setCurrentText(QStringLiteral("npy"));
        QVERIFY2(d.previewText().contains(QStringLiteral("attention matrix")), qPrintable(d.previewText()));
        // Every run: a folder of files and a grid.
        d.formatBox()->setCurrentText(QStringLiteral("png"));
        d.scopeBox()->setCurrentIndex(static_cast<int>(ui::ExportScope::EveryRun));
        QVERIFY(!d.runBox()->isEnabled());
        ui::ExportChoice all = d.choice();
        all.path = dir.filePath(QStringLiteral("runs"));
        QCOMPARE(w.files()->runExport(all), QString());
        QVERIFY(QFileInfo::exists(dir.filePath(QStringLiteral("runs/grid.png"))));
        QCOMPARE(QDir(dir.filePath(QStringLiteral("runs"))).entryList({QStringLiteral("*.png")}).size(), 4);  // 3 runs + grid
        d.close();

        // Through the menu it is the one dialog: Export, and the file is there, no second question.
        const QString viaMenu = dir.filePath(QStringLiteral("menu.pdf"));
        bool seen = false;
        QTimer::singleShot(200, &w, [&] {
            auto* dialog = qobject_cast<ui::ExportDialog*>(QApplication::activeModalWidget());
            if (!dialog) return;
            seen = true;
            dialog->formatBox()->setCurrentText(QStringLiteral("pdf"));
            dialog->pathEdit()->setText(viaMenu);
            dialog->accept();
        });
        QAction* action = nullptr;
        for (QAction* a : w.findChildren<QAction*>())
            if (a->text() == QStringLiteral("&Export figure…")) action = a;
        QVERIFY(action);
        action->trigger();
        QVERIFY(seen);
        QVERIFY(QFileInfo::exists(viaMenu));
        QVERIFY(QApplication::activeModalWidget() == nullptr);
        QVERIFY2(reported.texts.isEmpty(), qPrintable(reported.texts.join(QLatin1Char('\n'))));
    }

    void exportsFromTheGuiAreValidAndRoundTrip() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnExample(w, dir, &reported));
        const auto trace = w.controller()->shownTrace();

        const QString png = dir.filePath(QStringLiteral("f.png")), svg = dir.filePath(QStringLiteral("f.svg")),
                      pdf = dir.filePath(QStringLiteral("f.pdf"));
        QCOMPARE(w.files()->exportFigure(png, 2, 1), QString());
        QCOMPARE(w.files()->exportFigure(svg, 2, 1), QString());
        QCOMPARE(w.files()->exportFigure(pdf, 2, 1), QString());
        QImage img(png);
        QVERIFY(img.width() > 600 && img.height() > 600);
        QVERIFY(img.pixel(img.width() / 2, img.height() / 2) != img.pixel(5, 5));
        QSvgRenderer r(svg);
        QVERIFY(r.isValid());
        QFile sf(svg);
        QVERIFY(sf.open(QIODevice::ReadOnly));
        QVERIFY(sf.readAll().contains("snapkv"));
        QFile pf(pdf);
        QVERIFY(pf.open(QIODevice::ReadOnly));
        const QByteArray pdfBytes = pf.readAll();
        QVERIFY(pdfBytes.startsWith("%PDF") && pdfBytes.contains("/Type /Page"));
        QCOMPARE(w.files()->exportFigure(dir.filePath(QStringLiteral("st.png")), 1, 1, true), QString());
        QCOMPARE(w.files()->exportFigure(dir.filePath(QStringLiteral("all.png")), 1, -1), QString());

        // Data: the attention JSON and the status CSV hold the trace's numbers.
        const QString json = dir.filePath(QStringLiteral("a.json")), csv = dir.filePath(QStringLiteral("s.csv"));
        QCOMPARE(w.files()->exportData(json, ExportTable::Attention, 1), QString());
        QCOMPARE(w.files()->exportData(csv, ExportTable::Status, 1), QString());
        // The dialogs' default name says what the file shows (model, run, budget, layer, head, step).
        QVERIFY2(w.files()->describedName(1).startsWith(QStringLiteral("kvlens-tiny_snapkv_b")) &&
                     w.files()->describedName(1).contains(QStringLiteral("_L02_H03_s")),
                 qPrintable(w.files()->describedName(1)));
        std::ifstream in(json.toStdString());
        const nlohmann::json j = nlohmann::json::parse(in);
        QCOMPARE(j.at("format").get<std::string>(), std::string("kvlens-export"));
        const auto& rows = j.at("rows");
        const AttentionMap& map = trace->attention[1];
        QCOMPARE(static_cast<int64_t>(rows.size()), map.size);
        int compared = 0;
        for (int64_t q = 0; q < map.size; ++q)
            for (int64_t k = 0; k <= q; ++k) {
                const auto& cell = rows[static_cast<size_t>(q)][static_cast<size_t>(2 + k)];  // position, token, keys…
                const float v = map.at(q, k);
                if (std::isnan(v)) {
                    QVERIFY(cell.is_null());
                } else {
                    QVERIFY(std::abs(cell.get<double>() - v) <= 1e-6 * std::max(1.0f, std::abs(v)));
                    ++compared;
                }
            }
        QVERIFY(compared > 100);
        QFile cf(csv);
        QVERIFY(cf.open(QIODevice::ReadOnly));
        const QStringList all = QString::fromUtf8(cf.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QVERIFY(all.value(0).startsWith(QStringLiteral("# kvlens-export v1 · table status")));  // metadata first
        const QStringList lines = all.filter(QRegularExpression(QStringLiteral("^(?!# )")));
        QCOMPARE(static_cast<size_t>(lines.size() - 1), trace->tokens.size());
        const auto& head = trace->policies[1].layers[2].heads[3 / 2];
        int evicted = 0;
        for (size_t i = 0; i < head.status.size(); ++i) evicted += head.status[i] == TokenStatus::Evicted;
        QCOMPARE(static_cast<int>(lines.filter(QRegularExpression(QStringLiteral(",\"?evicted\"?,"))).size()), evicted);

        QStringList written;
        QCOMPARE(w.files()->exportAll(dir.filePath(QStringLiteral("all")), QStringLiteral("png"), &written), QString());
        QCOMPARE(written.size(), 4);  // full, snapkv, h2o and the grid
        for (const char* name : {"full_L02_H03.png", "snapkv_L02_H03.png", "h2o_L02_H03.png", "grid.png"})
            QVERIFY2(!QImage(dir.filePath(QStringLiteral("all/") + QLatin1String(name))).isNull(), name);
        QVERIFY(reported.texts.isEmpty());

        // Every layer × head of snapkv, re-run by the worker: 3 × 4 files and the grid.
        QSignalSpy finished(w.files(), &FileActions::exportFinished);
        w.files()->exportLayersHeads(dir.filePath(QStringLiteral("heads")), QStringLiteral("png"), 1, true);
        QVERIFY(finished.wait(120000));
        QCOMPARE(finished.last().at(0).toString(), QString());
        QCOMPARE(finished.last().at(1).toStringList().size(), 3 * 4 + 1);
        const QImage l2h3(dir.filePath(QStringLiteral("heads/snapkv_L02_H03.png")));
        QVERIFY(!l2h3.isNull());
        QVERIFY(l2h3 != QImage(dir.filePath(QStringLiteral("heads/snapkv_L00_H00.png"))));
        QVERIFY(!QImage(dir.filePath(QStringLiteral("heads/grid.png"))).isNull());
    }

    void needleGridExportsAsAFigureAndData() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        prepare(w, dir, &reported);
        QVERIFY(!w.files()->exportNeedle(dir.filePath(QStringLiteral("n.png")), 1).isEmpty());  // no grid yet
        const auto grid = test::makeNeedleGrid({256, 512}, {0.0, 0.5, 1.0});
        w.needlePanel()->setResult(grid);
        const QString png = dir.filePath(QStringLiteral("n.png")), pdf = dir.filePath(QStringLiteral("n.pdf")),
                      json = dir.filePath(QStringLiteral("n.json"));
        QCOMPARE(w.files()->exportNeedle(png, 2), QString());
        QCOMPARE(w.files()->exportNeedle(pdf, 2), QString());
        QCOMPARE(w.files()->exportNeedle(json, 2), QString());
        const QImage img(png);
        QVERIFY(!img.isNull() && img.width() >= 700);
        std::set<QRgb> colours;
        for (int y = 0; y < img.height(); y += 3)
            for (int x = 0; x < img.width(); x += 3) colours.insert(img.pixel(x, y));
        QVERIFY(colours.size() > 10);
        QFile pf(pdf);
        QVERIFY(pf.open(QIODevice::ReadOnly) && pf.readAll().contains("/Type /Page"));
        std::ifstream in(json.toStdString());
        QCOMPARE(needleGridFromJson(nlohmann::json::parse(in)).cells.size(), grid->cells.size());
    }

    void cliExportIsTheSamePngAsTheGui() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        const QString session = writeText(dir.filePath(QStringLiteral("s.kvlens.json")), sessionToJson(exampleSession()).dump());
        QVERIFY(w.files()->openSession(session));
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().layer == 2, 60000);
        const QString gui = dir.filePath(QStringLiteral("gui.png")), cli = dir.filePath(QStringLiteral("cli.png"));
        QCOMPARE(w.files()->exportFigure(gui, 1.5, 1), QString());

        QProcess p;
        p.start(QStringLiteral(KVLENS_CLI_PATH),
                {QStringLiteral("export"), QStringLiteral("--session"), session, QStringLiteral("--show"),
                 QStringLiteral("snapkv"), QStringLiteral("--scale"), QStringLiteral("1.5"), QStringLiteral("--out"), cli});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const QImage a = QImage(gui).convertToFormat(QImage::Format_RGB32),
                     b = QImage(cli).convertToFormat(QImage::Format_RGB32);
        QVERIFY(!a.isNull() && !b.isNull());
        QCOMPARE(b.size(), a.size());
        int maxDiff = 0, differing = 0;
        for (int y = 0; y < a.height(); ++y)
            for (int x = 0; x < a.width(); ++x) {
                const QRgb u = a.pixel(x, y), v = b.pixel(x, y);
                const int d = std::max({std::abs(qRed(u) - qRed(v)), std::abs(qGreen(u) - qGreen(v)),
                                        std::abs(qBlue(u) - qBlue(v))});
                maxDiff = std::max(maxDiff, d);
                differing += d > 0;
            }
        qInfo("GUI vs CLI PNG %dx%d: max channel difference %d, %d pixels differ", a.width(), a.height(), maxDiff,
              differing);
        QVERIFY2(maxDiff <= 2, qPrintable(QString::number(maxDiff)));
    }

    void autosavesAndRestoresAfterAnUncleanExit() {
        QTemporaryDir dir;
        Reported reported;
        const QString edited = QStringLiteral("the cat sat on the mat . the code for the blue door is 7 7 1 2 .");
        {
            MainWindow w;
            prepare(w, dir, &reported);
            w.files()->setAutosaveDelay(100);
            w.start(QString());
            QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
            QSignalSpy saved(w.files(), &FileActions::autosaved);
            w.promptEditor()->setText(edited);
            QTRY_VERIFY_WITH_TIMEOUT(saved.count() > 0 && complete(w), 60000);
            QCOMPARE(loadSession(w.files()->autosaveFile().toStdString()).prompt, edited.toStdString());
        }
        // As if killed: the flag stays unclean, and the next start restores.
        gui::Settings().cleanExit.set(false);
        MainWindow w;
        prepare(w, dir, &reported);
        int asked = 0;
        w.files()->setRestoreDecider([&asked](const QString&) { return ++asked, true; });
        w.start(QString());
        QCOMPARE(asked, 1);
        QCOMPARE(w.promptEditor()->text(), edited);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == edited, 60000);
        QVERIFY(reported.texts.isEmpty());
    }

    // The start-up run and edits made while the question waits are not
    // autosaved over what it offers; Yes brings back exactly that session.
    void theAutosaveWaitsForTheRestoreAnswer() {
        QTemporaryDir dir;
        Reported reported;
        const SessionFile autosaved = autosavedSession();
        const QByteArray before = leaveAutosave(dir, autosaved);
        MainWindow w;
        QMessageBox* box = startWithTheRestoreQuestion(w, dir, &reported);
        QVERIFY(box);
        QVERIFY(w.files()->restorePending());
        QSignalSpy saved(w.files(), &FileActions::autosaved);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        const QString edit = QStringLiteral("an edit made while the question waits .");
        w.promptEditor()->setText(edit);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == edit, 60000);
        QTest::qWait(300);  // six autosave delays
        QCOMPARE(saved.count(), 0);
        QVERIFY(!w.files()->autosaveNow());
        QCOMPARE(test::readAll(w.files()->autosaveFile()), before);

        box->button(QMessageBox::Yes)->click();
        QVERIFY(!w.files()->restorePending());
        const QString prompt = QString::fromStdString(autosaved.prompt);
        QCOMPARE(w.promptEditor()->text(), prompt);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w) && w.controller()->lastRequest().prompt == prompt &&
                                     w.controller()->lastRequest().layer == 2,
                                 60000);
        QCOMPARE(w.comparison()->selectedHead(), int64_t{3});
        // Restored work is unsaved work: no file of its own, marked modified.
        QCOMPARE(w.windowTitle(), QStringLiteral("Untitled[*] — KVLens"));
        QVERIFY(w.isWindowModified());
        // Autosave resumes, with the restored session.
        QTRY_VERIFY_WITH_TIMEOUT(saved.count() > 0, 10000);
        const SessionFile now = loadSession(w.files()->autosaveFile().toStdString());
        QCOMPARE(now.prompt, autosaved.prompt);
        QCOMPARE(now.policies, autosaved.policies);
        QCOMPARE(now.budget, autosaved.budget);
        QCOMPARE(now.decodeSteps, autosaved.decodeSteps);
        QVERIFY(reported.texts.isEmpty());
    }

    // No: autosave resumes with the session as it is. Unanswered: nothing
    // touches the file and the next start offers it again.
    void noResumesTheAutosaveAndUnansweredOffersAgain() {
        QTemporaryDir dir;
        Reported reported;
        const QByteArray before = leaveAutosave(dir, autosavedSession());
        {
            MainWindow w;
            QVERIFY(startWithTheRestoreQuestion(w, dir, &reported));
            QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        }  // closed without an answer
        QVERIFY(!gui::Settings().cleanExit.get());
        QCOMPARE(test::readAll(dir.filePath(QStringLiteral("autosave.kvlens.json"))), before);
        MainWindow w;
        QMessageBox* box = startWithTheRestoreQuestion(w, dir, &reported);
        QVERIFY(box);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        QSignalSpy saved(w.files(), &FileActions::autosaved);
        box->button(QMessageBox::No)->click();
        QTRY_VERIFY_WITH_TIMEOUT(saved.count() > 0, 10000);
        QCOMPARE(QString::fromStdString(loadSession(w.files()->autosaveFile().toStdString()).prompt),
                 w.promptEditor()->text());
        QVERIFY(w.promptEditor()->text().toStdString() != autosavedSession().prompt);
    }

    // Yes on an autosave that cannot open here (its model is gone): reported,
    // and the file is kept beside, not autosaved over.
    void anUnrestorableAutosaveIsKept() {
        QTemporaryDir dir;
        Reported reported;
        SessionFile gone = autosavedSession();
        gone.modelDir = dir.filePath(QStringLiteral("no-such-model")).toStdString();
        const QByteArray before = leaveAutosave(dir, gone);
        MainWindow w;
        QMessageBox* box = startWithTheRestoreQuestion(w, dir, &reported);
        QVERIFY(box);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
        box->button(QMessageBox::Yes)->click();
        QCOMPARE(reported.titles, QStringList{QStringLiteral("Cannot open the session")});
        const QStringList kept = QDir(dir.path()).entryList({QStringLiteral("unrestored-*.kvlens.json")});
        QCOMPARE(kept.size(), 1);
        QCOMPARE(test::readAll(dir.filePath(kept.front())), before);
        QVERIFY(!w.files()->restorePending());
    }

    // A data export onto a full disk: the reason, and the old file as it was.
    void aFailedDataExportLeavesTheOldFile() {
        QTemporaryDir dir;
        Reported reported;
        MainWindow w;
        QVERIFY(startOnBundledModel(w, dir, &reported));
        for (const char* suffix : {"csv", "json"}) {
            const QString file = dir.filePath(QStringLiteral("attention.%1").arg(QLatin1String(suffix)));
            const QByteArray old = test::writeBytes(file, "the data the user already has\n");
            QString error;
            {
                test::FileSizeLimit limit(256);
                error = w.files()->exportData(file, ExportTable::Attention, 1);
            }
            QVERIFY2(error.startsWith(QStringLiteral("cannot write %1: File too large").arg(file)), qPrintable(error));
            QCOMPARE(test::readAll(file), old);
            const QString full = dir.filePath(QStringLiteral("full.%1").arg(QLatin1String(suffix)));
            QVERIFY(QFile::link(QStringLiteral("/dev/full"), full));
            const QString e = w.files()->exportData(full, ExportTable::Attention, 1);
            QVERIFY2(e.contains(QStringLiteral("No space left on device")), qPrintable(e));
            // And a figure through the same path.
            const QString png = dir.filePath(QStringLiteral("full-%1.png").arg(QLatin1String(suffix)));
            QVERIFY(QFile::link(QStringLiteral("/dev/full"), png));
            QVERIFY(w.files()->exportFigure(png, 1, 1).contains(QStringLiteral("No space left on device")));
        }
        QCOMPARE(w.files()->exportData(dir.filePath(QStringLiteral("attention.csv")), ExportTable::Attention, 1), QString());
        QVERIFY(test::readAll(dir.filePath(QStringLiteral("attention.csv"))).size() > 256);
    }

    void noRestoreOfferAfterACleanExit() {
        QTemporaryDir dir;
        Reported reported;
        {
            MainWindow w;
            QVERIFY(startOnBundledModel(w, dir, &reported));
            QVERIFY(w.files()->autosaveNow());
        }
        // The window's destructor marked a clean exit: no offer.
        MainWindow w;
        prepare(w, dir, &reported);
        int asked = 0;
        w.files()->setRestoreDecider([&asked](const QString&) { return ++asked, true; });
        w.start(QString());
        QCOMPARE(asked, 0);
        QTRY_VERIFY_WITH_TIMEOUT(complete(w), 60000);
    }
};

KVLENS_GUI_TEST_MAIN(FileActionsTest)
#include "file_actions_test.moc"
