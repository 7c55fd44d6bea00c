// TokenStrip paints each token in the colour of its status and describes it on hover.
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/palette.h"
#include "widgets/token_strip.h"

using namespace kvlens;

class TokenStripTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void paintsStatusColours() {
        ui::TokenStrip strip;
        strip.resize(400, 60);
        strip.setData(test::makeTrace(12), 1, 0, 1);
        const QImage img = strip.grab().toImage();
        for (int i = 0; i < 12; ++i) {
            const QPoint c = strip.cellRect(i).center();
            QCOMPARE(img.pixelColor(c), ui::statusColour(test::statusPattern(i)));
        }
        // The full cache's strip holds everything.
        strip.setData(test::makeTrace(12), 0, 0, 1);
        const QImage full = strip.grab().toImage();
        QCOMPARE(full.pixelColor(strip.cellRect(3).center()), ui::statusColour(TokenStatus::Held));
    }

    void statusColoursAreDistinct() {
        const TokenStatus all[] = {TokenStatus::Unseen, TokenStatus::Held, TokenStatus::Score,
                                   TokenStatus::Sink, TokenStatus::Window, TokenStatus::Evicted};
        for (TokenStatus a : all)
            for (TokenStatus b : all)
                if (a != b) QVERIFY(ui::statusColour(a) != ui::statusColour(b));
    }

    void wrapsIntoRows() {
        ui::TokenStrip strip;
        strip.setData(test::makeTrace(60), 1, 0, 0);
        QVERIFY(strip.heightForWidth(100) > strip.heightForWidth(400));
        strip.resize(100, strip.heightForWidth(100));
        QVERIFY(strip.cellRect(59).top() > strip.cellRect(0).top());
        QCOMPARE(strip.indexAt(strip.cellRect(17).center()), 17);
        // Thousands of tokens shrink the cells instead of growing the strip.
        strip.setData(test::makeTrace(4000), 1, 0, 0);
        QVERIFY(strip.heightForWidth(300) <= 170);
        strip.resize(300, strip.heightForWidth(300));
        QCOMPARE(strip.indexAt(strip.cellRect(3999).center()), 3999);
        const QImage img = strip.grab().toImage();
        QCOMPARE(img.pixelColor(strip.cellRect(3999).center()), ui::statusColour(test::statusPattern(3999)));
    }

    void tooltipShowsScoreRankAndCutoff() {
        ui::TokenStrip strip;
        strip.resize(400, 60);
        strip.setData(test::makeTrace(12), 1, 1, 0);
        const QString kept = strip.describe(2);  // kept by score, score 0.27, rank 0
        QVERIFY2(kept.contains("w2") && kept.contains("kept by score"), qPrintable(kept));
        QVERIFY2(kept.contains("score 0.27") && kept.contains("rank 0") && kept.contains("cut-off 0.2"), qPrintable(kept));
        const QString evicted = strip.describe(3);
        QVERIFY2(evicted.contains("evicted") && !evicted.contains("rank"), qPrintable(evicted));
        QVERIFY(strip.describe(11).contains("generated"));
    }
};

QTEST_MAIN(TokenStripTest)
#include "token_strip_test.moc"
