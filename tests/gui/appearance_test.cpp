// View → Zoom and Dark theme (issue 21 item 12): the zoom scales the text of
// every panel including the plots and is kept for the next start; the dark
// theme darkens the panels and the plots (pixels), the full cache's colour
// stays visible on it, and an exported plot is still on white paper.
#include <QAction>
#include <QImage>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

#include "app/gui/main_window.h"
#include "widgets/appearance.h"
#include "widgets/metrics_panel.h"
#include "widgets/palette.h"
#include "widgets/qcustomplot_include.h"

using kvlens::gui::MainWindow;
namespace ui = kvlens::ui;

namespace {

double meanLightness(const QImage& img) {
    double sum = 0;
    int n = 0;
    for (int y = 0; y < img.height(); y += 4)
        for (int x = 0; x < img.width(); x += 4) {
            sum += QColor(img.pixel(x, y)).lightness();
            ++n;
        }
    return n ? sum / n : 0;
}

QAction* action(MainWindow& w, const QString& text) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text() == text) return a;
    return nullptr;
}

}  // namespace

class AppearanceTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QSettings().clear();  // the test's own settings: start at 100 %, light
    }

    void zoomSteps() {
        QCOMPARE(ui::nextZoom(100, +1), 110);
        QCOMPARE(ui::nextZoom(100, -1), 90);
        QCOMPARE(ui::nextZoom(125, +1), 150);
        QCOMPARE(ui::nextZoom(200, +1), 200);
        QCOMPARE(ui::nextZoom(50, -1), 50);
        QCOMPARE(ui::nextZoom(133, -1), 125);  // a value between steps goes to the next one
    }

    void zoomScalesTextAndPlotsAndIsKept() {
        const double base = QApplication::font().pointSizeF();
        {
            MainWindow w;
            w.resize(1200, 800);
            w.show();
            QVERIFY(action(w, QStringLiteral("Zoom &in")));
            QVERIFY(action(w, QStringLiteral("Zoom &in"))->shortcuts().contains(QKeySequence(QStringLiteral("Ctrl+="))));
            const double tick = w.metrics()->klPlot()->xAxis->tickLabelFont().pointSizeF();
            w.setZoom(150);
            QCOMPARE(QApplication::font().pointSizeF(), base * 1.5);
            QCOMPARE(w.metrics()->klPlot()->xAxis->tickLabelFont().pointSizeF(), tick * 1.5);
            QTRY_COMPARE(w.metrics()->font().pointSizeF(), base * 1.5);  // the panels follow the application font
            QCOMPARE(QSettings().value(QStringLiteral("view/zoom")).toInt(), 150);
            action(w, QStringLiteral("Zoom &out"))->trigger();
            QCOMPARE(ui::currentAppearance().zoom, 125);
            w.setZoom(150);
        }
        {
            MainWindow again;  // the next start
            QCOMPARE(ui::currentAppearance().zoom, 150);
            QCOMPARE(QApplication::font().pointSizeF(), base * 1.5);
            action(again, QStringLiteral("&Actual size"))->trigger();
            QCOMPARE(QApplication::font().pointSizeF(), base);
        }
    }

    void darkThemeDarkensPanelsAndPlotsButNotExports() {
        QTemporaryDir tmp;
        MainWindow w;
        w.resize(1200, 800);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const double light = meanLightness(w.grab().toImage());
        const double lightPlot = meanLightness(w.metrics()->klPlot()->toPixmap(300, 200).toImage());
        QVERIFY(ui::fullCacheColour().lightness() < 64);
        w.setDarkTheme(true);
        QVERIFY(QSettings().value(QStringLiteral("view/darkTheme")).toBool());
        QVERIFY(w.findChild<QAction*>(QStringLiteral("darkTheme"))->isChecked());
        QCoreApplication::processEvents();
        const double dark = meanLightness(w.grab().toImage());
        const double darkPlot = meanLightness(w.metrics()->klPlot()->toPixmap(300, 200).toImage());
        QVERIFY2(dark < light - 80, qPrintable(QStringLiteral("window lightness %1 -> %2").arg(light).arg(dark)));
        QVERIFY2(darkPlot < lightPlot - 80, qPrintable(QStringLiteral("plot lightness %1 -> %2").arg(lightPlot).arg(darkPlot)));
        QVERIFY(ui::fullCacheColour().lightness() > 192);  // visible on the dark panels
        // An exported plot is on white paper, and the screen stays dark after.
        const QString file = tmp.filePath(QStringLiteral("kl.png"));
        QCOMPARE(ui::MetricsPanel::exportPlot(w.metrics()->klPlot(), file, 1.0), QString());
        QVERIFY(meanLightness(QImage(file)) > 200);
        QVERIFY(meanLightness(w.metrics()->klPlot()->toPixmap(300, 200).toImage()) < lightPlot - 80);
        w.setDarkTheme(false);
        QCoreApplication::processEvents();
        QVERIFY(std::abs(meanLightness(w.grab().toImage()) - light) < 10);
        QVERIFY(ui::fullCacheColour().lightness() < 64);
    }
};

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    app.setAttribute(Qt::AA_Use96Dpi, true);
    AppearanceTest tc;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&tc, argc, argv);
}
#include "appearance_test.moc"
