#include "widgets/budget_bars.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

constexpr int kAxisWidth = 34;
constexpr int kLabelHeight = 14;
constexpr int kValueHeight = 13;

}  // namespace

BudgetBars::BudgetBars(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    setCursor(Qt::SizeVerCursor);
    setToolTip(tr("Drag a bar up or down to change that layer's budget"));
}

void BudgetBars::setBudgets(const std::vector<int64_t>& perLayer) {
    m_budgets = perLayer;
    update();
}

void BudgetBars::setLimit(int64_t promptLength) {
    m_limit = std::max<int64_t>(1, promptLength);
    update();
}

void BudgetBars::setHeadHeld(std::vector<std::vector<int64_t>> held) {
    m_held = std::move(held);
    update();
}

double BudgetBars::scaleMax() const {
    if (m_frozenScale > 0) return m_frozenScale;
    int64_t top = m_limit;
    for (int64_t b : m_budgets) top = std::max(top, b);
    return static_cast<double>(top) * 1.05;
}

QRect BudgetBars::plotIn(const QRect& area) const {
    return area.adjusted(kAxisWidth, kValueHeight + 2, -4, -kLabelHeight);
}

QRect BudgetBars::slotIn(const QRect& area, int layer) const {
    const QRect plot = plotIn(area);
    const int n = std::max<int>(1, static_cast<int>(m_budgets.size()));
    const double w = plot.width() / static_cast<double>(n);
    return QRectF(plot.left() + layer * w, plot.top(), w, plot.height()).toAlignedRect();
}

QRect BudgetBars::barSlot(int layer) const { return slotIn(rect(), layer); }

QFont BudgetBars::labelFont() const {
    QFont f = font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
    return f;
}

// Every k-th label, k the smallest that leaves each label (the widest, the
// last layer's) its own width plus a gap; 1, 2, 5 or 10 times a power of ten
// so that the labels fall on round layers.
int BudgetBars::strideIn(const QRect& area) const {
    const int n = static_cast<int>(m_budgets.size());
    if (n <= 1) return 1;
    const QFontMetrics fm(labelFont());
    const double need = fm.horizontalAdvance(QStringLiteral("L%1").arg(n - 1)) + 4;
    const double slot = plotIn(area).width() / static_cast<double>(n);
    for (int base = 1;; base *= 10)
        for (int m : {1, 2, 5})
            if (m * base * slot >= need || m * base >= n) return m * base;
}

int BudgetBars::labelStride() const { return strideIn(rect()); }

bool BudgetBars::hasHeadBars(int layer) const {
    return layer < static_cast<int>(m_held.size()) && !m_held[static_cast<size_t>(layer)].empty();
}

int BudgetBars::barWidthIn(const QRect& slot, int layer) const {
    return std::max(3, slot.width() * (hasHeadBars(layer) ? 45 : 70) / 100);
}

// A layer's value stands over its column; beside per-KV-head bars over its
// own bar only (their numbers stand over them).
int BudgetBars::valueRoomIn(const QRect& slot, int layer) const {
    return hasHeadBars(layer) ? barWidthIn(slot, layer) : slot.width();
}

bool BudgetBars::valueFits(int layer) const {
    const QFontMetrics fm(labelFont());
    return fm.horizontalAdvance(QString::number(m_budgets.at(static_cast<size_t>(layer)))) + 2 <=
           valueRoomIn(barSlot(layer), layer);
}

QString BudgetBars::hoverText(const QPoint& pos) const {
    for (int l = 0; l < static_cast<int>(m_budgets.size()); ++l) {
        const QRect slot = barSlot(l);
        if (pos.x() < slot.left() || pos.x() > slot.right()) continue;
        QString text = tr("layer %1: budget %2 entries per KV head").arg(l).arg(m_budgets[static_cast<size_t>(l)]);
        if (l < static_cast<int>(m_held.size()) && !m_held[static_cast<size_t>(l)].empty()) {
            QStringList held;
            for (int64_t h : m_held[static_cast<size_t>(l)]) held << QString::number(h);
            text += tr("; held per KV head: %1").arg(held.join(QStringLiteral(", ")));
        }
        return text + tr(" (drag to change)");
    }
    return {};
}

bool BudgetBars::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(e);
        const QString text = hoverText(help->pos());
        if (text.isEmpty()) QToolTip::showText(help->globalPos(), toolTip(), this);
        else QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(e);
}

QPoint BudgetBars::pointFor(int layer, int64_t value) const {
    const QRect plot = plotIn(rect());
    const double y = plot.bottom() - static_cast<double>(value) / scaleMax() * plot.height();
    return QPoint(barSlot(layer).center().x(), static_cast<int>(std::lround(y)));
}

