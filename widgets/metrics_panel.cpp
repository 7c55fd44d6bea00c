#include "widgets/metrics_panel.h"

#include "widgets/appearance.h"

#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QImage>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <QSplitter>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>
#include <cmath>

#include "widgets/metric_text.h"
#include "widgets/palette.h"
#include "widgets/save_file.h"
#include "widgets/qcustomplot_include.h"

namespace kvlens::ui {
namespace {

QCustomPlot* makePlot(QWidget* parent, const QString& title, const QString& x, const QString& y) {
    auto* plot = new QCustomPlot(parent);
    QFont small = parent->font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
    plot->plotLayout()->insertRow(0);
    QFont bold = small;
    bold.setBold(true);
    plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, bold));
    plot->setProperty("fullTitle", title);  // fitTitles() breaks it over two lines when it is wider than the plot
    for (QCPAxis* a : {plot->xAxis, plot->yAxis}) {
        a->setTickLabelFont(small);
        a->setLabelFont(small);
    }
    plot->xAxis->setLabel(x);
    plot->yAxis->setLabel(y);
    plot->legend->setFont(small);
    plot->legend->setRowSpacing(-3);
    plot->setMinimumSize(160, 130);
    stylePlot(plot);  // the current zoom and theme
    return plot;
}

// A line across the plot saying why it is empty (replaces the one before; "" removes it).
void setPlotNote(QCustomPlot* plot, const QString& text) {
    for (int i = plot->itemCount() - 1; i >= 0; --i)
        if (plot->item(i)->objectName() == QLatin1String("note")) plot->removeItem(i);
    if (text.isEmpty()) return;
    auto* note = new QCPItemText(plot);
    note->setObjectName(QStringLiteral("note"));
    note->position->setType(QCPItemPosition::ptAxisRectRatio);
    note->position->setCoords(0.5, 0.5);
    note->setText(text);
    note->setTextAlignment(Qt::AlignCenter);
    note->setColor(QApplication::palette().color(QPalette::Disabled, QPalette::WindowText));
}

QCPGraph* addSeries(QCustomPlot* plot, const QString& name, const QColor& colour, const QVector<double>& x,
                    const QVector<double>& y) {
    QCPGraph* g = plot->addGraph();
    g->setName(name);
    g->setPen(seriesPen(colour, 1.5));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 3));
    g->setData(x, y, true);
    return g;
}

// The legend's name of a run: its label, marked when it stopped (its
// reason is in the outputs below and in its column's header).
QString seriesName(const PolicyTrace& p) {
    const QString label = QString::fromStdString(p.label);
    return p.failure.empty() ? label : QStringLiteral("%1 (stopped)").arg(label);
}

}  // namespace

MetricsPanel::MetricsPanel(QWidget* parent)
    : QWidget(parent),
      m_kl(makePlot(this, tr("next-token KL(full ‖ policy)"), tr("decode step"), tr("nats"))),
      m_agree(makePlot(this, tr("top-1 agreement (running)"), tr("decode step"), tr("%"))),
      m_mass(makePlot(this, tr("retained attention mass"), tr("layer"), tr("share"))),
      m_memory(makePlot(this, tr("KV memory held"), QString(), tr("KiB"))),
      m_outputs(new QTextBrowser(this)) {
    auto* plots = new QWidget(this);
    auto* grid = new QGridLayout(plots);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->addWidget(m_kl, 0, 0);
    grid->addWidget(m_agree, 0, 1);
    grid->addWidget(m_mass, 1, 0);
    grid->addWidget(m_memory, 1, 1);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(plots);
    split->addWidget(m_outputs);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(split);
    m_outputs->setPlaceholderText(tr("Each policy's output appears here once a run has decode steps."));
    // The legend under the plot, not over its points and ticks.
    m_mass->legend->setVisible(true);
    legendBelowAxes(m_mass, 2);  // two a row: a dock-wide plot holds two names whole
    m_mass->legend->setIconSize(14, 8);
    m_mass->legend->setIconTextPadding(3);
    m_mass->legend->setMargins(QMargins(2, 0, 2, 0));
}

void MetricsPanel::setTokenPieces(TokenPieces pieces) { m_tokenPieces = std::move(pieces); }

