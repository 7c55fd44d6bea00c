// HeadGrid: layers × query heads, grouped under KV heads; a click selects.
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/comparison_view.h"
#include "widgets/head_grid.h"
#include "widgets/palette.h"
#include "widgets/policy_column.h"
#include "widgets/token_strip.h"

using namespace kvlens;

class HeadGridTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void clickSelects() {
        ui::HeadGrid grid;
        grid.resize(300, 120);
        grid.setData(test::makeTrace(12), 1);
        QSignalSpy selected(&grid, &ui::HeadGrid::headSelected);
        QTest::mouseClick(&grid, Qt::LeftButton, {}, grid.cellRect(1, 6).center());
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.at(0).at(0).value<int64_t>(), int64_t{1});
        QCOMPARE(selected.at(0).at(1).value<int64_t>(), int64_t{6});
        QCOMPARE(grid.selectedHead(), int64_t{6});
    }

    void queryHeadsGroupUnderKvHeads() {
        ui::HeadGrid grid;
        grid.resize(300, 120);
        grid.setData(test::makeTrace(12), 1);
        // 8 query heads over 2 KV heads: the gap between heads 3 and 4 (a new group) is wider.
        const int inGroup = grid.cellRect(0, 3).left() - grid.cellRect(0, 2).right();
        const int acrossGroups = grid.cellRect(0, 4).left() - grid.cellRect(0, 3).right();
        QVERIFY2(acrossGroups > inGroup + 2, qPrintable(QStringLiteral("%1 vs %2").arg(acrossGroups).arg(inGroup)));
        const QImage img = grid.grab().toImage();
        QCOMPARE(img.pixelColor(grid.cellRect(0, 2).center()).rgb(), ui::viridis(0.5));  // retained mass 0.5
    }

    void selectionIsSynchronisedAcrossColumns() {
        ui::ComparisonView view;
        view.resize(800, 600);
        view.setTrace(test::makeTrace(12));
        QSignalSpy changed(&view, &ui::ComparisonView::selectionChanged);
        auto* grid = view.column(1)->grid();
        QTest::mouseClick(grid, Qt::LeftButton, {}, grid->cellRect(1, 5).center());
        QCOMPARE(changed.count(), 1);
        for (int c = 0; c < view.columnCount(); ++c) {
            QCOMPARE(view.column(c)->grid()->selectedLayer(), int64_t{1});
            QCOMPARE(view.column(c)->grid()->selectedHead(), int64_t{5});
        }
        // Query head 5 reads KV head 1: the strips follow (held count of L1 KV1).
        QVERIFY(view.column(1)->strip()->describe(0).contains("L1 KV1"));
    }
};

QTEST_MAIN(HeadGridTest)
#include "head_grid_test.moc"