int64_t BudgetBars::valueAt(int y) const {
    const QRect plot = plotIn(rect());
    const double v = (plot.bottom() - y) / static_cast<double>(std::max(1, plot.height())) * scaleMax();
    return std::clamp<int64_t>(static_cast<int64_t>(std::lround(v)), 1, static_cast<int64_t>(scaleMax()));
}

void BudgetBars::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.fillRect(area, palette().color(QPalette::Base));
    const QRect plot = plotIn(area);
    const double top = scaleMax();
    p.setFont(labelFont());
    const int stride = strideIn(area);
    // The prompt length: budgets above it evict nothing.
    const int limitY = static_cast<int>(plot.bottom() - static_cast<double>(m_limit) / top * plot.height());
    p.setPen(QPen(palette().color(QPalette::Mid), 1, Qt::DashLine));
    p.drawLine(plot.left(), limitY, plot.right(), limitY);
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRect(area.left(), limitY - 7, kAxisWidth - 3, 14), Qt::AlignRight | Qt::AlignVCenter,
               QString::number(m_limit));
    p.drawText(QRect(area.left(), plot.bottom() - 7, kAxisWidth - 3, 14), Qt::AlignRight | Qt::AlignVCenter, "0");
    for (int l = 0; l < static_cast<int>(m_budgets.size()); ++l) {
        const QRect slot = slotIn(area, l);
        const int64_t b = m_budgets[static_cast<size_t>(l)];
        const int h = static_cast<int>(static_cast<double>(b) / top * plot.height());
        const bool perHead = hasHeadBars(l);
        const int barWidth = barWidthIn(slot, l);
        const QRect bar(slot.left() + (slot.width() - barWidth) / 2 - (perHead ? barWidth / 2 : 0), plot.bottom() - h,
                        barWidth, h);
        p.fillRect(bar, l == m_dragLayer ? selectionColour() : statusColour(TokenStatus::Held));
        p.setPen(palette().color(QPalette::WindowText));
        const QString value = QString::number(b);
        const int room = valueRoomIn(slot, l);
        if (p.fontMetrics().horizontalAdvance(value) + 2 <= room)
            p.drawText(QRect(perHead ? bar.left() : slot.left(), bar.top() - kValueHeight, room, kValueHeight),
                       Qt::AlignCenter, value);
        if (l % stride == 0) {  // centred on its column, as wide as it needs
            const int w = p.fontMetrics().horizontalAdvance(QStringLiteral("L%1").arg(l)) + 4;
            p.drawText(QRect(slot.center().x() - w / 2, plot.bottom() + 1, w, kLabelHeight), Qt::AlignCenter,
                       QStringLiteral("L%1").arg(l));
        }
        if (!perHead) continue;
        const auto& held = m_held[static_cast<size_t>(l)];
        const int sub = std::max(1, barWidth / static_cast<int>(held.size()));
        for (size_t kv = 0; kv < held.size(); ++kv) {
            const int hh = static_cast<int>(static_cast<double>(held[kv]) / top * plot.height());
            const QRect headBar(bar.right() + 2 + static_cast<int>(kv) * sub, plot.bottom() - hh, sub - 1, hh);
            p.fillRect(headBar, kv % 2 ? selectionColour() : statusColour(TokenStatus::Sink));
            // The entries it holds, above it, where the number fits.
            const QString n = QString::number(held[kv]);
            if (p.fontMetrics().horizontalAdvance(n) <= sub - 1)
                p.drawText(QRect(headBar.left(), headBar.top() - kValueHeight, sub - 1, kValueHeight), Qt::AlignCenter, n);
        }
    }
    p.restore();
}

void BudgetBars::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

void BudgetBars::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return;
    for (int l = 0; l < static_cast<int>(m_budgets.size()); ++l)
        if (barSlot(l).contains(e->position().toPoint())) {
            m_frozenScale = scaleMax();
            m_dragLayer = l;
            dragTo(e->position().toPoint());
            return;
        }
}

void BudgetBars::dragTo(const QPoint& pos) {
    const int64_t v = valueAt(pos.y());
    if (m_budgets[static_cast<size_t>(m_dragLayer)] == v) return;
    m_budgets[static_cast<size_t>(m_dragLayer)] = v;
    update();
    Q_EMIT dragged(m_budgets);
}

// Tracks the drag by m_dragLayer, not by event buttons: synthetic and
// tablet moves do not always carry them.
void BudgetBars::mouseMoveEvent(QMouseEvent* e) {
    if (m_dragLayer >= 0) dragTo(e->position().toPoint());
}

void BudgetBars::mouseReleaseEvent(QMouseEvent* e) {
    if (m_dragLayer < 0) return;
    dragTo(e->position().toPoint());
    m_dragLayer = -1;
    m_frozenScale = 0;
    update();
    Q_EMIT edited(m_budgets);
}

}  // namespace kvlens::ui
