#include "widgets/appearance.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>
#include <QWidget>
#include <algorithm>
#include <optional>

#include "widgets/palette.h"
#include "widgets/qcustomplot_include.h"

namespace kvlens::ui {
namespace {

constexpr int kSteps[] = {50, 67, 75, 80, 90, 100, 110, 125, 150, 175, 200};

Appearance& state() {
    static Appearance a;
    return a;
}

// What the application had before the first change: the base of every zoom
// and the light theme.
struct Base {
    QFont font;
    QPalette palette;
    QString style;
};
const Base& base() {
    static const Base b{QApplication::font(), QApplication::palette(),
                        QApplication::style() ? QApplication::style()->name() : QString()};
    return b;
}

}  // namespace

int nextZoom(int zoom, int direction) {
    if (direction > 0) {
        for (int s : kSteps)
            if (s > zoom) return s;
        return kMaxZoom;
    }
    for (auto it = std::rbegin(kSteps); it != std::rend(kSteps); ++it)
        if (*it < zoom) return *it;
    return kMinZoom;
}

QPalette darkPalette() {
    QPalette p;
    const QColor window(45, 45, 48), base(30, 30, 32), text(230, 230, 230), disabled(128, 128, 128);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, window);
    p.setColor(QPalette::ToolTipBase, window);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabled);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Light, QColor(70, 70, 74));
    p.setColor(QPalette::Midlight, QColor(60, 60, 64));
    p.setColor(QPalette::Mid, QColor(90, 90, 96));
    p.setColor(QPalette::Dark, QColor(20, 20, 22));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Highlight, QColor(42, 130, 218));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(90, 160, 240));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, disabled);
    return p;
}

QPalette highContrastPalette() {
    QPalette p;
    const QColor white(Qt::white), black(Qt::black), grey(90, 90, 90);
    for (auto role : {QPalette::Window, QPalette::Base, QPalette::Button, QPalette::ToolTipBase, QPalette::Light})
        p.setColor(role, white);
    p.setColor(QPalette::AlternateBase, QColor(235, 235, 235));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText, QPalette::ToolTipText, QPalette::Shadow})
        p.setColor(role, black);
    p.setColor(QPalette::PlaceholderText, grey);
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Midlight, QColor(200, 200, 200));
    p.setColor(QPalette::Mid, grey);
    p.setColor(QPalette::Dark, QColor(60, 60, 60));
    p.setColor(QPalette::Highlight, QColor(0x00, 0x44, 0x88));  // Paul Tol's high-contrast blue
    p.setColor(QPalette::HighlightedText, white);
    p.setColor(QPalette::Link, QColor(0x00, 0x44, 0x88));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, grey);
    return p;
}

const Appearance& currentAppearance() { return state(); }

namespace {
double lineScale(const Appearance& a) { return a.presenter ? kPresenterLineScale : 1.0; }
}  // namespace

QPen seriesPen(const QColor& colour, double width, Qt::PenStyle style) {
    return QPen(colour, width * lineScale(state()), style);
}

namespace {
void styleWith(QCustomPlot* plot, const QPalette& pal, const QFont& font);
}  // namespace

void stylePlot(QCustomPlot* plot) { styleWith(plot, QApplication::palette(), QApplication::font()); }

PaperStyle::PaperStyle(QCustomPlot* plot) : m_plot(plot) {
    styleWith(plot, base().palette, base().font);
    for (int i = 0; i < plot->plottableCount(); ++i) {
        QCPAbstractPlottable* p = plot->plottable(i);
        m_series.emplace_back(p->pen(), p->brush());
        QPen pen = p->pen();
        pen.setColor(paperColour(pen.color()));
        p->setPen(pen);
        QBrush brush = p->brush();
        brush.setColor(paperColour(brush.color()));
        p->setBrush(brush);
    }
    QCPLayoutInset* inset = plot->axisRect() ? plot->axisRect()->insetLayout() : nullptr;
    for (int i = 0; inset && plot->legend->visible() && i < inset->elementCount(); ++i)
        if (inset->elementAt(i) == plot->legend) {
            m_legendAlignment = inset->insetAlignment(i);
            m_legendWrap = plot->legend->wrap();
            m_legendFill = static_cast<int>(plot->legend->fillOrder());
            break;
        }
    if (plot->legend->visible()) m_legendMoved = legendBelowAxes(plot, 3);  // three names a row under the axes
}

