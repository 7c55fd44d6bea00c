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

    // Issue 21 item 11: each panel titles its axes ("needle depth" under the
    // columns, "context (tokens)" beside the rows): ink where the titles go.
    void panelsTitleTheirAxes() {
        ui::NeedleView view;
        view.resize(500, 300);
        view.setResult(makeGrid());
        const QImage img = view.grab().toImage();
        const QColor base = view.palette().color(QPalette::Base);
        auto ink = [&](const QRect& r) {
            int n = 0;
            for (int y = r.top(); y <= r.bottom(); ++y)
                for (int x = r.left(); x <= r.right(); ++x) n += img.pixelColor(x, y) != base;
            return n;
        };
        const QRect topLeft = view.cellRect(0, 0, 0), bottomRight = view.cellRect(0, 1, 1);
        // Left of the context numbers, along the rows.
        QVERIFY(ink(QRect(topLeft.left() - 52, topLeft.top(), 12, bottomRight.bottom() - topLeft.top())) > 20);
        // Under the depth labels, across the columns.
        QVERIFY(ink(QRect(topLeft.left(), bottomRight.bottom() + 16, bottomRight.right() - topLeft.left(), 11)) > 20);
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
