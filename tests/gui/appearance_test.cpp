// View → Zoom and Dark theme (issue 21 item 12): the zoom scales the text of
// every panel including the plots and is kept for the next start; the dark
// theme darkens the panels and the plots (pixels), the full cache's colour
// stays visible on it, and an exported plot is still on white paper.
#include <QAction>
#include <array>
#include <cmath>
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

// WCAG 2 relative luminance and contrast ratio.
double channel(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
std::array<double, 3> linear(const QColor& c) { return {channel(c.redF()), channel(c.greenF()), channel(c.blueF())}; }
double luminance(const QColor& c) {
    const auto l = linear(c);
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
}
double contrast(const QColor& a, const QColor& b) {
    const double x = luminance(a), y = luminance(b);
    return (std::max(x, y) + 0.05) / (std::min(x, y) + 0.05);
}

// CIE Lab (D65) of linear RGB, after an optional colour-vision-deficiency
// simulation: Machado, Oliveira and Fernandes 2009, severity 1.
using Matrix = std::array<std::array<double, 3>, 3>;
std::array<double, 3> lab(std::array<double, 3> l, const Matrix* cvd) {
    if (cvd) {
        std::array<double, 3> s{};
        for (int i = 0; i < 3; ++i) s[i] = std::clamp((*cvd)[i][0] * l[0] + (*cvd)[i][1] * l[1] + (*cvd)[i][2] * l[2], 0.0, 1.0);
        l = s;
    }
    const double x = (0.4124 * l[0] + 0.3576 * l[1] + 0.1805 * l[2]) / 0.95047;
    const double y = 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
    const double z = (0.0193 * l[0] + 0.1192 * l[1] + 0.9505 * l[2]) / 1.08883;
    auto f = [](double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; };
    return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}
const Matrix kProtan{{{0.152286, 1.052583, -0.204868}, {0.114503, 0.786281, 0.099216}, {-0.003882, -0.048116, 1.051998}}};
const Matrix kDeutan{{{0.367322, 0.860646, -0.227968}, {0.280085, 0.672501, 0.047413}, {-0.011820, 0.042940, 0.968881}}};
const Matrix kTritan{{{1.255528, -0.076749, -0.178779}, {-0.078411, 0.930809, 0.147602}, {0.004733, 0.691367, 0.303900}}};
// The smallest ΔE (CIE76) between the two colours under normal vision and the three simulations.
double worstDistance(const QColor& a, const QColor& b) {
    double worst = 1e9;
    for (const Matrix* m : {static_cast<const Matrix*>(nullptr), &kProtan, &kDeutan, &kTritan}) {
        const auto p = lab(linear(a), m), q = lab(linear(b), m);
        worst = std::min(worst, std::hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]));
    }
    return worst;
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

    // Issue 50: policy names are text, so each colour has 4.5:1 contrast
    // with the window and base colours of the theme it is shown on (light,
    // dark, presenter); any two stay apart (ΔE >= 9) for the three common
    // colour-vision deficiencies; and a run keeps its colour by its slot.
    void policyColoursAreReadableAndDistinctInEveryTheme() {
        MainWindow w;
        for (const auto& [dark, presenter] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
            w.setDarkTheme(dark);
            w.setPresenter(presenter);
            const QPalette pal = QApplication::palette();
            const auto& colours = ui::policyPalette();
            QCOMPARE(colours.size(), size_t{8});
            for (size_t i = 0; i < colours.size(); ++i) {
                for (QPalette::ColorRole role : {QPalette::Window, QPalette::Base}) {
                    const double c = contrast(colours[i], pal.color(role));
                    QVERIFY2(c >= 4.5, qPrintable(QStringLiteral("%1 on %2 (dark %3, presenter %4): %5:1")
                                                      .arg(colours[i].name(), pal.color(role).name()).arg(dark).arg(presenter).arg(c)));
                }
                QCOMPARE(ui::slotColour(static_cast<int>(i)), colours[i]);
                QCOMPARE(ui::slotColour(static_cast<int>(i + colours.size())), colours[i]);  // wraps
                for (size_t j = 0; j < i; ++j)
                    QVERIFY2(worstDistance(colours[i], colours[j]) >= 9.0,
                             qPrintable(QStringLiteral("%1 ~ %2: dE %3").arg(colours[i].name(), colours[j].name())
                                            .arg(worstDistance(colours[i], colours[j]))));
            }
            // Apart from what the strips and maps draw (normal vision, light shades).
            if (!dark)
                for (const QColor& c : colours)
                    for (const QColor& o : {ui::statusColour(kvlens::TokenStatus::Held), ui::statusColour(kvlens::TokenStatus::Score),
                                            ui::statusColour(kvlens::TokenStatus::Sink), ui::statusColour(kvlens::TokenStatus::Window),
                                            ui::statusColour(kvlens::TokenStatus::Evicted), ui::selectionColour(),
                                            ui::evictedColour(), ui::fullCacheColour()}) {
                        const auto p = lab(linear(c), nullptr), q = lab(linear(o), nullptr);
                        QVERIFY2(std::hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]) >= 15, qPrintable(c.name() + " ~ " + o.name()));
                    }
            // An exported plot prints the light shade of the same slot.
            for (size_t i = 0; i < colours.size(); ++i) QCOMPARE(ui::paperColour(colours[i]), ui::policyPalette(false)[i]);
        }
        w.setPresenter(false);
        w.setDarkTheme(false);
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