bool legendBelowAxes(QCustomPlot* plot, int perRow) {
    QCPLayoutInset* inset = plot->axisRect() ? plot->axisRect()->insetLayout() : nullptr;
    if (!inset || !inset->take(plot->legend)) return false;
    inset->simplify();
    QCPLayoutGrid* grid = plot->plotLayout();
    grid->addElement(grid->rowCount(), 0, plot->legend);
    grid->setRowStretchFactor(grid->rowCount() - 1, 0.001);
    plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    plot->legend->setWrap(perRow);
    return true;
}

PaperStyle::~PaperStyle() {
    for (int i = 0; i < m_plot->plottableCount() && i < static_cast<int>(m_series.size()); ++i) {
        m_plot->plottable(i)->setPen(m_series[static_cast<size_t>(i)].first);
        m_plot->plottable(i)->setBrush(m_series[static_cast<size_t>(i)].second);
    }
    if (m_legendMoved) {
        m_plot->plotLayout()->take(m_plot->legend);
        m_plot->plotLayout()->simplify();
        m_plot->legend->setFillOrder(static_cast<QCPLayoutGrid::FillOrder>(m_legendFill));
        m_plot->legend->setWrap(m_legendWrap);
        m_plot->axisRect()->insetLayout()->addElement(m_plot->legend, m_legendAlignment);
    }
    stylePlot(m_plot);
}

namespace {
void styleWith(QCustomPlot* plot, const QPalette& pal, const QFont& font) {
    QFont small = font;
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
    const QColor text = pal.color(QPalette::WindowText), grid = pal.color(QPalette::Mid);
    plot->setBackground(pal.brush(QPalette::Base));
    for (QCPAxisRect* rect : plot->axisRects())
        for (QCPAxis* a : rect->axes()) {
            a->setTickLabelFont(small);
            a->setLabelFont(small);
            a->setTickLabelColor(text);
            a->setLabelColor(text);
            a->setBasePen(QPen(text, 0));
            a->setTickPen(QPen(text, 0));
            a->setSubTickPen(QPen(text, 0));
            a->grid()->setPen(QPen(grid, 0, Qt::DotLine));
            a->grid()->setZeroLinePen(Qt::NoPen);
        }
    plot->legend->setFont(small);
    plot->legend->setTextColor(text);
    plot->legend->setBrush(pal.brush(QPalette::Base));
    plot->legend->setBorderPen(QPen(grid, 0));
    for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i))) {
            QFont bold = small;
            bold.setBold(true);
            title->setFont(bold);
            title->setTextColor(text);
        }
    for (int i = 0; i < plot->itemCount(); ++i)  // notes across a plot ("n/a in free-running")
        if (auto* note = qobject_cast<QCPItemText*>(plot->item(i))) {
            note->setFont(small);
            note->setColor(text);
        }
    plot->replot(QCustomPlot::rpQueuedReplot);
}
}  // namespace

void applyAppearance(const Appearance& wanted) {
    Appearance a = wanted;
    a.zoom = std::clamp(a.zoom, kMinZoom, kMaxZoom);
    const Base& b = base();
    const double scale = a.zoom / 100.0 * (a.presenter ? kPresenterTextScale : 1.0);
    QFont f = b.font;
    if (f.pointSizeF() > 0) f.setPointSizeF(b.font.pointSizeF() * scale);
    else f.setPixelSize(std::max(6, static_cast<int>(b.font.pixelSize() * scale)));
    const Appearance before = state();
    const auto look = [](const Appearance& x) { return x.presenter ? 2 : x.dark ? 1 : 0; };
    if (look(a) != look(before) || !QApplication::style()) {
        if (look(a) != 0) {
            QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
            QApplication::setPalette(a.presenter ? highContrastPalette() : darkPalette());
        } else {
            if (!b.style.isEmpty()) QApplication::setStyle(QStyleFactory::create(b.style));
            QApplication::setPalette(b.palette);
        }
    }
    QApplication::setFont(f);
    state() = a;
    const double lines = lineScale(a) / lineScale(before);
    for (QWidget* top : QApplication::topLevelWidgets())
        for (QCustomPlot* plot : top->findChildren<QCustomPlot*>()) {
            if (lines != 1.0)
                for (int i = 0; i < plot->plottableCount(); ++i) {
                    QCPAbstractPlottable* s = plot->plottable(i);
                    QPen pen = s->pen();
                    pen.setWidthF(pen.widthF() * lines);
                    s->setPen(pen);
                }
            stylePlot(plot);
        }
}

}  // namespace kvlens::ui
