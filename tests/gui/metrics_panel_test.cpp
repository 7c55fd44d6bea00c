// MetricsPanel: one series per policy, and outputs marked where they depart
// from the full cache. A metric computed from NaN, and every summary metric
// of a run that stopped, reads "n/a" (with the reason it stopped), never a
// number. Plot exports that fail say why and leave the old file.
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/head_grid.h"
#include "widgets/metrics_panel.h"
#include "widgets/model_panel.h"
#include "widgets/palette.h"
#include "widgets/appearance.h"
#include "widgets/status_legend.h"
#include "widgets/policy_column.h"
#include <QDir>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <cmath>
#include "widgets/qcustomplot_include.h"
#include "write_fixtures.h"

using namespace kvlens;

class MetricsPanelTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // A label first seen outside the policy list (a sweep's figure) keeps
    // the colour it was given whatever else is seen after it (the palette's
    // readability and distinctness: appearance_test).
    void policyColoursAreStableByLabel() {
        const QColor h2o = ui::policyColour("h2o:colour_test");
        const QColor snap = ui::policyColour("snapkv:colour_test");
        for (int i = 0; i < 5; ++i) ui::policyColour("other" + std::to_string(i) + ":colour_test");
        QCOMPARE(ui::policyColour("h2o:colour_test"), h2o);
        QCOMPARE(ui::policyColour("snapkv:colour_test"), snap);
        QVERIFY(h2o != snap);
    }

    // Issue 21 item 15: the retained-mass plot's layer axis stays readable at 30 and 80 layers.
    void deepModelsGetFewLayerTicks() {
        for (int layers : {2, 30, 80}) {
            auto t = test::makeTrace(12);
            t->numLayers = layers;
            for (auto& p : t->policies) {
                const LayerTrace first = p.layers.front();
                p.layers.assign(static_cast<size_t>(layers), first);
            }
            ui::MetricsPanel panel;
            panel.resize(500, 600);
            panel.setTrace(t);
            panel.massPlot()->replot();
            const QVector<double> ticks = panel.massPlot()->xAxis->tickVector();
            QVERIFY2(ticks.size() >= 2 && ticks.size() <= 10, qPrintable(QStringLiteral("%1 layers: %2 ticks").arg(layers).arg(ticks.size())));
            for (double x : ticks) QCOMPARE(x, std::round(x));  // whole layers
            QCOMPARE(panel.massPlot()->graph(0)->data()->size(), layers);
            // Issue 21 item 11: the legend sits under the plot, not over its points and ticks.
            QCOMPARE(panel.massPlot()->axisRect()->insetLayout()->elementCount(), 0);
            QVERIFY(!panel.massPlot()->legend->outerRect().intersects(panel.massPlot()->axisRect()->outerRect()));
            QVERIFY(panel.massPlot()->legend->outerRect().top() >= panel.massPlot()->axisRect()->outerRect().bottom());
        }
    }

    void plotsEveryPolicy() {
        ui::MetricsPanel panel;
        panel.resize(500, 600);
        panel.setTokenPieces([](const std::vector<int64_t>& ids) {
            QStringList out;
            for (int64_t id : ids) out << QStringLiteral("tok%1 ").arg(id);
            return out;
        });
        panel.setTrace(test::makeTrace(12));
        QCOMPARE(panel.klPlot()->graphCount(), 1);  // full is the reference, not a series
        QCOMPARE(panel.klPlot()->graph(0)->data()->size(), 2);
        QCOMPARE(panel.klPlot()->graph(0)->data()->at(1)->value, 0.2);
        QCOMPARE(panel.agreementPlot()->graph(0)->data()->at(1)->value, 50.0);  // 1 of 2 agree
        QCOMPARE(panel.massPlot()->graph(0)->data()->size(), 2);                // per layer
        QCOMPARE(panel.memoryPlot()->plottableCount(), 2);                      // full + h2o
        {
            // The memory chart names runs by label (elided past 18 characters), not by id.
            auto t = test::makeTrace(12);
            t->policies[1].label = "h2o:gqa=max,recent=8,schedule=every_step";
            panel.setTrace(t);
            auto ticker = panel.memoryPlot()->xAxis->ticker().dynamicCast<QCPAxisTickerText>();
            QVERIFY(ticker);
            QCOMPARE(ticker->ticks().value(1.0), QStringLiteral("h2o:gqa=max,recen") + QChar(0x2026));
            panel.setTrace(test::makeTrace(12));
        }
        {
            // Nine runs in a narrow panel: every label is drawn, the last one too
            // (QCustomPlot drops a label that would cross the widget's edge).
            auto t = test::makeTrace(12);
            for (int i = 0; i < 7; ++i) t->policies.push_back(t->policies[1]);
            t->policies.back().label = "andpro";
            panel.setTrace(t);
            QCustomPlot* plot = panel.memoryPlot();
            const QImage img = plot->toPixmap(180, 300).toImage();
            const int x = static_cast<int>(plot->xAxis->coordToPixel(8.0));
            const int y = plot->axisRect()->bottom();
            int ink = 0;  // dark label pixels right of and below the last tick
            for (int yy = y + 4; yy < std::min(img.height(), y + 40); ++yy)
                for (int xx = x - 2; xx < std::min(img.width(), x + 30); ++xx)
                    if (img.pixelColor(xx, yy).lightness() < 100) ++ink;
            QVERIFY2(ink > 10, qPrintable(QString::number(ink)));
            panel.setTrace(test::makeTrace(12));
        }
        const QString html = panel.outputHtml();
        QVERIFY(html.contains("tok5"));
        QVERIFY(html.contains("tok7"));
        // Only the disagreeing prediction is marked.
        QCOMPARE(html.count("underline"), 1);
    }

    // Every metrics plot exports as PNG (scaled), SVG and PDF, and the files decode.
    void plotsExportAsFigures() {
        ui::MetricsPanel panel;
        panel.resize(700, 600);
        panel.setTrace(test::makeTrace(12));
        QTemporaryDir dir;
        if (qEnvironmentVariableIsSet("KVLENS_KEEP_EXPORTS")) {  // to look at the files
            dir.setAutoRemove(false);
            qInfo() << "exports in" << dir.path();
        }
        QStringList written;
        for (const QString format : {"png", "svg", "pdf"})
            QCOMPARE(panel.exportPlots(dir.path(), format, 2.0, &written), QString());
        QCOMPARE(written.size(), 12);
        const QImage png(dir.filePath("kl.png"));
        QVERIFY(!png.isNull());
        QVERIFY(png.width() >= 960);  // at least 480 points at scale 2
        QSet<QRgb> colours;
        for (int y = 0; y < png.height(); y += 7)
            for (int x = 0; x < png.width(); x += 7) colours.insert(png.pixel(x, y));
        QVERIFY(colours.size() > 5);
        QSvgRenderer svg(dir.filePath("mass.svg"));
        QVERIFY(svg.isValid());
        // The exported KL plot names its line (a legend), the on-screen one stays clean.
        QFile klSvg(dir.filePath("kl.svg"));
        QVERIFY(klSvg.open(QIODevice::ReadOnly));
        QVERIFY(klSvg.readAll().contains(">h2o<"));
        QVERIFY(!panel.klPlot()->legend->visible());
        QFile pdf(dir.filePath("memory.pdf"));
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        const QByteArray bytes = pdf.readAll();
        QVERIFY(bytes.startsWith("%PDF"));
        QVERIFY(bytes.contains("/Type /Page"));
        QVERIFY(!ui::MetricsPanel::exportPlot(panel.klPlot(), dir.filePath("kl.bmp")).isEmpty());
    }

    // Issue 50: an exported plot's legend sits under the axes, never over
    // the data, and its series print in their light shades on white paper
    // when the screen is dark; both go back after the export.
    void exportsPutTheLegendOutsideAndPrintLightShades() {
        ui::applyAppearance({100, true, false});  // dark
        ui::MetricsPanel panel;
        panel.resize(700, 600);
        panel.setTrace(test::makeTrace(12));
        QCustomPlot* plot = panel.klPlot();
        QVERIFY(plot->graphCount() >= 1);
        const QColor screen = plot->graph(0)->pen().color();
        QCOMPARE(screen, ui::policyPalette(true)[static_cast<size_t>(ui::policySlot("h2o"))]);
        plot->legend->setVisible(true);
        auto inAxes = [plot] {
            QCPLayoutInset* inset = plot->axisRect()->insetLayout();
            for (int i = 0; i < inset->elementCount(); ++i)
                if (inset->elementAt(i) == plot->legend) return true;
            return false;
        };
        QVERIFY(inAxes());
        {
            const ui::PaperStyle paper(plot);
            QVERIFY(!inAxes());
            QCOMPARE(plot->graph(0)->pen().color(), ui::paperColour(screen));
            QCOMPARE(plot->graph(0)->pen().color(), ui::policyPalette(false)[static_cast<size_t>(ui::policySlot("h2o"))]);
            plot->toPixmap(480, 360);  // laid out at the export's size
            QVERIFY(plot->legend->outerRect().top() >= plot->axisRect()->outerRect().bottom());
        }
        QVERIFY(inAxes());
        QCOMPARE(plot->graph(0)->pen().color(), screen);
        plot->legend->setVisible(false);
        ui::applyAppearance({100, false, false});
    }

    // A step whose logits became NaN: a gap in the KL and agreement plots
    // (not a point), left out of the running agreement.
    // Issue 50 item 8: in a narrow dock (presenter sizes) a title longer
    // than its plot goes on two lines (it was cut at both ends), each line
    // within the plot; the memory chart's run names stand upright.
    void titlesFitTheirPlots() {
        const ui::Appearance before = ui::currentAppearance();
        ui::Appearance presenter = before;
        presenter.presenter = true;  // 1.5x text
        ui::applyAppearance(presenter);
        struct Restore {
            ui::Appearance a;
            ~Restore() { ui::applyAppearance(a); }
        } restore{before};
        ui::MetricsPanel panel;
        panel.resize(340, 600);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        panel.setTrace(test::makeTrace(12));
        for (QCustomPlot* plot : {panel.klPlot(), panel.agreementPlot(), panel.massPlot(), panel.memoryPlot()}) {
            auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
            QVERIFY(title);
            QTRY_VERIFY2(QFontMetrics(title->font()).boundingRect(QRect(), 0, title->text()).width() <= plot->width(),
                         qPrintable(title->text()));
        }
        QVERIFY(panel.klPlot()->property("fullTitle").toString().size() > 0);
        QCOMPARE(panel.memoryPlot()->xAxis->tickLabelRotation(), 90.0);
    }

    void nanKlIsAGapNotAPoint() {
        auto t = test::makeTrace(12);
        t->policies[1].metrics[0].kl = std::nan("");
        ui::MetricsPanel panel;
        panel.setTrace(t);
        QVERIFY(std::isnan(panel.klPlot()->graph(0)->data()->at(0)->value));
        QVERIFY(std::isnan(panel.agreementPlot()->graph(0)->data()->at(0)->value));
        QCOMPARE(panel.klPlot()->graph(0)->data()->at(1)->value, 0.2);
        QCOMPARE(panel.agreementPlot()->graph(0)->data()->at(1)->value, 0.0);  // 0 of the 1 finite step agrees
        QVERIFY(std::isfinite(panel.klPlot()->yAxis->range().upper));
        // Its column's header: n/a, not "nan".
        ui::PolicyColumn column;
        column.setData(t, 1, nullptr, 0, 0);
        QVERIFY2(column.headerText().contains(QStringLiteral("KL n/a")), qPrintable(column.headerText()));
        QVERIFY(!column.headerText().contains(QStringLiteral("nan"), Qt::CaseInsensitive));
    }

    // A run stopped by the session (non-finite logits): its reason in the
    // column header and the outputs, its metrics n/a, no mass drawn.
    void aStoppedRunShowsWhyAndNoNumbers() {
        auto t = test::makeTrace(12);
        t->policies[1].failure = "stopped: its logits became NaN at position 10";
        t->policies[1].layers[0].retainedMass.assign(8, std::nanf(""));
        ui::PolicyColumn column;
        column.setData(t, 1, nullptr, 0, 0);
        const QString header = column.headerText();
        QVERIFY2(header.contains(QStringLiteral("KL n/a · top-1 n/a")), qPrintable(header));
        QVERIFY2(header.contains(QStringLiteral("stopped: its logits became NaN at position 10")), qPrintable(header));
        QVERIFY2(!header.contains(QStringLiteral("stopped: stopped")), qPrintable(header));
        ui::MetricsPanel panel;
        panel.setTrace(t);
        QVERIFY(panel.outputHtml().contains(QStringLiteral("stopped: its logits became NaN")));
        QCOMPARE(panel.massPlot()->graph(0)->data()->size(), 0);
        QVERIFY(panel.massPlot()->graph(0)->name().contains(QStringLiteral("stopped")));
        // A reason without the word gets it.
        t->policies[1].failure = "non-finite logits";
        column.setData(t, 1, nullptr, 0, 0);
        QVERIFY(column.headerText().contains(QStringLiteral("stopped: non-finite logits")));
        // The full run's header has no metrics to show.
        column.setData(t, 0, nullptr, 0, 0);
        QVERIFY(!column.headerText().contains(QStringLiteral("KL")));
    }

    // Free-running runs read their own texts: no KL, top-1 or retained mass
    // against full. Every panel says n/a and why instead of 0 or grey.
    void freeRunningSaysWhyItsComparisonsAreMissing() {
        auto t = test::makeTrace(12);
        t->teacherForced = false;
        for (auto& p : t->policies) {
            for (auto& l : p.layers) l.retainedMass.assign(l.retainedMass.size(), std::nanf(""));
            for (auto& m : p.metrics) m.kl = std::nan("");
        }
        t->policies[1].divergedAt = 1;
        ui::PolicyColumn column;
        column.setData(t, 1, nullptr, 0, 0);
        QVERIFY2(column.headerText().contains(QStringLiteral("free-running: its text leaves full's at step 1")),
                 qPrintable(column.headerText()));
        QVERIFY(!column.headerText().contains(QStringLiteral("top-1")));
        QVERIFY(column.grid()->note().contains(QStringLiteral("free-running")));
        ui::MetricsPanel panel;
        panel.setTrace(t);
        for (const QCustomPlot* plot : {panel.klPlot(), panel.agreementPlot(), panel.massPlot()})
            QVERIFY(ui::MetricsPanel::plotNote(plot).contains(QStringLiteral("n/a in free-running")));
        // Teacher-forced again: the notes go.
        auto forced = test::makeTrace(12);
        panel.setTrace(forced);
        QVERIFY(ui::MetricsPanel::plotNote(panel.klPlot()).isEmpty());
        column.setData(forced, 1, nullptr, 0, 0);
        QVERIFY(column.grid()->note().isEmpty());
    }

    // Each chip of the legend explains its colour on hover.
    void legendChipsExplainThemselves() {
        ui::StatusLegend legend;
        legend.resize(2000, legend.heightForWidth(2000));  // one line
        const int y = legend.height() / 2;
        QStringList seen;
        for (int x = 0; x < 2000; x += 4)
            if (const QString e = legend.explanationAt(QPoint(x, y)); !e.isEmpty() && !seen.contains(e)) seen << e;
        QVERIFY2(seen.size() >= 6, qPrintable(seen.join(u'|')));
        QVERIFY(seen.first().contains(QStringLiteral("attention sink")));
    }

    void slidingWindowIsShownWithTheModel() {
        ui::ModelPanel panel;
        QCOMPARE(panel.slidingWindowText(), QString());
        panel.setSlidingWindow(4096);
        QVERIFY(panel.slidingWindowText().contains(QStringLiteral("sliding window of 4096 tokens")));
        panel.setSlidingWindow(0);
        QCOMPARE(panel.slidingWindowText(), QString());
    }

    // On a full disk each format is an error naming the file, and the plot
    // that was there is still there; /dev/full is an error too.
    void aFailedPlotExportLeavesTheOldFile() {
        ui::MetricsPanel panel;
        panel.resize(700, 600);
        panel.setTrace(test::makeTrace(12));
        QTemporaryDir dir;
        for (const char* format : {"png", "svg", "pdf"}) {
            const QString file = dir.filePath(QStringLiteral("kl.%1").arg(QLatin1String(format)));
            const QByteArray old = test::writeBytes(file, QByteArray("the plot the user already has\n").repeated(20));
            QString error;
            {
                test::FileSizeLimit limit(1024);
                error = ui::MetricsPanel::exportPlot(panel.klPlot(), file);
            }
            QVERIFY2(error.startsWith(QStringLiteral("cannot write %1: File too large").arg(file)), qPrintable(error));
            QCOMPARE(test::readAll(file), old);
            const QString full = dir.filePath(QStringLiteral("full.%1").arg(QLatin1String(format)));
            QVERIFY(QFile::link(QStringLiteral("/dev/full"), full));
            const QString e = ui::MetricsPanel::exportPlot(panel.klPlot(), full);
            QVERIFY2(e.contains(QStringLiteral("No space left on device")), qPrintable(e));
        }
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden | QDir::System).size(), 6);
    }
};

QTEST_MAIN(MetricsPanelTest)
#include "metrics_panel_test.moc"
