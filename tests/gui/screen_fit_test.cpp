// Every mode of the main window fits the screen it runs on (issue 50): the
// first start, the desk layout, View > Reset layout, the dark theme, zoom
// 100 % and 150 %, presenter mode and every step of every shipped lesson.
// No visible top-level window, nor its minimum size, may exceed the screen's
// available geometry: a dock that needs more scrolls instead of widening
// the window.
//
// CTest runs it once per screen (tests/gui/CMakeLists.txt): the offscreen
// platform's configuration file sets a 1280x720 and a 1400x900 screen.
// Unlike the other GUI tests it keeps the screen's DPI (no AA_Use96Dpi).
#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QLayout>
#include <QScreen>
#include <QtTest>

#include "app/gui/lesson_actions.h"
#include "app/gui/main_window.h"
#include "core/cpu_tuning.h"
#include "core/io/lesson_file.h"

using kvlens::gui::LessonActions;
using kvlens::gui::MainWindow;

namespace {

bool ready(const MainWindow& w) { return w.controller()->modelReady() && !w.controller()->busy(); }

QSize available() { return QGuiApplication::primaryScreen()->availableGeometry().size(); }

// Every visible top-level window against the screen; empty when all fit.
QString overflows(const QString& mode) {
    QApplication::processEvents();
    const QSize screen = available();
    QStringList out;
    for (QWidget* w : QApplication::topLevelWidgets()) {
        if (!w->isVisible()) continue;
        const QString name = w->objectName().isEmpty() ? QString::fromLatin1(w->metaObject()->className()) : w->objectName();
        const QSize size = w->frameGeometry().size(), least = w->minimumSize().expandedTo(w->minimumSizeHint());
        if (size.width() > screen.width() || size.height() > screen.height())
            out << QStringLiteral("%1 is %2x%3").arg(name).arg(size.width()).arg(size.height());
        if (least.width() > screen.width() || least.height() > screen.height())
            out << QStringLiteral("%1 needs at least %2x%3").arg(name).arg(least.width()).arg(least.height());
    }
    if (out.isEmpty()) return {};
    return QStringLiteral("%1 on a %2x%3 screen: %4")
        .arg(mode)
        .arg(screen.width())
        .arg(screen.height())
        .arg(out.join(QStringLiteral("; ")));
}

// The minimum widths that add up to the window's: the central widget's rows
// and every visible dock, for the failure message.
QString whatNeedsRoom(const MainWindow& w) {
    QStringList out;
    auto minWidth = [](QLayoutItem* item) { return item->minimumSize().width(); };
    QLayout* rows = w.centralWidget()->layout();
    for (int i = 0; i < rows->count(); ++i) {
        QString row = QStringLiteral("central row %1: %2").arg(i).arg(minWidth(rows->itemAt(i)));
        if (QLayout* items = rows->itemAt(i)->layout())
            for (int k = 0; k < items->count(); ++k)
                if (QWidget* x = items->itemAt(k)->widget())
                    row += QStringLiteral(" %1=%2").arg(QString::fromLatin1(x->metaObject()->className())).arg(minWidth(items->itemAt(k)));
        out << row;
    }
    for (QDockWidget* d : w.findChildren<QDockWidget*>())
        if (d->isVisible()) out << QStringLiteral("dock %1: %2").arg(d->objectName()).arg(d->minimumSizeHint().width());
    return QStringLiteral("  minimum widths: ") + out.join(QStringLiteral(", "));
}

QAction* action(const MainWindow& w, const QString& text) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text().remove(u'&') == text) return a;
    return nullptr;
}

}  // namespace

class ScreenFitTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QSettings().clear();
        qInfo("screen %dx%d available, %.0f dpi", available().width(), available().height(),
              QGuiApplication::primaryScreen()->logicalDotsPerInch());
    }

    void everyModeFitsTheScreen() {
        MainWindow w;
        w.show();
        w.start(QString());
        QTRY_VERIFY_WITH_TIMEOUT(ready(w), 60000);
        QStringList failures;
        auto check = [&](const QString& mode) {
            QTRY_VERIFY_WITH_TIMEOUT(ready(w), 60000);
            const QString o = overflows(mode);
            if (o.isEmpty()) return;
            qWarning("%s", qPrintable(o));
            qWarning("%s", qPrintable(whatNeedsRoom(w)));
            failures << o;
        };
        check(QStringLiteral("first start"));
        for (const int zoom : {100, 150}) {
            for (const bool dark : {false, true}) {
                w.setZoom(zoom);
                w.setDarkTheme(dark);
                const QString mode = QStringLiteral("zoom %1%%2").arg(zoom).arg(dark ? QStringLiteral(", dark") : QString());
                check(QStringLiteral("desk, ") + mode);
                QAction* reset = action(w, QStringLiteral("Reset layout"));
                QVERIFY(reset);
                reset->trigger();
                check(QStringLiteral("reset layout, ") + mode);
                w.setPresenter(true);
                check(QStringLiteral("presenter, ") + mode);
                w.setPresenter(false);
            }
            // Every step of every lesson, in presenter mode: in front of a room.
            w.setPresenter(true);
            for (const QString& file : LessonActions::shippedLessons()) {
                QCOMPARE(w.lessons()->openLesson(file), QString());
                const auto steps = static_cast<int>(kvlens::loadLesson(file.toStdString()).steps.size());
                for (int s = 0; s < steps; ++s) {
                    QCOMPARE(w.lessons()->goTo(s), QString());
                    check(QStringLiteral("presenter, zoom %1%, %2 step %3").arg(zoom).arg(QFileInfo(file).baseName()).arg(s + 1));
                }
            }
            w.setPresenter(false);
        }
        QVERIFY2(failures.isEmpty(), qPrintable(QStringLiteral("%1 mode(s) do not fit (above)").arg(failures.size())));
    }
};

int main(int argc, char** argv) {
    kvlens::restartWithTunedBlas(argv);
    QApplication app(argc, argv);
    ScreenFitTest tc;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&tc, argc, argv);
}

#include "screen_fit_test.moc"
