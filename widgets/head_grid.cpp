#include "widgets/head_grid.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "widgets/metric_text.h"
#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

constexpr int kLabelWidth = 26;
constexpr int kHeaderHeight = 14;
constexpr int kGroupGap = 5;

}  // namespace

HeadGrid::HeadGrid(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void HeadGrid::setData(std::shared_ptr<const Trace> trace, int policy) {
    m_trace = std::move(trace);
    m_policy = policy;
    updateGeometry();
    update();
}

void HeadGrid::setSelection(int64_t layer, int64_t head) {
    m_layer = layer;
    m_head = head;
    update();
}

QSize HeadGrid::sizeHint() const {
    const int layers = m_trace ? static_cast<int>(m_trace->numLayers) : 4;
    return {240, kHeaderHeight + 4 + std::min(layers, 32) * 14};
}

QRect HeadGrid::cellRectIn(const QRect& area, int64_t layer, int64_t head) const {
    if (!m_trace || m_trace->numLayers <= 0 || m_trace->numHeads <= 0 || m_trace->numKvHeads <= 0) return {};
    const int64_t L = m_trace->numLayers, H = m_trace->numHeads, G = H / m_trace->numKvHeads;
    const int64_t groups = m_trace->numKvHeads;
    const double w = (area.width() - kLabelWidth - 2 - kGroupGap * (groups - 1)) / static_cast<double>(H);
    const double h = (area.height() - kHeaderHeight - 2) / static_cast<double>(L);
    const double x = area.left() + kLabelWidth + static_cast<double>(head) * w + static_cast<double>(head / G) * kGroupGap;
    const double y = area.top() + kHeaderHeight + static_cast<double>(layer) * h;
    return QRectF(x, y, w, h).toAlignedRect().adjusted(0, 0, -1, -1);
}

QRect HeadGrid::cellRect(int64_t layer, int64_t head) const { return cellRectIn(rect(), layer, head); }

float HeadGrid::mass(int64_t layer, int64_t head) const {
    const PolicyTrace& run = m_trace->policies[static_cast<size_t>(m_policy)];
    const auto& layers = run.layers;
    // A run that stopped (non-finite logits) has no meaningful mass: n/a.
    if (!run.failure.empty() || layer >= static_cast<int64_t>(layers.size())) return std::nanf("");
    const auto& m = layers[static_cast<size_t>(layer)].retainedMass;
    return head < static_cast<int64_t>(m.size()) ? m[static_cast<size_t>(head)] : std::nanf("");
}

QString HeadGrid::note() const {
    if (!m_trace || m_policy >= static_cast<int>(m_trace->policies.size())) return {};
    for (int64_t l = 0; l < m_trace->numLayers; ++l)
        for (int64_t h = 0; h < m_trace->numHeads; ++h)
            if (std::isfinite(mass(l, h))) return {};
    if (!m_trace->policies[static_cast<size_t>(m_policy)].failure.empty()) return tr("n/a: this run stopped");
    if (!m_trace->teacherForced)
        return tr("retained mass n/a in free-running: each run reads its own text");
    return {};
}

void HeadGrid::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.fillRect(area, palette().color(QPalette::Base));
    if (!m_trace || m_policy >= static_cast<int>(m_trace->policies.size())) {
        p.restore();
        return;
    }
    const int64_t L = m_trace->numLayers, H = m_trace->numHeads, G = H / std::max<int64_t>(1, m_trace->numKvHeads);
    QFont f = p.font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
    p.setFont(f);
    p.setPen(palette().color(QPalette::WindowText));
    for (int64_t kv = 0; kv < m_trace->numKvHeads; ++kv) {
        const QRect first = cellRectIn(area, 0, kv * G), last = cellRectIn(area, 0, kv * G + G - 1);
        p.drawText(QRect(first.left(), area.top(), last.right() - first.left(), kHeaderHeight), Qt::AlignCenter,
                   QStringLiteral("KV%1").arg(kv));
    }
    for (int64_t l = 0; l < L; ++l) {
        const QRect row = cellRectIn(area, l, 0);
        p.drawText(QRect(area.left(), row.top(), kLabelWidth - 2, row.height()), Qt::AlignRight | Qt::AlignVCenter,
                   QStringLiteral("L%1").arg(l));
        for (int64_t h = 0; h < H; ++h) {
            const float m = mass(l, h);
            p.fillRect(cellRectIn(area, l, h), !std::isfinite(m) ? statusColour(TokenStatus::Unseen)
                                                             : QColor(viridis(std::clamp<double>(m, 0, 1))));
        }
    }
    p.setPen(QPen(selectionColour(), 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(cellRectIn(area, m_layer, m_head).adjusted(1, 1, 0, 0));
    for (int64_t h : m_highlight.heads)
        if (h >= 0 && h < H) drawHighlightRing(p, cellRectIn(area, m_layer, h).adjusted(3, 3, -3, -3));
    if (const QString why = note(); !why.isEmpty()) {
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(area.adjusted(kLabelWidth, kHeaderHeight, 0, 0), Qt::AlignCenter | Qt::TextWordWrap, why);
    }
    p.restore();
}

void HeadGrid::setHighlight(const Highlight& h) {
    m_highlight = h;
    update();
}

void HeadGrid::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

bool HeadGrid::hitTest(const QPoint& pos, int64_t* layer, int64_t* head) const {
    if (!m_trace) return false;
    for (int64_t l = 0; l < m_trace->numLayers; ++l)
        for (int64_t h = 0; h < m_trace->numHeads; ++h)
            if (cellRect(l, h).adjusted(0, 0, 1, 1).contains(pos)) {
                *layer = l;
                *head = h;
                return true;
            }
    return false;
}

void HeadGrid::mousePressEvent(QMouseEvent* e) {
    int64_t l = 0, h = 0;
    if (e->button() != Qt::LeftButton || !hitTest(e->position().toPoint(), &l, &h)) return;
    setSelection(l, h);
    Q_EMIT headSelected(l, h);
}

bool HeadGrid::event(QEvent* e) {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    int64_t l = 0, h = 0;
    if (!hitTest(help->pos(), &l, &h)) {
        QToolTip::hideText();
        return true;
    }
    const int64_t G = m_trace->numHeads / std::max<int64_t>(1, m_trace->numKvHeads);
    const float m = mass(l, h);
    QToolTip::showText(help->globalPos(),
                       QStringLiteral("layer %1, query head %2 (KV head %3)\nretained attention mass %4")
                           .arg(l).arg(h).arg(h / G)
                           .arg(metricText(m, 3)),
                       this);
    return true;
}

}  // namespace kvlens::ui
