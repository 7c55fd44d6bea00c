// TransportBar steps and plays through decode steps; EvictionTimeline rasters
// token status over steps and selects a step on click.
#include <QtTest>

#include "trace_fixtures.h"
#include "widgets/eviction_timeline.h"
#include "widgets/palette.h"
#include "widgets/transport_bar.h"

using namespace kvlens;

class TransportTimelineTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void stepsAndPlays() {
        ui::TransportBar bar;
        bar.setAvailable(5);
        QSignalSpy steps(&bar, &ui::TransportBar::stepChanged);
        bar.stepBy(1);
        bar.stepBy(1);
        QCOMPARE(bar.step(), 2);
        bar.stepBy(10);
        QCOMPARE(bar.step(), 4);  // clamped to the last step
        QCOMPARE(steps.count(), 3);
        bar.setStep(0);           // programmatic: no signal
        QCOMPARE(steps.count(), 3);
        bar.togglePlay();
        QVERIFY(bar.playing());
        QTRY_COMPARE_WITH_TIMEOUT(bar.step(), 4, 5000);
        QTRY_VERIFY_WITH_TIMEOUT(!bar.playing(), 2000);  // stops at the end
    }

    void rastersStatusOverSteps() {
        // Step 0 holds everything; step 1 has the h2o pattern.
        auto before = test::makeTrace(12);
        before->policies[1] = before->policies[0];
        auto after = test::makeTrace(12);
        ui::EvictionTimeline timeline;
        timeline.resize(400, 120);
        timeline.setHistory({before, after});
        timeline.setSelection(1, 0, 0);
        const QImage& r = timeline.raster();
        QCOMPARE(r.size(), QSize(12, 2));
        QCOMPARE(r.pixelColor(3, 0), ui::statusColour(TokenStatus::Held));
        QCOMPARE(r.pixelColor(3, 1), ui::statusColour(TokenStatus::Evicted));
        QCOMPARE(r.pixelColor(0, 1), ui::statusColour(TokenStatus::Sink));
        QSignalSpy selected(&timeline, &ui::EvictionTimeline::stepSelected);
        QTest::mouseClick(&timeline, Qt::LeftButton, {}, QPoint(200, 110));
        QCOMPARE(selected.count(), 1);
        QCOMPARE(selected.at(0).at(0).toInt(), 1);
    }
};

QTEST_MAIN(TransportTimelineTest)
#include "transport_timeline_test.moc"
