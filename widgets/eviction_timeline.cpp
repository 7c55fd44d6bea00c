#include "widgets/eviction_timeline.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

constexpr int kAxisWidth = 44;
constexpr int kTitleHeight = 14;

}  // namespace

EvictionTimeline::EvictionTimeline(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void EvictionTimeline::setHistory(std::vector<std::shared_ptr<const Trace>> history) {
    m_history = std::move(history);
    rebuild();
}

void EvictionTimeline::setSelection(int policy, int64_t layer, int64_t kvHead) {
    m_policy = policy;
    m_layer = layer;
    m_kvHead = kvHead;
    rebuild();
}

void EvictionTimeline::setCurrentStep(int step) {
    m_step = step;
    update();
}

void EvictionTimeline::rebuild() {
    m_raster = QImage();
    if (m_history.empty() || !m_history.back()) {
        update();
        return;
    }
    const int cols = static_cast<int>(m_history.back()->tokens.size());
    const int rows = static_cast<int>(m_history.size());
    m_raster = QImage(std::max(1, cols), rows, QImage::Format_RGB32);
    m_raster.fill(statusColour(TokenStatus::Unseen));
    for (int r = 0; r < rows; ++r) {
        const Trace& t = *m_history[static_cast<size_t>(r)];
        if (m_policy < 0 || m_policy >= static_cast<int>(t.policies.size())) continue;
        const auto& layers = t.policies[static_cast<size_t>(m_policy)].layers;
        if (m_layer >= static_cast<int64_t>(layers.size())) continue;
        const auto& heads = layers[static_cast<size_t>(m_layer)].heads;
        if (m_kvHead >= static_cast<int64_t>(heads.size())) continue;
        const auto& status = heads[static_cast<size_t>(m_kvHead)].status;
        auto* line = reinterpret_cast<QRgb*>(m_raster.scanLine(r));
        for (int c = 0; c < cols && c < static_cast<int>(status.size()); ++c)
            line[c] = statusColour(status[static_cast<size_t>(c)]).rgb();
    }
    update();
}

QRect EvictionTimeline::plotIn(const QRect& area) const { return area.adjusted(kAxisWidth, kTitleHeight, -4, -2); }

void EvictionTimeline::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.fillRect(area, palette().color(QPalette::Base));
    const QRect plot = plotIn(area);
    p.setPen(palette().color(QPalette::WindowText));
    QFont f = p.font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
    p.setFont(f);
    p.drawText(QRect(area.left() + 2, area.top(), area.width(), kTitleHeight), Qt::AlignLeft | Qt::AlignVCenter,
               tr("eviction timeline: tokens → , decode steps ↓ (L%1 KV%2)").arg(m_layer).arg(m_kvHead));
    if (m_raster.isNull()) {
        p.restore();
        return;
    }
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(plot, m_raster);
    const double rowH = plot.height() / static_cast<double>(m_raster.height());
    p.drawText(QRect(area.left(), plot.top(), kAxisWidth - 4, 14), Qt::AlignRight, tr("prompt"));
    p.drawText(QRect(area.left(), plot.bottom() - 14, kAxisWidth - 4, 14), Qt::AlignRight,
               tr("step %1").arg(m_raster.height() - 1));
    p.setPen(QPen(selectionColour(), 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(QRectF(plot.left(), plot.top() + m_step * rowH, plot.width(), std::max(2.0, rowH)));
    p.restore();
}

void EvictionTimeline::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

void EvictionTimeline::mousePressEvent(QMouseEvent* e) {
    const QRect plot = plotIn(rect());
    if (m_raster.isNull() || !plot.contains(e->position().toPoint())) return;
    const int row = static_cast<int>((e->position().y() - plot.top()) / plot.height() * m_raster.height());
    Q_EMIT stepSelected(std::clamp(row, 0, m_raster.height() - 1));
}

bool EvictionTimeline::event(QEvent* e) {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    const QRect plot = plotIn(rect());
    if (m_raster.isNull() || !plot.contains(help->pos())) {
        QToolTip::hideText();
        return true;
    }
    const int row = std::clamp(static_cast<int>((help->pos().y() - plot.top()) / double(plot.height()) * m_raster.height()), 0, m_raster.height() - 1);
    const int col = std::clamp(static_cast<int>((help->pos().x() - plot.left()) / double(plot.width()) * m_raster.width()), 0, m_raster.width() - 1);
    const Trace& last = *m_history.back();
    const QString label = col < static_cast<int>(last.labels.size()) ? QString::fromStdString(last.labels[static_cast<size_t>(col)]) : QString();
    QToolTip::showText(help->globalPos(), tr("step %1, token %2 “%3”").arg(row).arg(col).arg(label), this);
    return true;
}

}  // namespace kvlens::ui
