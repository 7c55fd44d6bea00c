// The comparison view keeps its columns aligned however many there are: one
// width, one header height, so a token sits in the same place in every
// strip and every heatmap starts at the same height; headers wrap between
// their items, never inside one; below a readable width the columns scroll
// sideways; the token under the mouse is marked in every column.
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/attention_heatmap.h"
#include "widgets/comparison_view.h"
#include "widgets/policy_column.h"
#include "widgets/token_strip.h"

using namespace kvlens;

namespace {

// full + `policies` evicting runs whose headers differ in length (labels,
// a re-rotation mark, budget notes of one and several lines).
std::shared_ptr<Trace> wideTrace(int policies, int tokens = 60) {
    auto t = test::makeTrace(tokens);
    const PolicyTrace evicting = t->policies[1];
    const AttentionMap map = t->attention[1];
    t->policies.resize(1);
    t->attention.resize(1);
    for (int i = 0; i < policies; ++i) {
        PolicyTrace p = evicting;
        p.label = i % 3 == 0 ? "h2o" : i % 3 == 1 ? "snapkv:window=16" : "pyramidkv:beta=20,window=8";
        p.schedule = i % 2 ? "prefill_once" : "every_step";
        p.rerotate = i % 4 == 1;
        p.bytesHeld = 4096 + static_cast<uint64_t>(i) * 1000;
        if (i == 2) p.budgetNote = "budget 64 is above the context: it keeps everything";
        p.metrics[0].kl = 0.123456 * (i + 1);
        t->policies.push_back(p);
        t->attention.push_back(map);
    }
    return t;
}

QPoint inView(const ui::ComparisonView& v, const QWidget* w) { return w->mapTo(&v, QPoint(0, 0)); }

void hoverOver(ui::TokenStrip* strip, int token) {
    const QPoint pos = strip->cellRect(token).center();
    QMouseEvent move(QEvent::MouseMove, pos, strip->mapToGlobal(pos), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QCoreApplication::sendEvent(strip, &move);
}

// The view at `size` with full + `policies` runs, on screen.
bool show(ui::ComparisonView& v, QSize size, int policies) {
    v.resize(size);
    v.setTrace(wideTrace(policies));
    v.show();
    return QTest::qWaitForWindowExposed(&v);
}

bool hasColourNear(const QImage& img, const QRect& around, const QColor& colour) {
    for (int y = around.top(); y <= around.bottom(); ++y)
        for (int x = around.left(); x <= around.right(); ++x)
            if (img.rect().contains(x, y) && img.pixelColor(x, y) == colour) return true;
    return false;
}

}  // namespace

class ComparisonViewTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void eightPoliciesAlignAndScroll() {
        ui::ComparisonView v;
        QVERIFY(show(v, {700, 760}, 8));
        QCOMPARE(v.columnCount(), 9);
        // Too many to fit: each keeps the readable width and the view scrolls.
        QCOMPARE(v.columnWidth(), v.minimumColumnWidth());
        QTRY_VERIFY(v.scrollArea()->horizontalScrollBar()->maximum() > 0);
        QVERIFY(v.minimumSizeHint().width() < 700);  // the window need not grow
        const ui::PolicyColumn* first = v.column(0);
        for (int i = 0; i < v.columnCount(); ++i) {
            const ui::PolicyColumn* c = v.column(i);
            QCOMPARE(c->width(), v.columnWidth());
            QCOMPARE(inView(v, c->strip()).y(), inView(v, first->strip()).y());
            QCOMPARE(inView(v, c->heatmap()).y(), inView(v, first->heatmap()).y());
            QCOMPARE(c->heatmap()->height(), first->heatmap()->height());
            QCOMPARE(c->strip()->width(), first->strip()->width());
            for (int token : {0, 17, 59}) QCOMPARE(c->strip()->cellRect(token), first->strip()->cellRect(token));
        }
        // The tallest header (the budget note) sets every header's height.
        QVERIFY(v.column(3)->headerText().contains(QStringLiteral("above the context")));
    }

    // The hindsight oracle's column says it is a bound, not a policy; the others do not.
    void theOraclesHeaderSaysItIsNotDeployable() {
        auto t = wideTrace(2);
        t->policies[1].id = t->policies[1].label = "oracle";
        ui::ComparisonView v;
        v.resize(900, 700);
        v.setTrace(t);
        QVERIFY2(v.column(1)->headerText().contains(QStringLiteral("hindsight: not deployable")),
                 qPrintable(v.column(1)->headerText()));
        QVERIFY(!v.column(2)->headerText().contains(QStringLiteral("hindsight")));
    }

