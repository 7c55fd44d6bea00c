// MetricsPanel: one series per policy, and outputs marked where they depart
// from the full cache.
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/metrics_panel.h"
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
};

QTEST_MAIN(MetricsPanelTest)
#include "metrics_panel_test.moc"
