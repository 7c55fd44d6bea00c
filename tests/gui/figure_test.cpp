// widgets/figure: the exported PNG, SVG and PDF of a hand-built trace are
// valid, non-trivial files (decoded back), the PNG's size follows the scale,
// the title names the run, and evicted keys are drawn in the NaN colour.
#include <QImage>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "trace_fixtures.h"
#include "widgets/figure.h"

using namespace kvlens;

namespace {

ui::FigureView fixtureView(int policy = 1) {
    ui::FigureView v;
    v.trace = test::makeTrace(40);
    v.policy = policy;
    v.layer = 1;
    v.head = 5;
    v.scale = ui::ColourScale::Linear;
    v.model = QStringLiteral("tiny-fixture");
    return v;
}

QString write(const QString& file, const ui::FigureView& v, double scale) {
    return ui::writeFigure(file, ui::attentionFigureSize(v), scale,
                           [&v](QPainter& p, const QRectF& a) { ui::paintAttentionFigure(p, a, v); }, ui::figureTitle(v));
}

QByteArray readAll(const QString& file) {
    QFile f(file);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class FigureTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void titleNamesModelPolicyBudgetHeadAndStep() {
        const ui::FigureView v = fixtureView();
        const QString t = ui::figureTitle(v);
        QVERIFY2(t.contains(QStringLiteral("tiny-fixture")), qPrintable(t));
        QVERIFY2(t.contains(QStringLiteral("h2o")), qPrintable(t));
        QVERIFY2(t.contains(QStringLiteral("budget")), qPrintable(t));
        QVERIFY2(t.contains(QStringLiteral("layer 1")) && t.contains(QStringLiteral("head 5")), qPrintable(t));
        QVERIFY2(t.contains(QStringLiteral("step")), qPrintable(t));
    }

    void pngDecodesAtTheScaleAndShowsTheMap() {
        QTemporaryDir dir;
        const ui::FigureView v = fixtureView();
        const QSizeF size = ui::attentionFigureSize(v);
        for (double scale : {1.0, 2.5}) {
            const QString file = dir.filePath(QStringLiteral("a%1.png").arg(scale));
            QCOMPARE(write(file, v, scale), QString());
            QImage img(file);
            QVERIFY(!img.isNull());
            QCOMPARE(img.width(), qCeil(size.width() * scale));
            QCOMPARE(img.height(), qCeil(size.height() * scale));
            std::set<QRgb> colours;
            int evicted = 0;
            for (int y = 0; y < img.height(); y += 2)
                for (int x = 0; x < img.width(); x += 2) {
                    colours.insert(img.pixel(x, y));
                    evicted += img.pixel(x, y) == ui::evictedColour().rgb();
                }
            QVERIFY2(colours.size() > 20, "a figure is more than a few flat colours");
            QVERIFY2(evicted > 0, "the fixture's evicted column is drawn in the NaN colour");
            QVERIFY(qAbs(img.dotsPerMeterX() - qRound(72 * scale / 0.0254)) <= 1);
        }
    }

    void svgParsesAndCarriesTheTitle() {
        QTemporaryDir dir;
        const ui::FigureView v = fixtureView();
        const QString file = dir.filePath(QStringLiteral("a.svg"));
        QCOMPARE(write(file, v, 2), QString());
        QSvgRenderer svg(file);
        QVERIFY(svg.isValid());
        QVERIFY(svg.defaultSize().width() > 100);
        const QByteArray text = readAll(file);
        QVERIFY(text.contains("tiny-fixture"));
        QVERIFY(text.contains("<text") || text.contains("<path"));
    }

    void pdfHasAPage() {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("a.pdf"));
        QCOMPARE(write(file, fixtureView(), 2), QString());
        const QByteArray pdf = readAll(file);
        QVERIFY(pdf.startsWith("%PDF-"));
        QVERIFY(pdf.contains("/Type /Page") || pdf.contains("/Type/Page"));
        QVERIFY(pdf.size() > 2000);
    }

    void statusAndGridFiguresRender() {
        QTemporaryDir dir;
        ui::FigureView v = fixtureView();
        const QString strip = dir.filePath(QStringLiteral("s.png"));
        QCOMPARE(ui::writeFigure(strip, ui::statusFigureSize(v), 1,
                                 [&v](QPainter& p, const QRectF& a) { ui::paintStatusFigure(p, a, v); }),
                 QString());
        QImage s(strip);
        QVERIFY(!s.isNull());
        // The fixture's evicted status colour appears in policy 1's row.
        bool found = false;
        for (int x = 0; x < s.width() && !found; ++x)
            for (int y = 0; y < s.height() && !found; ++y) found = s.pixel(x, y) == ui::statusColour(TokenStatus::Evicted).rgb();
        QVERIFY(found);
        std::vector<ui::FigureView> panels{fixtureView(0), fixtureView(1), fixtureView(1)};
        const QString grid = dir.filePath(QStringLiteral("g.pdf"));
        QCOMPARE(ui::writeFigure(grid, ui::gridFigureSize(3, 3), 1,
                                 [&](QPainter& p, const QRectF& a) { ui::paintGridFigure(p, a, panels, 3, QStringLiteral("grid")); }),
                 QString());
        QVERIFY(readAll(grid).startsWith("%PDF-"));
        QVERIFY(ui::gridFigureSize(3, 3).width() > ui::gridFigureSize(3, 1).width());
    }

    void unknownFormatAndBadScaleAreRefused() {
        QTemporaryDir dir;
        QVERIFY(!write(dir.filePath(QStringLiteral("a.bmp")), fixtureView(), 1).isEmpty());
        QVERIFY(!write(dir.filePath(QStringLiteral("a.png")), fixtureView(), 0).isEmpty());
        QVERIFY(!write(QStringLiteral("/nonexistent-dir/a.png"), fixtureView(), 1).isEmpty());
    }
};

QTEST_MAIN(FigureTest)
#include "figure_test.moc"