    void headersWrapBetweenItems() {
        ui::ComparisonView v;
        QVERIFY(show(v, {700, 760}, 8));
        int wrapped = 0;
        for (int i = 1; i < v.columnCount(); ++i) {
            const auto* label = v.column(i)->findChild<QLabel*>();
            QVERIFY(label);
            QTextDocument doc;
            doc.setDefaultFont(label->font());
            doc.setHtml(label->text());
            doc.setTextWidth(label->width());
            QVERIFY(doc.size().height() > 0);  // laid out
            // The line after the label (a <br/>, so the same block): schedule · KV · KL · top-1.
            const QTextBlock block = doc.begin();
            const QString all = block.text();
            const int start = all.indexOf(QChar::LineSeparator) + 1;
            int end = all.indexOf(QChar::LineSeparator, start);
            if (end < 0) end = static_cast<int>(all.size());
            QVERIFY2(start > 0 && all.mid(start, end - start).contains(QStringLiteral("KV")), qPrintable(all));
            const QTextLayout* layout = block.layout();
            for (int l = 0; l < layout->lineCount(); ++l) {
                const QTextLine line = layout->lineAt(l);
                const int lineEnd = line.textStart() + line.textLength();
                if (lineEnd <= start || lineEnd >= end) continue;  // not a wrap inside the items line
                const QString text = all.mid(line.textStart(), line.textLength());
                QVERIFY2(text.endsWith(QStringLiteral("· ")), qPrintable(QStringLiteral("column %1 wraps inside an item: “%2”")
                                                                                  .arg(i).arg(text)));
                ++wrapped;
            }
        }
        QVERIFY(wrapped > 0);  // at this width some header does wrap
    }

    void fewColumnsFillTheWidth() {
        ui::ComparisonView v;
        QVERIFY(show(v, {1200, 700}, 3));
        QCOMPARE(v.scrollArea()->horizontalScrollBar()->maximum(), 0);
        QVERIFY(v.columnWidth() > v.minimumColumnWidth());
        QVERIFY(v.columnWidth() * 4 >= v.scrollArea()->viewport()->width() - 4 * 6 - 4);
        // Zoomed text widens the minimum and the view keeps the columns whole.
        QFont big = v.font();
        big.setPointSizeF(big.pointSizeF() * 2);
        const int before = v.minimumColumnWidth();
        v.setFont(big);
        QTRY_VERIFY(v.minimumColumnWidth() > before);
        QTRY_VERIFY(v.columnWidth() >= v.minimumColumnWidth());
    }

    void hoveringATokenMarksItInEveryColumn() {
        ui::ComparisonView v;
        QVERIFY(show(v, {1400, 760}, 4));
        hoverOver(v.column(0)->strip(), 17);
        QCOMPARE(v.hoverToken(), 17);
        for (int i = 0; i < v.columnCount(); ++i) {
            QCOMPARE(v.column(i)->strip()->hoverToken(), 17);
            QCOMPARE(v.column(i)->heatmap()->hoverToken(), int64_t{17});
        }
        // The mark is drawn: the hover yellow round token 17 in another column's strip, none round token 30.
        const QColor hover(0xF0, 0xE4, 0x42);
        ui::TokenStrip* other = v.column(3)->strip();
        const QImage img = other->grab().toImage();
        const QRect cell = other->cellRect(17);
        QVERIFY(hasColourNear(img, cell.adjusted(-4, -4, 4, 4), hover));
        QVERIFY(!hasColourNear(img, other->cellRect(30).adjusted(-1, -1, 1, 1), hover));
        // and across the heatmap's key column.
        ui::AttentionHeatmap* map = v.column(2)->heatmap();
        const QImage mapImg = map->grab().toImage();
        const QPoint centre = map->cellCentre(40, 17);
        QVERIFY(hasColourNear(mapImg, QRect(centre - QPoint(3, 0), QSize(7, 1)), hover));
        // Another token in another column moves the mark; leaving clears it.
        hoverOver(v.column(4)->strip(), 5);
        QCOMPARE(v.column(1)->strip()->hoverToken(), 5);
        QEvent leave(QEvent::Leave);
        QCoreApplication::sendEvent(v.column(4)->strip(), &leave);
        for (int i = 0; i < v.columnCount(); ++i) QCOMPARE(v.column(i)->strip()->hoverToken(), -1);
        QCOMPARE(v.column(0)->heatmap()->hoverToken(), int64_t{-1});
    }
};

QTEST_MAIN(ComparisonViewTest)
#include "comparison_view_test.moc"
