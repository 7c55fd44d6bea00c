// kvlens: the GUI. With no arguments it opens the bundled model and runs an
// example; --screenshot FILE saves the window once the example has run
// (documentation screenshots under QT_QPA_PLATFORM=offscreen).
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "app/gui/main_window.h"
#include "core/cpu_tuning.h"

int main(int argc, char** argv) {
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
    cli.addOption(model);
    cli.addOption(shot);
    cli.process(app);

    kvlens::gui::MainWindow window;
    window.show();
    if (cli.isSet(shot)) {
        const QString file = cli.value(shot);
        window.resize(1400, 900);
        QObject::connect(window.controller(), &kvlens::gui::Controller::runFinished, &window, [&window, file] {
            // One more turn of the event loop so that queued replots land.
            QTimer::singleShot(500, &window, [&window, file] {
                const bool ok = window.grab().save(file);
                std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "saved" : "cannot write", qPrintable(file));
                QApplication::exit(ok ? 0 : 1);
            });
        });
        QTimer::singleShot(120000, &app, [] {
            std::fprintf(stderr, "no run finished within 120 s\n");
            QApplication::exit(2);
        });
    }
    window.start(cli.value(model));
    return app.exec();
}
