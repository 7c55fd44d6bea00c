// AgreementView: the Jaccard matrix of the kept sets of every pair of
// eviction runs (selected layer × KV head, or the mean), and a clicked cell
// rings the tokens one run keeps and the other evicts.
#include <QComboBox>
#include <QLabel>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/agreement_view.h"

using namespace kvlens;

Q_DECLARE_METATYPE(std::vector<int64_t>)

class AgreementViewTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void matrixAndPickedTokens() {
        auto t = test::makeTrace(12);  // full + h2o (statusPattern: positions 0,1,2,4 of every 6 held)
        PolicyTrace other = t->policies[1];
        other.id = other.label = "snapkv";
        // Layer 1, KV head 1: snapkv evicts position 2 (h2o keeps it) and holds 3 (h2o evicted it).
        auto& st = other.layers[1].heads[1].status;
        st[2] = TokenStatus::Evicted;
        st[3] = TokenStatus::Score;
        t->policies.push_back(other);

        ui::AgreementView view;
        QSignalSpy picked(&view, &ui::AgreementView::tokensPicked);
        view.setTrace(t);
        view.setSelection(1, 5);  // query head 5 of 8 over 2 KV heads: KV head 1
        QCOMPARE(view.table()->rowCount(), 2);
        QCOMPARE(view.table()->columnCount(), 2);
        QCOMPARE(view.table()->horizontalHeaderItem(1)->text(), QStringLiteral("2"));
        QCOMPARE(view.table()->verticalHeaderItem(1)->text(), QStringLiteral("2 snapkv"));
        // Held in h2o's row of 12: 0,1,2,4 and 6,7,8,10 -> 8; snapkv: 0,1,3,4,6,7,8,10; 7 shared of 9.
        QCOMPARE(view.table()->item(0, 1)->text(), QString::number(7.0 / 9.0, 'f', 3));
        QCOMPARE(view.table()->item(1, 1)->text(), QStringLiteral("1.000"));
        // Squeezed, a cell keeps its number on one line (it wrapped "0." / "778").
        view.resize(90, 200);
        view.show();
        QApplication::processEvents();
        QVERIFY(!view.table()->wordWrap());
        QVERIFY(view.table()->columnWidth(1) >= view.table()->fontMetrics().horizontalAdvance(QStringLiteral("0.778")));
        view.hide();
        // The mean over 2 layers x 2 KV heads: three identical heads and this one.
        view.setSelectedHeadOnly(false);
        QCOMPARE(view.table()->item(0, 1)->text(), QString::number((3 + 7.0 / 9.0) / 4, 'f', 3));
        QCOMPARE(keptJaccardMean(t->policies[1], t->policies[2]), (3 + 7.0 / 9.0) / 4);

        view.pick(0, 1);
        QVERIFY(!picked.isEmpty());
        const auto tokens = picked.last().at(0).value<std::vector<int64_t>>();
        QCOMPARE(tokens, (std::vector<int64_t>{2, 3}));
        QVERIFY(view.detail()->text().contains(QStringLiteral("h2o keeps 1 tokens snapkv evicts")));
        // Another head: the two agree there, nothing to ring.
        view.setSelection(0, 0);
        QCOMPARE(picked.last().at(0).value<std::vector<int64_t>>(), std::vector<int64_t>{});
    }

    void nothingHeldIsNotANumber() {
        auto t = test::makeTrace(12);
        for (auto& l : t->policies[1].layers)
            for (auto& h : l.heads) std::fill(h.status.begin(), h.status.end(), TokenStatus::Evicted);
        ui::AgreementView view;
        view.setTrace(t);
        QCOMPARE(view.table()->item(0, 0)->text(), QStringLiteral("n/a"));
        // Only the full cache: nothing to compare.
        t->policies.resize(1);
        view.setTrace(t);
        QCOMPARE(view.table()->rowCount(), 0);
    }
};

QTEST_MAIN(AgreementViewTest)
#include "agreement_view_test.moc"
