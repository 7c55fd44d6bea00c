// AttentionHeatmap: evicted keys in their own colour, shared colour range,
// zoom/pan, and a max-pool level of detail that keeps heavy hitters.
#include <QPainter>
#include <QtTest>
#include <cmath>

#include "trace_fixtures.h"
#include "widgets/attention_heatmap.h"
#include "widgets/attention_lod.h"
#include "widgets/comparison_view.h"
#include "widgets/palette.h"
#include "widgets/policy_column.h"

using namespace kvlens;

class AttentionHeatmapTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void marksEvictedKeys() {
        auto trace = test::makeTrace(12);
        ui::AttentionHeatmap map;
        map.resize(300, 300);
        map.setColourRange({0, 1});
        map.setMap(trace, std::make_shared<ui::AttentionLod>(trace->attention[1]), 1, 5);
        const QImage img = map.grab().toImage();
        QCOMPARE(img.pixelColor(map.cellCentre(8, 3)), ui::evictedColour());   // evicted key
        QCOMPARE(img.pixelColor(map.cellCentre(2, 7)), ui::futureColour());    // after the query
        const QColor kept = img.pixelColor(map.cellCentre(8, 2));
        QVERIFY(kept != ui::evictedColour() && kept != ui::futureColour());
        QCOMPARE(kept.rgb(), ui::viridis(ui::normalise(1.0f / 9, {0, 1}, ui::ColourScale::Linear)));
        // Before the eviction (query 4) key 3 is still held.
        QVERIFY(img.pixelColor(map.cellCentre(4, 3)) != ui::evictedColour());
    }

    // Issue 21 item 11: the colour bar's labels are short enough to fit (the
    // log scale's minimum was cut to "9.3e-"), and the title names the axes
    // where the column is wide enough.
    void colourBarLabelsFitAndTheTitleNamesTheAxes() {
        QCOMPARE(ui::AttentionHeatmap::compactNumber(9.3e-05), QStringLiteral("9e-5"));
        QCOMPARE(ui::AttentionHeatmap::compactNumber(0.25), QStringLiteral("0.25"));
        QCOMPARE(ui::AttentionHeatmap::compactNumber(1), QStringLiteral("1"));
        QCOMPARE(ui::AttentionHeatmap::compactNumber(0), QStringLiteral("0"));
        QCOMPARE(ui::AttentionHeatmap::compactNumber(0.00099), QStringLiteral("1e-3"));
        QCOMPARE(ui::AttentionHeatmap::compactNumber(12345), QStringLiteral("1e4"));
        QFont f;
        f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
        for (double v : {9.3e-05, 1.2e-7, 0.0031, 0.99})
            QVERIFY(QFontMetrics(f).horizontalAdvance(ui::AttentionHeatmap::compactNumber(v)) <= 26);  // kBarGap - 4
        auto trace = test::makeTrace(12);
        // At presenter sizes (1.5× text, issue 50 item 8) the bar's room grows
        // with the text: "1e-4" stays inside the widget.
        {
            ui::AttentionHeatmap big;
            QFont large = big.font();
            large.setPointSizeF(large.pointSizeF() * 1.5);
            big.setFont(large);
            big.resize(300, 300);
            QFont label = large;
            label.setPointSizeF(std::max(6.0, large.pointSizeF() * 0.8));
            const int room = big.width() - big.plotRect().right() - 6 - 8 - 3;  // gap, bar, label margin
            QVERIFY2(QFontMetrics(label).horizontalAdvance(QStringLiteral("1e-4")) <= room, qPrintable(QString::number(room)));
        }
        ui::AttentionHeatmap map;
        map.setMap(trace, std::make_shared<ui::AttentionLod>(trace->attention[1]), 1, 5);
        const QString full = QStringLiteral("attention L1 H5 · query ↓ key →"), shorter = QStringLiteral("L1 H5 · query ↓ key →");
        map.resize(map.fontMetrics().horizontalAdvance(full) + 8, 300);
        QCOMPARE(map.titleText(), full);
        map.resize(map.fontMetrics().horizontalAdvance(shorter) + 8, 300);
        QCOMPARE(map.titleText(), shorter);
        map.resize(map.fontMetrics().horizontalAdvance(shorter) - 8, 300);
        QCOMPARE(map.titleText(), QStringLiteral("attention L1 H5"));
    }

    void colourScales() {
        const ui::ColourRange r{0.001f, 1};
        QCOMPARE(ui::normalise(1, r, ui::ColourScale::Linear), 1.0);
        QVERIFY(std::abs(ui::normalise(0.25f, {0, 1}, ui::ColourScale::Power) - 0.5) < 1e-6);
        QVERIFY(std::abs(ui::normalise(0.0316228f, r, ui::ColourScale::Log) - 0.5) < 1e-3);
        QCOMPARE(ui::colourScaleFromName(ui::colourScaleName(ui::ColourScale::Log)), ui::ColourScale::Log);
    }

    void sharedColourRangeAcrossColumns() {
        auto trace = test::makeTrace(12);
        trace->attention[1].rows[0] = std::make_shared<const std::vector<float>>(1, 4.0f);  // only the h2o column has this weight
        ui::ComparisonView view;
        view.resize(800, 600);
        view.setTrace(trace);
        QCOMPARE(view.columnCount(), 2);
        QCOMPARE(view.colourRange().hi, 4.0f);
        // The same weight paints the same colour in both columns.
        const QImage a = view.column(0)->heatmap()->grab().toImage();
        const QImage b = view.column(1)->heatmap()->grab().toImage();
        const auto* ha = view.column(0)->heatmap();
        const auto* hb = view.column(1)->heatmap();
        QCOMPARE(a.pixelColor(ha->cellCentre(9, 1)), b.pixelColor(hb->cellCentre(9, 1)));
    }

    void comparisonPaintsOntoAnyPainter() {
        ui::ComparisonView view;
        view.resize(800, 600);
        view.setTrace(test::makeTrace(12));
        for (const QSize size : {QSize(1600, 1000), QSize(500, 400)}) {
            QImage img(size, QImage::Format_RGB32);
            img.fill(Qt::black);
            QPainter p(&img);
            view.paint(p, img.rect());
            p.end();
            bool strip = false, map = false;
            for (int y = 0; y < img.height(); ++y)
                for (int x = 0; x < img.width(); ++x) {
                    const QColor c = img.pixelColor(x, y);
                    strip = strip || c == ui::statusColour(TokenStatus::Evicted);
                    map = map || c == ui::evictedColour();
                }
            QVERIFY2(strip && map, qPrintable(QStringLiteral("%1x%2").arg(size.width()).arg(size.height())));
        }
    }

    void zoomAndPan() {
        auto trace = test::makeTrace(64);
        ui::AttentionHeatmap map;
        map.resize(300, 300);
        map.setMap(trace, std::make_shared<ui::AttentionLod>(trace->attention[0]), 1, 5);
        QCOMPARE(map.view().width(), 64.0);
        QSignalSpy changed(&map, &ui::AttentionHeatmap::viewChanged);
        const QPoint centre = map.plotRect().center();
        QWheelEvent wheel(centre, map.mapToGlobal(centre), {}, {0, 240}, Qt::NoButton, Qt::NoModifier,
                          Qt::NoScrollPhase, false);
        QApplication::sendEvent(&map, &wheel);
        QVERIFY(map.view().width() < 64.0 * 0.7);
        QCOMPARE(changed.count(), 1);
        const QRectF zoomed = map.view();
        QTest::mousePress(&map, Qt::LeftButton, {}, centre);
        QTest::mouseMove(&map, centre + QPoint(-60, -60));
        QTest::mouseRelease(&map, Qt::LeftButton, {}, centre + QPoint(-60, -60));
        QVERIFY(map.view().left() > zoomed.left() && map.view().top() > zoomed.top());
        QTest::mouseDClick(&map, Qt::LeftButton, {}, centre);
        QCOMPARE(map.view().width(), 64.0);
    }

    void levelOfDetailKeepsHeavyHitters() {
        std::vector<float> values(1024 * 1024, 0.001f);
        for (int q = 0; q < 1024; ++q) {
            values[static_cast<size_t>(q * 1024 + 517)] = 0.9f;  // one heavy-hitter key
            for (int k = q + 1; k < 1024; ++k) values[static_cast<size_t>(q * 1024 + k)] = kNoScore;
        }
        values[static_cast<size_t>(1000 * 1024 + 3)] = kNoScore;  // an evicted cell among kept ones
        ui::AttentionLod lod(AttentionMap::fromDense(0, 0, 1024, values));
        QVERIFY(lod.levels() >= 10);
        const int level = lod.levelFor(8.0);
        QCOMPARE(level, 3);
        QCOMPARE(lod.levelSize(level), int64_t{128});
        QCOMPARE(lod.at(level, 1000 / 8, 517 / 8), 0.9f);             // survives pooling
        QCOMPARE(lod.at(level, 1000 / 8, 3 / 8), 0.001f);             // kept values win over one NaN
        QVERIFY(ui::AttentionLod::isFuture(lod.at(level, 0, 100)));   // wholly after the queries
        QVERIFY(ui::AttentionLod::isEvicted(lod.at(0, 1000, 3)));
    }

    // SPEC "Performance": an 8192 x 8192 map pans and zooms at >= 30 frames/s
    // (the pyramid makes a frame's cost follow the widget's pixels, not the map's).
    void rendersLargeMapsQuickly() {
        const int64_t size = 8192;
        std::vector<float> values(static_cast<size_t>(size * size), 0.0f);
        for (int64_t q = 0; q < size; ++q) values[static_cast<size_t>(q * size)] = 1.0f;
        const AttentionMap m = AttentionMap::fromDense(0, 0, size, values);
        QElapsedTimer build;
        build.start();
        auto lod = std::make_shared<ui::AttentionLod>(m);
        const qint64 buildMs = build.elapsed();
        auto trace = std::make_shared<Trace>();
        ui::AttentionHeatmap map;
        map.resize(800, 800);
        map.setMap(trace, lod, 0, 0);
        QImage target(800, 800, QImage::Format_RGB32);
        QElapsedTimer timer;
        timer.start();
        constexpr int frames = 60;
        for (int i = 0; i < frames; ++i) {
            // Pan across the map, then zoom in step by step (every pyramid level is visited).
            const double span = i < 30 ? 4096.0 : 8192.0 / std::pow(1.25, i - 30);
            map.setView(QRectF(i * 100.0, i * 90.0, span, span));
            QPainter p(&target);
            map.paint(p, target.rect());
        }
        const double ms = static_cast<double>(timer.elapsed()) / frames;
        qInfo("8192 x 8192 map at 800 x 800: pyramid built in %lld ms; panning and zooming %.2f ms per frame "
              "(%.0f frames/s, target >= 30)",
              static_cast<long long>(buildMs), ms, 1000.0 / std::max(ms, 1e-3));
        QVERIFY2(ms < 1000.0 / 30.0, "slower than 30 frames/s");
        // The first column (the sink) survives max pooling in the rendered frame.
        QPainter p(&target);
        map.setView(QRectF(0, 0, 8192, 8192));
        map.paint(p, target.rect());
        QCOMPARE(target.pixelColor(map.plotRect().left(), map.plotRect().bottom() - 2).rgb(), ui::viridis(1.0));
    }
};

QTEST_MAIN(AttentionHeatmapTest)
#include "attention_heatmap_test.moc"