void MetricsPanel::fitTitles() {
    for (QCustomPlot* plot : {m_kl, m_agree, m_mass, m_memory}) {
        auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
        const QString full = plot->property("fullTitle").toString();
        if (!title || full.isEmpty()) continue;
        QString text = full;
        if (QFontMetrics(title->font()).horizontalAdvance(full) > plot->width() - 8) {
            // Two lines, broken before a bracket or at the middle space.
            int at = full.indexOf(QStringLiteral(" ("));
            if (at < 0) at = full.lastIndexOf(QLatin1Char(' '), full.size() / 2);
            if (at < 0) at = full.indexOf(QLatin1Char(' '));
            if (at > 0) text = full.left(at) + QLatin1Char('\n') + full.mid(at + 1);
        }
        if (title->text() != text) {
            title->setText(text);
            plot->replot(QCustomPlot::rpQueuedReplot);
        }
    }
}

void MetricsPanel::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    QTimer::singleShot(0, this, &MetricsPanel::fitTitles);  // once the plots have their new sizes
}

void MetricsPanel::changeEvent(QEvent* e) {
    QWidget::changeEvent(e);
    if (e->type() == QEvent::FontChange) QTimer::singleShot(0, this, &MetricsPanel::fitTitles);  // after stylePlot
}

QStringList MetricsPanel::tokenPieces(const std::vector<int64_t>& ids) const {
    if (m_tokenPieces) return m_tokenPieces(ids);
    QStringList out;
    for (int64_t id : ids) out << QStringLiteral("#%1 ").arg(id);
    return out;
}

void MetricsPanel::setTrace(std::shared_ptr<const Trace> trace) {
    if (!trace || trace->policies.empty()) return;
    plotSteps(trace);
    plotMass(*trace);
    plotMemory(*trace);
    showOutputs(*trace);
}

QString MetricsPanel::plotNote(const QCustomPlot* plot) {
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)); text && text->objectName() == QLatin1String("note"))
            return text->text();
    return {};
}

void MetricsPanel::plotSteps(std::shared_ptr<const Trace> t) {
    m_kl->clearGraphs();
    m_agree->clearGraphs();
    // Free-running runs read their own texts: no per-step comparison with full.
    const QString freeRunning = t->teacherForced ? QString()
                                                 : tr("n/a in free-running:\neach run continues its own text\n(the outputs below show where they diverge)");
    setPlotNote(m_kl, freeRunning);
    setPlotNote(m_agree, freeRunning);
    for (size_t p = 1; p < t->policies.size(); ++p) {
        const PolicyTrace& pt = t->policies[p];
        QVector<double> x, kl, agree;
        int agreeing = 0, counted = 0;
        for (size_t i = 0; i < pt.metrics.size(); ++i) {
            x.push_back(static_cast<double>(i));
            // A step whose KL is not finite has no meaningful top-1 either:
            // a gap in both plots (QCustomPlot skips NaN), left out of the running share.
            if (!std::isfinite(pt.metrics[i].kl)) {
                kl.push_back(std::nan(""));
                agree.push_back(std::nan(""));
                continue;
            }
            kl.push_back(pt.metrics[i].kl);
            agreeing += pt.metrics[i].top1Agrees ? 1 : 0;
            agree.push_back(100.0 * agreeing / static_cast<double>(++counted));
        }
        const QString name = seriesName(pt);
        addSeries(m_kl, name, runColour(*t, p), x, kl);
        addSeries(m_agree, name, runColour(*t, p), x, agree);
    }
    // Whole decode steps on the x axis, at most about five ticks.
    const int steps = t->policies.empty() ? 1 : static_cast<int>(t->policies[0].metrics.size());
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(std::max(1, (steps + 4) / 5));
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
    m_kl->xAxis->setTicker(ticker);
    m_agree->xAxis->setTicker(ticker);
    m_kl->rescaleAxes();
    m_kl->yAxis->setRangeLower(0);
    m_agree->rescaleAxes();
    m_agree->yAxis->setRange(0, 105);
    m_kl->replot(QCustomPlot::rpQueuedReplot);
    m_agree->replot(QCustomPlot::rpQueuedReplot);
}

