// MetricsPanel: one series per policy, and outputs marked where they depart
// from the full cache.
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/metrics_panel.h"
#include <QSvgRenderer>
#include <QTemporaryDir>
#include "widgets/qcustomplot_include.h"

using namespace kvlens;

class MetricsPanelTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void plotsEveryPolicy() {
        ui::MetricsPanel panel;
        panel.resize(500, 600);
        panel.setTokenText([](int64_t id) { return QStringLiteral("tok%1 ").arg(id); });
        panel.setTrace(test::makeTrace(12));
        QCOMPARE(panel.klPlot()->graphCount(), 1);  // full is the reference, not a series
        QCOMPARE(panel.klPlot()->graph(0)->data()->size(), 2);
        QCOMPARE(panel.klPlot()->graph(0)->data()->at(1)->value, 0.2);
        QCOMPARE(panel.agreementPlot()->graph(0)->data()->at(1)->value, 50.0);  // 1 of 2 agree
        QCOMPARE(panel.massPlot()->graph(0)->data()->size(), 2);                // per layer
        QCOMPARE(panel.memoryPlot()->plottableCount(), 2);                      // full + h2o
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
        QFile pdf(dir.filePath("memory.pdf"));
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        const QByteArray bytes = pdf.readAll();
        QVERIFY(bytes.startsWith("%PDF"));
        QVERIFY(bytes.contains("/Type /Page"));
        QVERIFY(!ui::MetricsPanel::exportPlot(panel.klPlot(), dir.filePath("kl.bmp")).isEmpty());
    }
};

QTEST_MAIN(MetricsPanelTest)
#include "metrics_panel_test.moc"
