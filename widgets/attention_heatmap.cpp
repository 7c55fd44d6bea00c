#include "widgets/attention_heatmap.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace kvlens::ui {
namespace {

constexpr int kTitleHeight = 18;
constexpr int kBarWidth = 8;
constexpr int kBarGap = 30;  // room for the colour bar's labels, at least

// The colour bar's labels: a smaller font than the title's.
QFont barFont(QFont f) {
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
    return f;
}
constexpr double kMinCells = 4;

QString tokenAt(const Trace* t, int64_t i) {
    if (!t || i < 0 || i >= static_cast<int64_t>(t->labels.size())) return QString::number(i);
    return QString::fromStdString(t->labels[static_cast<size_t>(i)]);
}

}  // namespace

AttentionHeatmap::AttentionHeatmap(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void AttentionHeatmap::setMap(std::shared_ptr<const Trace> trace, std::shared_ptr<const AttentionLod> lod,
                              int64_t layer, int64_t head) {
    const int64_t oldSize = m_lod ? m_lod->size() : -1;
    m_trace = std::move(trace);
    m_lod = std::move(lod);
    m_layer = layer;
    m_head = head;
    // Keep the user's zoom while the map grows by a decode step; reset when
    // the view would fall outside the new map.
    const int64_t n = m_lod ? m_lod->size() : 0;
    if (oldSize <= 0 || m_view.isEmpty() || m_view.right() > static_cast<double>(n) + 1e-9 ||
        (m_view.width() >= static_cast<double>(oldSize) - 1e-9))
        m_view = QRectF(0, 0, static_cast<double>(n), static_cast<double>(n));
    update();
}

void AttentionHeatmap::setColourRange(ColourRange range) {
    m_range = range;
    update();
}

void AttentionHeatmap::setColourScale(ColourScale scale) {
    m_scale = scale;
    update();
}

void AttentionHeatmap::setView(const QRectF& view) {
    if (!m_lod) return;
    const double n = static_cast<double>(m_lod->size());
    QRectF v = view;
    const double w = std::clamp(v.width(), std::min(kMinCells, n), n);
    const double h = std::clamp(v.height(), std::min(kMinCells, n), n);
    v.setSize({w, h});
    v.moveLeft(std::clamp(v.left(), 0.0, n - w));
    v.moveTop(std::clamp(v.top(), 0.0, n - h));
    m_view = v;
    update();
}

void AttentionHeatmap::applyView(QRectF view) {
    setView(view);
    Q_EMIT viewChanged(m_view);
}

void AttentionHeatmap::resetView() {
    const double n = m_lod ? static_cast<double>(m_lod->size()) : 0.0;
    applyView(QRectF(0, 0, n, n));
}

QRect AttentionHeatmap::plotRectIn(const QRect& area) const {
    // Not forced square: a narrow column still gets a tall, readable map.
    const QRect r = area.adjusted(2, kTitleHeight, -(kBarWidth + barGap()), -2);
    return QRect(r.left(), r.top(), std::max(1, r.width()), std::max(1, r.height()));
}

QRect AttentionHeatmap::plotRect() const { return plotRectIn(rect()); }

int AttentionHeatmap::barGap() const {
    // The widest label a scale gives ("-9e-10") beside the bar, at any text size (presenter mode).
    return std::max(kBarGap, QFontMetrics(barFont(font())).horizontalAdvance(QStringLiteral("-9e-10")) + 6);
}

QPointF AttentionHeatmap::toCell(const QPointF& pos) const {
    const QRect plot = plotRect();
    return {m_view.left() + (pos.x() - plot.left()) / plot.width() * m_view.width(),
            m_view.top() + (pos.y() - plot.top()) / plot.height() * m_view.height()};
}

QPoint AttentionHeatmap::cellCentre(int64_t query, int64_t key) const {
    const QRect plot = plotRect();
    const double x = plot.left() + (static_cast<double>(key) + 0.5 - m_view.left()) / m_view.width() * plot.width();
    const double y = plot.top() + (static_cast<double>(query) + 0.5 - m_view.top()) / m_view.height() * plot.height();
    return QPoint(static_cast<int>(std::floor(x)), static_cast<int>(std::floor(y)));
}

// One image pixel per level-of-detail cell in view; the caller scales it onto
// `targetRect` without smoothing.
QImage AttentionHeatmap::renderImage(const QRect& plot, QRectF* targetRect) const {
    const double cellsPerPixel = std::max(m_view.width() / plot.width(), m_view.height() / plot.height());
    const int level = m_lod->levelFor(cellsPerPixel);
    const double s = static_cast<double>(int64_t{1} << level);
    const int64_t n = m_lod->levelSize(level);
    const int64_t c0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(m_view.left() / s)), 0, n - 1);
    const int64_t c1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(m_view.right() / s)), c0 + 1, n);
    const int64_t r0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(m_view.top() / s)), 0, n - 1);
    const int64_t r1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(m_view.bottom() / s)), r0 + 1, n);
    QImage img(static_cast<int>(c1 - c0), static_cast<int>(r1 - r0), QImage::Format_RGB32);
    const QRgb evicted = evictedColour().rgb(), future = futureColour().rgb();
    for (int64_t r = r0; r < r1; ++r) {
        const float* src = m_lod->row(level, r);
        auto* dst = reinterpret_cast<QRgb*>(img.scanLine(static_cast<int>(r - r0)));
        for (int64_t c = c0; c < c1; ++c) {
            const float v = src[c];
            dst[c - c0] = AttentionLod::isEvicted(v) ? evicted
                          : AttentionLod::isFuture(v) ? future
                                                      : viridis(normalise(v, m_range, m_scale));
        }
    }
    const double sx = plot.width() / m_view.width(), sy = plot.height() / m_view.height();
    *targetRect = QRectF(plot.left() + (static_cast<double>(c0) * s - m_view.left()) * sx,
                         plot.top() + (static_cast<double>(r0) * s - m_view.top()) * sy,
                         static_cast<double>(c1 - c0) * s * sx, static_cast<double>(r1 - r0) * s * sy);
    return img;
}