void MetricsPanel::plotMass(const Trace& t) {
    m_mass->clearGraphs();
    setPlotNote(m_mass, t.teacherForced ? QString() : tr("n/a in free-running:\neach run reads its own text"));
    for (size_t p = 1; p < t.policies.size(); ++p) {
        QVector<double> x, y;
        const auto& layers = t.policies[p].layers;
        for (size_t l = 0; l < layers.size() && t.policies[p].failure.empty(); ++l) {
            const auto& m = layers[l].retainedMass;
            if (m.empty()) continue;
            double sum = 0;
            for (float v : m) sum += v;
            const double mean = sum / static_cast<double>(m.size());
            if (!std::isfinite(mean)) continue;  // n/a: no point drawn
            x.push_back(static_cast<double>(l));
            y.push_back(mean);
        }
        addSeries(m_mass, seriesName(t.policies[p]), runColour(t, p), x, y);
    }
    m_mass->xAxis->setRange(-0.3, std::max<double>(1, static_cast<double>(t.numLayers) - 0.7));
    m_mass->yAxis->setRange(0, 1.05);
    // Whole layers, at most about eight ticks (30- and 80-layer models), on round layers.
    int step = 1;
    for (int base = 1; t.numLayers > 8 * step; base *= 10)
        for (int m : {1, 2, 5})
            if (t.numLayers > 8 * step) step = m * base;
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(step);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
    m_mass->xAxis->setTicker(ticker);
    m_mass->replot(QCustomPlot::rpQueuedReplot);
}

void MetricsPanel::plotMemory(const Trace& t) {
    m_memory->clearPlottables();
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    double top = 1;
    for (size_t p = 0; p < t.policies.size(); ++p) {
        auto* bars = new QCPBars(m_memory->xAxis, m_memory->yAxis);
        const double kib = static_cast<double>(t.policies[p].bytesHeld) / 1024.0;
        bars->setData({static_cast<double>(p)}, {kib});
        bars->setBrush(runColour(t, p));
        bars->setPen(Qt::NoPen);
        bars->setWidth(0.7);
        top = std::max(top, kib);
        // The label, not the id: two h2o runs with other parameters stay apart.
        const QString label = QString::fromStdString(t.policies[p].label);
        ticker->addTick(static_cast<double>(p), label.size() > 18 ? label.left(17) + QChar(0x2026) : label);
    }
    m_memory->xAxis->setTicker(ticker);
    // Upright labels take a line's height each, not a slant's width: at
    // presenter sizes slanted ones ran into each other.
    m_memory->xAxis->setTickLabelRotation(90);
    // QCustomPlot drops a label that would cross the widget's edge: room for the last one.
    const QFontMetrics fm(m_memory->xAxis->tickLabelFont());
    m_memory->axisRect()->setAutoMargins(QCP::msLeft | QCP::msTop | QCP::msBottom);
    m_memory->axisRect()->setMargins(QMargins(0, 0, fm.height() / 2 + 4, 0));
    m_memory->xAxis->setRange(-0.6, static_cast<double>(t.policies.size()) - 0.4);
    m_memory->yAxis->setRange(0, top * 1.1);
    m_memory->replot(QCustomPlot::rpQueuedReplot);
}

// Teacher-forced runs read the same tokens, so what differs is each policy's
// prediction: its argmax per step, marked where it disagrees with full.
// Free-running runs generate their own text: marked from where it diverged.
void MetricsPanel::showOutputs(const Trace& t) {
    QString html;
    const PolicyTrace& full = t.policies[0];
    for (size_t p = 0; p < t.policies.size(); ++p) {
        const PolicyTrace& pt = t.policies[p];
        html += QStringLiteral("<p style='margin:2px'><b style='color:%1'>%2</b>: ")
                    .arg(runColour(t, p).name(), QString::fromStdString(pt.label).toHtmlEscaped());
        const size_t n = t.teacherForced ? pt.metrics.size() : pt.generated.size();
        std::vector<int64_t> ids(n);
        for (size_t i = 0; i < n; ++i) ids[i] = t.teacherForced ? pt.metrics[i].argmax : pt.generated[i];
        // Decoded as a text (the CLI prints the same), one piece per token.
        const QStringList pieces = tokenPieces(ids);
        for (size_t i = 0; i < n; ++i) {
            const bool differs = t.teacherForced ? !pt.metrics[i].top1Agrees
                                                 : (pt.divergedAt >= 0 && static_cast<int64_t>(i) >= pt.divergedAt);
            const QString word = pieces.value(static_cast<int>(i)).toHtmlEscaped();
            html += differs ? QStringLiteral("<span style='background:#F8D0B8;text-decoration:underline'>%1</span>").arg(word)
                            : word;
        }
        if (!pt.failure.empty())
            html += QStringLiteral(" <b style='color:#B03000'>[%1]</b>").arg(stoppedText(pt).toHtmlEscaped());
        html += QStringLiteral("</p>");
    }
    if (t.teacherForced)
        html += tr("<p style='margin:2px;color:gray'><small>teacher-forced: each policy's most likely next token "
                   "at every step; marked where it differs from full (%1 steps)</small></p>")
                    .arg(full.metrics.size());
    m_outputs->setHtml(html);
}

