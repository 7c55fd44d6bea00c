// NeedleView: a context × depth heatmap per policy and budget, full first,
// cells coloured by the share of exact answers.
#include <QProgressBar>
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/needle_panel.h"
#include "widgets/needle_view.h"
#include "widgets/palette.h"

using namespace kvlens;

namespace {

// Streaming loses the early needle (depth 0) at the longer context.
std::shared_ptr<eval::NeedleGridResult> makeGrid() { return test::makeNeedleGrid({256, 128}, {0.0, 1.0}); }

}  // namespace

class NeedleViewTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Progress counts probes (one context × depth scores every run at once).
    void progressCountsProbes() {
        ui::NeedlePanel panel;
        panel.setProgress(2, 6);
        auto* bar = panel.findChild<QProgressBar*>();
        QVERIFY(bar);
        QCOMPARE(bar->text(), QStringLiteral("probe 2 of 6"));
    }

    void panelsAndCells() {
        ui::NeedleView view;
        view.resize(500, 300);
        view.setResult(makeGrid());
        QCOMPARE(view.panelCount(), 2);
        QVERIFY(view.panelTitle(0).startsWith("full"));
        QVERIFY2(view.panelTitle(1).contains("streaming @ 32") && view.panelTitle(1).contains("75%"),
                 qPrintable(view.panelTitle(1)));
        const QImage img = view.grab().toImage();
        if (qEnvironmentVariableIsSet("KVLENS_SAVE_DIR"))  // to look at it
            img.save(qEnvironmentVariable("KVLENS_SAVE_DIR") + "/needle-view.png");
        // Rows are sorted contexts (128, 256), columns depths (0, 1).
        const auto at = [&](int panel, int row, int col) {
            const QRect r = view.cellRect(panel, row, col);
            return img.pixelColor(r.left() + 1, r.top() + 1).rgb();
        };
        QCOMPARE(at(1, 1, 0), ui::viridis(0.0));  // streaming, 256 tokens, depth 0: lost
        QCOMPARE(at(1, 1, 1), ui::viridis(1.0));
        QCOMPARE(at(1, 0, 0), ui::viridis(1.0));
        QCOMPARE(at(0, 1, 0), ui::viridis(1.0));  // full keeps it
        view.setMetric(ui::NeedleView::Metric::Overlap);
        const QImage overlap = view.grab().toImage();
        const QRect r = view.cellRect(1, 1, 0);
        QCOMPARE(overlap.pixelColor(r.left() + 1, r.top() + 1).rgb(), ui::viridis(0.25));
    }
};

QTEST_MAIN(NeedleViewTest)
#include "needle_view_test.moc"
