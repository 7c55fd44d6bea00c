// kvlens: the GUI. With no arguments it opens the bundled model and runs an
// example; --open FILE opens a session file and --sweep FILE a sweep once the model is in; --screenshot FILE saves the window once the example has run
// (documentation screenshots under QT_QPA_PLATFORM=offscreen), and exits 1
// saying why when the model cannot load, the run fails or FILE cannot be
// written.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QPixmap>
#include <QScreen>
#include <QTimer>
#include <cstdio>
#include <cstring>

#include "app/gui/file_actions.h"
#include "app/gui/lesson_actions.h"
#include "app/gui/main_window.h"
#include "widgets/lesson_panel.h"
#include "core/cpu_tuning.h"
#include "widgets/save_file.h"

namespace {

// Prints `line` (stderr when failing) and ends the event loop with `code`;
// queued, since a failure may come before the loop runs.
void finish(int code, const QString& line) {
    std::fprintf(code ? stderr : stdout, "%s\n", qPrintable(line));
    std::fflush(code ? stderr : stdout);
    QTimer::singleShot(0, qApp, [code] { QApplication::exit(code); });
}

// Without a display Qt aborts when the application starts. --help and
// --version need none: they run on the offscreen platform. Anything else
// gets one sentence saying what is missing. False: exit with 1.
bool displayOrHelp(int argc, char** argv) {
    if (qEnvironmentVariableIsSet("QT_QPA_PLATFORM") || qEnvironmentVariableIsSet("DISPLAY") ||
        qEnvironmentVariableIsSet("WAYLAND_DISPLAY"))
        return true;
    for (int i = 1; i < argc; ++i)
        for (const char* flag : {"-h", "-?", "--help", "--help-all", "-v", "--version"})
            if (std::strcmp(argv[i], flag) == 0) {
                qputenv("QT_QPA_PLATFORM", "offscreen");
                return true;
            }
    std::fprintf(stderr,
                 "kvlens: there is no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset): run it in a "
                 "desktop session, under xvfb-run, or with QT_QPA_PLATFORM=offscreen for --screenshot\n");
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (!displayOrHelp(argc, argv)) return 1;
    kvlens::restartWithTunedBlas(argv);  // before any thread or window exists
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("KVLens"));
    QApplication::setApplicationName(QStringLiteral("kvlens"));
    QApplication::setApplicationVersion(QStringLiteral(KVLENS_VERSION));
    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("KVLens: watch KV-cache eviction policies side by side"));
    cli.addHelpOption();
    cli.addVersionOption();
    QCommandLineOption model(QStringLiteral("model"), QStringLiteral("HF model directory (default: bundled)"),
                             QStringLiteral("DIR"));
    QCommandLineOption shot(QStringLiteral("screenshot"),
                            QStringLiteral("save the window to FILE after the first run, then quit"),
                            QStringLiteral("FILE"));
    QCommandLineOption prompt(QStringLiteral("prompt"),
                              QStringLiteral("start on this prompt instead of the default example"), QStringLiteral("TEXT"));
    QCommandLineOption sweep(QStringLiteral("sweep"),
                             QStringLiteral("open a sweep file or a merged sweep (kvlens-cli sweep) in the Sweep and "
                                            "Needle docks"),
                             QStringLiteral("FILE"));
    // Not --session: QGuiApplication takes that for X11 session management.
    QCommandLineOption session(QStringLiteral("open"),
                               QStringLiteral("open a session file (.kvlens.json) once the model is in"),
                               QStringLiteral("FILE"));
    QCommandLineOption lesson(QStringLiteral("lesson"),
                              QStringLiteral("open a lesson (a .kvlens-lesson.json file, or the name of a shipped one "
                                             "such as 01-attention-sinks)"),
                              QStringLiteral("FILE"));
    QCommandLineOption lessonStep(QStringLiteral("lesson-step"), QStringLiteral("start the lesson at step N (from 1)"),
                                  QStringLiteral("N"), QStringLiteral("1"));
    QCommandLineOption reveal(QStringLiteral("reveal"),
                              QStringLiteral("reveal the lesson step's answer at once (for handouts and screenshots)"));
    QCommandLineOption presenter(QStringLiteral("presenter"),
                                 QStringLiteral("start in presenter mode (large text, thick lines, high contrast)"));
    cli.addOption(model);
    cli.addOption(prompt);
    cli.addOption(sweep);
    cli.addOption(session);
    cli.addOption(lesson);
    cli.addOption(lessonStep);
    cli.addOption(reveal);
    cli.addOption(presenter);
    cli.addOption(shot);
    cli.process(app);

    kvlens::gui::MainWindow window;
    window.show();
    if (cli.isSet(sweep)) {
        const QString error = window.openSweep(cli.value(sweep));
        if (!error.isEmpty()) std::fprintf(stderr, "kvlens: %s\n", qPrintable(error));
    }
    if (cli.isSet(presenter)) window.setPresenter(true);
    // A session or a lesson opens once the model is in (it may name another);
    // a screenshot waits for its run.
    bool waitForFile = cli.isSet(lesson) || cli.isSet(session);
    if (waitForFile) {
        QString file = cli.value(cli.isSet(lesson) ? lesson : session);
        if (cli.isSet(lesson) && !QFileInfo::exists(file))
            for (const QString& shipped : kvlens::gui::LessonActions::shippedLessons())
                if (QFileInfo(shipped).fileName().startsWith(file + QStringLiteral("."))) file = shipped;
        const bool isLesson = cli.isSet(lesson);
        bool stepRead = true;
        const QString stepText = cli.value(lessonStep);
        const int step = cli.isSet(lessonStep) ? stepText.toInt(&stepRead) - 1 : 0;
        const bool revealNow = cli.isSet(reveal);
        const bool screenshot = cli.isSet(shot);
        auto connection = std::make_shared<QMetaObject::Connection>();
        *connection = QObject::connect(window.controller(), &kvlens::gui::Controller::modelLoaded, &window,
                                       [&window, &waitForFile, file, isLesson, step, stepRead, stepText, revealNow, screenshot,
                                        connection] {
            QObject::disconnect(*connection);
            QTimer::singleShot(0, &window, [&window, &waitForFile, file, isLesson, step, stepRead, stepText, revealNow, screenshot] {
                waitForFile = false;
                if (!isLesson) {  // why is said in the window; a screenshot of the wrong state is not taken
                    if (!window.files()->openSession(file) && screenshot)
                        finish(1, QStringLiteral("cannot open the session %1").arg(file));
                    return;
                }
                QString error = window.lessons()->openLesson(file);
                const int steps = static_cast<int>(window.lessonPanel()->lesson().steps.size());
                if (error.isEmpty() && (!stepRead || step < 0 || step >= steps))  // it was clamped without a word
                    error = QStringLiteral("--lesson-step %1: the lesson has %2 steps, 1 to %2").arg(stepText).arg(steps);
                if (error.isEmpty() && step > 0) error = window.lessons()->goTo(step);
                if (error.isEmpty() && revealNow) window.lessonPanel()->reveal();
                if (!error.isEmpty()) finish(1, QStringLiteral("cannot open the lesson: %1").arg(error));
            });
        });
    }
    if (cli.isSet(shot)) {
        using kvlens::gui::Controller;
        const QString file = cli.value(shot);
        // The docs' size, or the whole screen when it is smaller (1280 x 720).
        window.resize(QSize(1400, 900).boundedTo(window.screen()->availableGeometry().size()));
        QObject::connect(window.controller(), &Controller::runFinished, &window, [&window, &waitForFile, file] {
            if (waitForFile || window.controller()->busy()) return;  // the lesson's own run is the one to show
            // One more turn of the event loop so that queued replots land.
            QTimer::singleShot(500, &window, [&window, file] {
                const QPixmap pixels = window.grab();
                const QByteArray format = QFileInfo(file).suffix().toLatin1();
                const QString error = kvlens::ui::saveThrough(file, [&](QIODevice& out) {
                    return pixels.save(&out, format.isEmpty() ? "PNG" : format.constData())
                               ? QString()
                               : QStringLiteral("cannot encode a .%1 image").arg(QString::fromLatin1(format));
                });
                finish(error.isEmpty() ? 0 : 1, error.isEmpty() ? QStringLiteral("saved %1").arg(file) : error);
            });
        });
        QObject::connect(window.controller(), &Controller::modelFailed, &window, [](const QString& message) {
            finish(1, QStringLiteral("cannot load the model: %1").arg(message));
        });
        QObject::connect(window.controller(), &Controller::runFailed, &window, [](const QString& message) {
            finish(1, QStringLiteral("the run failed: %1").arg(message));
        });
        QTimer::singleShot(120000, &app, [] { finish(2, QStringLiteral("no run finished within 120 s")); });
    }
    window.start(cli.value(model), cli.value(prompt));
    return app.exec();
}
