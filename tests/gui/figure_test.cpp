// widgets/figure: the exported PNG, SVG and PDF of a hand-built trace are
// valid, non-trivial files (decoded back), the PNG's size follows the scale,
// the title names the run, and evicted keys are drawn in the NaN colour.
// Every write goes through ui::saveThrough: a failed one (a full disk, a
// writer that gives up) says why and leaves the old file byte for byte.
#include <QDir>
#include <QImage>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "trace_fixtures.h"
#include "widgets/figure.h"
#include "widgets/save_file.h"
#include "write_fixtures.h"

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

using test::FileSizeLimit;
using test::readAll;
using test::writeBytes;

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
        // Issue 21 item 11: the grid names its axes (a caption line at the
        // bottom) and the key axis's ends under each panel.
        const QString png = dir.filePath(QStringLiteral("g.png"));
        QCOMPARE(ui::writeFigure(png, ui::gridFigureSize(3, 3), 1,
                                 [&](QPainter& p, const QRectF& a) { ui::paintGridFigure(p, a, panels, 3, QStringLiteral("grid")); }),
                 QString());
        const QImage g(png);
        int dark = 0;
        for (int y = g.height() - 12; y < g.height() - 2; ++y)
            for (int x = 0; x < g.width() / 2; ++x) dark += QColor(g.pixel(x, y)).lightness() < 128;
        QVERIFY2(dark > 50, qPrintable(QStringLiteral("%1 dark pixels in the caption line").arg(dark)));
    }

    // A figure that does not fit (the disk is full) is an error naming the
    // file and why, and the figure that was there is still there.
    void aFailedWriteLeavesTheOldFile() {
        QTemporaryDir dir;
        for (const char* suffix : {"png", "svg", "pdf"}) {
            const QString file = dir.filePath(QStringLiteral("old.%1").arg(QLatin1String(suffix)));
            const QByteArray old = writeBytes(file, QByteArray("the figure the user already has\n").repeated(20));
            QString error;
            {
                FileSizeLimit limit(1024);
                error = write(file, fixtureView(), 2);
            }
            QVERIFY2(error.startsWith(QStringLiteral("cannot write %1: ").arg(file)), qPrintable(error));
            QVERIFY2(error.contains(QStringLiteral("File too large")), qPrintable(error));
            QCOMPARE(readAll(file), old);
        }
        // No temporary file is left beside them.
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 3);
        // Without the limit the same write replaces the file.
        const QString png = dir.filePath(QStringLiteral("old.png"));
        QCOMPARE(write(png, fixtureView(), 2), QString());
        QVERIFY(!QImage(png).isNull());
    }

    // A writer that gives up halfway: its reason, and the old file untouched.
    void aWriterThatFailsLeavesTheOldFile() {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("data.png"));
        const QByteArray old = writeBytes(file, "old bytes");
        const QString error = ui::saveThrough(file, [](QIODevice& out) {
            out.write(QByteArray(100000, 'x'));
            return QStringLiteral("the renderer gave up");
        });
        QCOMPARE(error, QStringLiteral("cannot write %1: the renderer gave up").arg(file));
        QCOMPARE(readAll(file), old);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{QStringLiteral("data.png")});
        QCOMPARE(ui::saveThrough(file, [](QIODevice& out) { return out.write("new") == 3 ? QString() : QStringLiteral("?"); }),
                 QString());
        QCOMPARE(readAll(file), QByteArray("new"));
    }

    // /dev/full (named directly, or through a link with a figure's suffix)
    // is written directly, never replaced, and the write error is reported.
    void writingToDevFullIsAnError() {
        if (!QFileInfo::exists(QStringLiteral("/dev/full"))) QSKIP("no /dev/full");
        const QString error = ui::saveThrough(QStringLiteral("/dev/full"), [](QIODevice& out) {
            out.write(QByteArray(70000, 'x'));
            return QString();
        });
        QCOMPARE(error, QStringLiteral("cannot write /dev/full: No space left on device"));
        QTemporaryDir dir;
        for (const char* suffix : {"png", "svg", "pdf"}) {
            const QString link = dir.filePath(QStringLiteral("full.%1").arg(QLatin1String(suffix)));
            QVERIFY(QFile::link(QStringLiteral("/dev/full"), link));
            const QString e = write(link, fixtureView(), 2);
            QVERIFY2(e.contains(QStringLiteral("No space left on device")), qPrintable(suffix + (": " + e)));
            QVERIFY(QFileInfo(link).isSymLink());
        }
        QVERIFY(!QFileInfo(QStringLiteral("/dev/full")).isFile());  // still the device
        QVERIFY(ui::saveThrough(dir.path(), [](QIODevice&) { return QString(); }).contains(QStringLiteral("folder")));
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