QString MetricsPanel::outputHtml() const { return m_outputs->toHtml(); }

QString MetricsPanel::exportPlot(QCustomPlot* plot, const QString& file, double scale) {
    const PaperStyle paper(plot);  // white paper at 100 %, whatever the screen's theme and zoom
    const int w = std::max(plot->width(), 480), h = std::max(plot->height(), 360);
    const QString ext = QFileInfo(file).suffix().toLower();
    if (ext == QLatin1String("png")) {
        if (!(scale > 0 && scale <= 16)) return tr("the PNG scale must be in (0, 16], got %1").arg(scale);
        QImage image = plot->toPixmap(w, h, scale).toImage();
        // What QCustomPlot::savePng writes: 96 dpi.
        image.setDotsPerMeterX(qRound(96 / 0.0254));
        image.setDotsPerMeterY(qRound(96 / 0.0254));
        return saveThrough(file, [&image](QIODevice& out) {
            return image.save(&out, "PNG") ? QString() : tr("the PNG could not be encoded");
        });
    }
    if (ext == QLatin1String("pdf")) {
        return saveThrough(file, [&](QIODevice& out) {
            // As QCustomPlot::savePdf: one page of w × h points, no margins.
            QPdfWriter pdf(&out);
            pdf.setResolution(72);
            pdf.setPageSize(QPageSize(QSizeF(w, h), QPageSize::Point, QString(), QPageSize::ExactMatch));
            pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
            pdf.setTitle(plot->objectName());
            pdf.setCreator(QStringLiteral("KVLens"));
            QCPPainter painter;
            if (!painter.begin(&pdf)) return tr("the PDF could not be started");
            painter.setMode(QCPPainter::pmVectorized);
            plot->toPainter(&painter, w, h);
            return painter.end() ? QString() : tr("the PDF could not be finished");
        });
    }
    if (ext == QLatin1String("svg")) {
        return saveThrough(file, [&](QIODevice& out) {
            QSvgGenerator svg;
            svg.setOutputDevice(&out);
            svg.setSize(QSize(w, h));
            svg.setViewBox(QRect(0, 0, w, h));
            svg.setTitle(plot->objectName());
            QCPPainter painter;
            if (!painter.begin(&svg)) return tr("the SVG could not be started");
            plot->toPainter(&painter, w, h);
            return painter.end() ? QString() : tr("the SVG could not be finished");
        });
    }
    return tr("unknown plot format '%1' (png, svg, pdf)").arg(ext);
}

QString MetricsPanel::exportPlots(const QString& folder, const QString& format, double scale, QStringList* written) const {
    if (!QDir().mkpath(folder)) return tr("cannot create the folder %1").arg(folder);
    const std::pair<const char*, QCustomPlot*> plots[] = {{"kl", m_kl}, {"agreement", m_agree}, {"mass", m_mass}, {"memory", m_memory}};
    for (const auto& [name, plot] : plots) {
        const QString file = QDir(folder).filePath(QStringLiteral("%1.%2").arg(QLatin1String(name), format));
        // A figure on its own names its lines (on screen the columns' headers do).
        const bool legend = plot->legend->visible();
        plot->legend->setVisible(legend || plot->graphCount() > 0);
        const QString error = exportPlot(plot, file, scale);
        plot->legend->setVisible(legend);
        if (!error.isEmpty()) return error;
        if (written) written->append(file);
    }
    return {};
}

}  // namespace kvlens::ui
