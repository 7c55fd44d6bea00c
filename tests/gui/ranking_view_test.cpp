// RankingView: one row per run ranked by mean KL, sortable by any column
// (numbers by value, n/a last), and a mark on runs held at unequal memory.
#include <QCheckBox>
#include <QHeaderView>
#include <QLabel>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/ranking_view.h"

using namespace kvlens;

namespace {

// A run named `id` whose every prediction has KL `kl` while it holds `bytes`.
PolicyTrace runOf(const PolicyTrace& base, const std::string& id, double kl, uint64_t bytes) {
    PolicyTrace p = base;
    p.id = p.label = id;
    for (auto& m : p.metrics) {
        m.kl = kl;
        m.bytesHeld = bytes;
    }
    return p;
}

QStringList column(const QTableWidget* t, int c) {
    QStringList out;
    for (int r = 0; r < t->rowCount(); ++r) out << t->item(r, c)->text();
    return out;
}

}  // namespace

class RankingViewTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void ranksByMeanKlAndMarksUnequalMemory() {
        auto t = test::makeTrace(12);
        const PolicyTrace base = t->policies[1];
        for (auto& m : t->policies[0].metrics) m.bytesHeld = 8192;
        t->policies = {t->policies[0], runOf(base, "window", 0.3, 1000), runOf(base, "snapkv", 0.1, 1300),
                       runOf(base, "h2o", 0.2, 1000)};
        ui::RankingView view;
        view.setTrace(t);
        QTableWidget* table = view.table();
        QCOMPARE(table->rowCount(), 4);
        // The full cache first, then by mean KL: snapkv, h2o, window.
        QCOMPARE(column(table, 1), (QStringList{"full", "snapkv", "h2o", "window"}));
        QCOMPARE(column(table, 0), (QStringList{"–", "1", "2", "3"}));
        QCOMPARE(table->item(1, 3)->text(), QStringLiteral("0.1000"));
        // snapkv held 1300 bytes against the median 1000: marked, and the note says it is no matched comparison.
        QVERIFY(table->item(1, 9)->text().endsWith(QStringLiteral("≠")));
        QVERIFY(!table->item(2, 9)->text().contains(QStringLiteral("≠")));
        QVERIFY2(view.note()->text().contains(QStringLiteral("not a comparison at matched memory")), qPrintable(view.note()->text()));
        QCOMPARE(view.ranking().unequal, 1);

        // Sorting by a column sorts by value, descending too; the full cache's n/a rank stays last.
        table->sortByColumn(3, Qt::DescendingOrder);
        QCOMPARE(column(table, 1), (QStringList{"window", "h2o", "snapkv", "full"}));
        table->sortByColumn(0, Qt::AscendingOrder);
        QCOMPARE(column(table, 1), (QStringList{"snapkv", "h2o", "window", "full"}));

        // Matched to a target every run holds: nothing is marked.
        t->policies[2] = runOf(base, "snapkv", 0.1, 1000);
        view.setTrace(t, 1000.0);
        QCOMPARE(view.ranking().unequal, 0);
        QVERIFY2(view.note()->text().startsWith(QStringLiteral("compared at matched memory")), qPrintable(view.note()->text()));

        // A run that stopped is not ranked, and shows n/a.
        t->policies[2].failure = "logits after position 9 are not finite";
        view.setTrace(t);
        QCOMPARE(column(table, 1).last(), QStringLiteral("snapkv"));
        QCOMPARE(table->item(3, 0)->text(), QStringLiteral("–"));
        QCOMPARE(table->item(3, 3)->text(), QStringLiteral("n/a"));
    }

    void theSwitchAsksForMatchedBudgets() {
        ui::RankingView view;
        QSignalSpy toggled(&view, &ui::RankingView::matchMemoryToggled);
        view.setMatchMemory(true);  // set from a session: no request
        QCOMPARE(toggled.count(), 0);
        view.matchSwitch()->setChecked(false);
        QCOMPARE(toggled.count(), 1);
        QCOMPARE(toggled.last().at(0).toBool(), false);
        view.setTrace(nullptr);
        QCOMPARE(view.table()->rowCount(), 0);
    }
};

QTEST_MAIN(RankingViewTest)
#include "ranking_view_test.moc"