QString AttentionHeatmap::titleFor(const QFontMetrics& fm, int width) const {
    const QString head = QStringLiteral("L%1 H%2").arg(m_layer).arg(m_head);
    for (const QString& t : {tr("attention %1 · query ↓ key →").arg(head), tr("%1 · query ↓ key →").arg(head)})
        if (fm.horizontalAdvance(t) <= width) return t;
    return tr("attention %1").arg(head);
}

QString AttentionHeatmap::titleText() const { return titleFor(fontMetrics(), width() - 4); }

QString AttentionHeatmap::compactNumber(double v) {
    if (v == 0 || !std::isfinite(v)) return QString::number(v);
    if (std::abs(v) >= 0.01 && std::abs(v) < 1e4) return QString::number(v, 'g', 2);
    const int e = static_cast<int>(std::floor(std::log10(std::abs(v))));
    const long m = std::lround(v / std::pow(10.0, e));
    return m == 10 || m == -10 ? QStringLiteral("%1e%2").arg(m / 10).arg(e + 1) : QStringLiteral("%1e%2").arg(m).arg(e);
}

void AttentionHeatmap::paintColourBar(QPainter& p, const QRect& bar) const {
    for (int y = 0; y < bar.height(); ++y) {
        const double t = 1.0 - static_cast<double>(y) / std::max(1, bar.height() - 1);
        p.setPen(QColor(viridis(t)));
        p.drawLine(bar.left(), bar.top() + y, bar.right(), bar.top() + y);
    }
    p.setPen(palette().color(QPalette::WindowText));
    p.setFont(barFont(p.font()));
    const QRect labels(bar.right() + 3, bar.top(), barGap() - 4, bar.height());
    // "9e-5", not "9.3e-05": the log scale's minimum fits beside the bar (and is never cut).
    p.drawText(labels, Qt::AlignTop | Qt::AlignLeft | Qt::TextDontClip, compactNumber(m_range.hi));
    p.drawText(labels, Qt::AlignBottom | Qt::AlignLeft | Qt::TextDontClip, compactNumber(m_range.lo));
    p.save();
    p.translate(labels.left() + 10, labels.center().y());
    p.rotate(-90);
    p.drawText(QRect(-40, -6, 80, 14), Qt::AlignCenter, colourScaleName(m_scale));
    p.restore();
}

