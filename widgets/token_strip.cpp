#include "widgets/token_strip.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <cmath>
#include <iterator>

#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

constexpr int kMargin = 2;
// Long sequences get smaller cells so that the strip never crowds out the
// heatmap: the largest pitch whose rows fit in kMaxHeight.
constexpr int kPitches[] = {10, 7, 5, 4, 3, 2};
constexpr int kMaxHeight = 160;

int cellSize(int pitch) { return pitch >= 4 ? pitch - 1 : pitch; }

}  // namespace

TokenStrip::TokenStrip(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    QSizePolicy sp(QSizePolicy::Expanding, QSizePolicy::Preferred);
    sp.setHeightForWidth(true);
    setSizePolicy(sp);
}

void TokenStrip::setData(std::shared_ptr<const Trace> trace, int policy, int64_t layer, int64_t kvHead) {
    m_trace = std::move(trace);
    m_policy = policy;
    m_layer = layer;
    m_kvHead = kvHead;
    updateGeometry();
    update();
}

int TokenStrip::tokenCount() const { return m_trace ? static_cast<int>(m_trace->tokens.size()) : 0; }

const HeadTrace* TokenStrip::head() const {
    if (!m_trace || m_policy < 0 || m_policy >= static_cast<int>(m_trace->policies.size())) return nullptr;
    const auto& layers = m_trace->policies[static_cast<size_t>(m_policy)].layers;
    if (m_layer < 0 || m_layer >= static_cast<int64_t>(layers.size())) return nullptr;
    const auto& heads = layers[static_cast<size_t>(m_layer)].heads;
    if (m_kvHead < 0 || m_kvHead >= static_cast<int64_t>(heads.size())) return nullptr;
    return &heads[static_cast<size_t>(m_kvHead)];
}

int TokenStrip::pitchFor(int width) const {
    const int n = std::max(1, tokenCount());
    for (int pitch : kPitches) {
        const int cols = std::max(1, (width - 2 * kMargin) / pitch);
        if ((n + cols - 1) / cols * pitch <= kMaxHeight) return pitch;
    }
    return kPitches[std::size(kPitches) - 1];
}

int TokenStrip::columnsFor(int width) const { return std::max(1, (width - 2 * kMargin) / pitchFor(width)); }

int TokenStrip::heightForWidth(int width) const {
    const int n = std::max(1, tokenCount());
    const int rows = (n + columnsFor(width) - 1) / columnsFor(width);
    return rows * pitchFor(width) + 2 * kMargin;
}

QSize TokenStrip::sizeHint() const { return {300, heightForWidth(300)}; }

QRect TokenStrip::cellRectIn(const QRect& area, int index) const {
    if (index < 0 || index >= tokenCount()) return {};
    const int cols = columnsFor(area.width()), pitch = pitchFor(area.width());
    return QRect(area.left() + kMargin + (index % cols) * pitch, area.top() + kMargin + (index / cols) * pitch,
                 cellSize(pitch), cellSize(pitch));
}

QRect TokenStrip::cellRect(int index) const { return cellRectIn(rect(), index); }

int TokenStrip::indexAt(const QPoint& pos) const {
    const int cols = columnsFor(width()), pitch = pitchFor(width());
    const int x = pos.x() - kMargin, y = pos.y() - kMargin;
    if (x < 0 || y < 0 || x / pitch >= cols) return -1;
    const int i = (y / pitch) * cols + x / pitch;
    return i < tokenCount() ? i : -1;
}

void TokenStrip::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.fillRect(area, palette().color(QPalette::Base));
    const HeadTrace* h = head();
    const int n = tokenCount();
    for (int i = 0; i < n; ++i) {
        const TokenStatus s = h && i < static_cast<int>(h->status.size()) ? h->status[static_cast<size_t>(i)]
                                                                          : TokenStatus::Unseen;
        p.fillRect(cellRectIn(area, i), statusColour(s));
    }
    // Decode steps read tokens after the prompt: underline them so the strip
    // shows where generation started.
    if (m_trace) {
        p.setPen(palette().color(QPalette::WindowText));
        for (int i = static_cast<int>(m_trace->promptLength); i < n; ++i) {
            const QRect c = cellRectIn(area, i);
            p.drawLine(c.left(), c.bottom() + 1, c.right(), c.bottom() + 1);
        }
    }
    for (int64_t t : m_highlight.tokens)
        if (t >= 0 && t < n) drawHighlightRing(p, cellRectIn(area, static_cast<int>(t)));
    if (m_hover >= 0 && m_hover < n) drawHoverFrame(p, cellRectIn(area, m_hover));
    p.restore();
}

void TokenStrip::setHighlight(const Highlight& h) {
    m_highlight = h;
    update();
}

void TokenStrip::setHoverToken(int index) {
    if (index == m_hover) return;
    m_hover = index;
    update();
}

void TokenStrip::mouseMoveEvent(QMouseEvent* e) {
    const int i = indexAt(e->position().toPoint());
    if (i == m_hover) return;
    setHoverToken(i);
    Q_EMIT tokenHovered(i);
}

void TokenStrip::mouseReleaseEvent(QMouseEvent* e) {
    const int i = indexAt(e->position().toPoint());
    if (e->button() == Qt::LeftButton && i >= 0) Q_EMIT tokenClicked(i);
    QWidget::mouseReleaseEvent(e);
}

void TokenStrip::leaveEvent(QEvent*) {
    if (m_hover < 0) return;
    setHoverToken(-1);
    Q_EMIT tokenHovered(-1);
}

void TokenStrip::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

QString TokenStrip::describe(int i) const {
    if (!m_trace || i < 0 || i >= tokenCount()) return {};
    const HeadTrace* h = head();
    const auto idx = static_cast<size_t>(i);
    const QString label = idx < m_trace->labels.size() ? QString::fromStdString(m_trace->labels[idx]) : QString();
    QString out = QStringLiteral("“%1” at %2%3").arg(label).arg(i).arg(
        i >= m_trace->promptLength ? QStringLiteral(" (generated)") : QString());
    if (!h) return out;
    const TokenStatus s = idx < h->status.size() ? h->status[idx] : TokenStatus::Unseen;
    out += QStringLiteral("\n%1").arg(s == TokenStatus::Held ? QStringLiteral("held (no eviction decision yet)") : statusText(s));
    const float score = idx < h->score.size() ? h->score[idx] : kNoScore;
    if (!std::isnan(score)) out += QStringLiteral("\nscore %1").arg(static_cast<double>(score), 0, 'g', 4);
    const int rank = idx < h->rank.size() ? h->rank[idx] : -1;
    if (rank >= 0) out += QStringLiteral("\nrank %1").arg(rank);
    if (!std::isnan(h->cutoff)) out += QStringLiteral("\ncut-off %1").arg(static_cast<double>(h->cutoff), 0, 'g', 4);
    out += QStringLiteral("\nL%1 KV%2 holds %3 entries").arg(m_layer).arg(m_kvHead).arg(h->held);
    return out;
}

bool TokenStrip::event(QEvent* e) {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    const int i = indexAt(help->pos());
    if (i < 0)
        QToolTip::hideText();
    else
        QToolTip::showText(help->globalPos(), describe(i), this, cellRect(i));
    return true;
}

}  // namespace kvlens::ui