void AttentionHeatmap::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.fillRect(area, palette().color(QPalette::Base));
    const QRect plot = plotRectIn(area);
    p.setPen(palette().color(QPalette::WindowText));
    // The title names the axes — rows are queries (top to bottom), columns
    // keys (left to right) — as far as the column's width allows.
    const QRect titleRect(area.left() + 2, area.top(), area.width() - 4, kTitleHeight);
    p.drawText(titleRect, Qt::AlignLeft | Qt::AlignVCenter, titleFor(p.fontMetrics(), titleRect.width()));
    if (!m_lod || m_lod->size() == 0) {
        p.drawText(plot, Qt::AlignCenter | Qt::TextWordWrap, QStringLiteral("no attention captured"));
        p.restore();
        return;
    }
    QRectF target;
    const QImage img = renderImage(plot, &target);
    p.setClipRect(plot);
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(target, img);
    auto at = [&](double key, double query) {
        return QPointF(plot.left() + (key - m_view.left()) / m_view.width() * plot.width(),
                       plot.top() + (query - m_view.top()) / m_view.height() * plot.height());
    };
    if (m_highlight.region) {
        const QRect& c = *m_highlight.region;  // cells: x keys, y queries
        drawHighlightRing(p, QRectF(at(c.left(), c.top()), at(c.right() + 1.0, c.bottom() + 1.0)));
    }
    if (m_hover >= 0 && m_hover < m_lod->size()) {
        const double mid = static_cast<double>(m_hover) + 0.5;
        drawHoverLine(p, QPointF(at(mid, 0).x(), plot.top()), QPointF(at(mid, 0).x(), plot.bottom()));
        drawHoverLine(p, QPointF(plot.left(), at(0, mid).y()), QPointF(plot.right(), at(0, mid).y()));
    }
    p.setClipping(false);
    p.setPen(palette().color(QPalette::Mid));
    p.drawRect(plot.adjusted(-1, -1, 0, 0));  // outside the map: the sink column stays visible
    paintColourBar(p, QRect(plot.right() + 6, plot.top(), kBarWidth, plot.height()));
    p.restore();
}

void AttentionHeatmap::setHighlight(const Highlight& h) {
    m_highlight = h;
    update();
}

void AttentionHeatmap::setHoverToken(int64_t position) {
    if (position == m_hover) return;
    m_hover = position;
    update();
}

void AttentionHeatmap::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

void AttentionHeatmap::wheelEvent(QWheelEvent* e) {
    if (!m_lod) return;
    const double steps = e->angleDelta().y() / 120.0;
    const double factor = std::pow(1.25, -steps);
    const QPointF anchor = toCell(e->position());
    // Zoom about the cell under the cursor, so it stays under the cursor.
    const QRectF v(anchor.x() - (anchor.x() - m_view.left()) * factor,
                   anchor.y() - (anchor.y() - m_view.top()) * factor, m_view.width() * factor,
                   m_view.height() * factor);
    applyView(v);
    e->accept();
}

void AttentionHeatmap::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return;
    m_dragging = true;
    m_dragStart = e->position();
    m_dragView = m_view;
}

void AttentionHeatmap::mouseMoveEvent(QMouseEvent* e) {
    if (!m_dragging || !m_lod) return;
    const QRect plot = plotRect();
    const QPointF d = e->position() - m_dragStart;
    applyView(m_dragView.translated(-d.x() / plot.width() * m_dragView.width(),
                                    -d.y() / plot.height() * m_dragView.height()));
}

void AttentionHeatmap::mouseReleaseEvent(QMouseEvent*) { m_dragging = false; }

void AttentionHeatmap::mouseDoubleClickEvent(QMouseEvent*) { resetView(); }

bool AttentionHeatmap::event(QEvent* e) {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    if (!m_lod || !plotRect().contains(help->pos())) {
        QToolTip::hideText();
        return true;
    }
    const QPointF cell = toCell(help->pos());
    const auto q = static_cast<int64_t>(cell.y()), k = static_cast<int64_t>(cell.x());
    if (q < 0 || k < 0 || q >= m_lod->size() || k >= m_lod->size()) return true;
    const float v = m_lod->at(0, q, k);
    const QString what = AttentionLod::isEvicted(v)  ? QStringLiteral("evicted (not in this query's cache)")
                         : AttentionLod::isFuture(v) ? QStringLiteral("after the query")
                                                     : QString::number(v, 'g', 4);
    QToolTip::showText(help->globalPos(), QStringLiteral("query %1 “%2”\nkey %3 “%4”\n%5")
                                              .arg(q).arg(tokenAt(m_trace.get(), q))
                                              .arg(k).arg(tokenAt(m_trace.get(), k), what),
                       this);
    return true;
}

}  // namespace kvlens::ui
