#include "widgets/needle_view.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

#include "widgets/figure.h"
#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

constexpr int kPanelMinWidth = 170;
constexpr int kTitleHeight = 16;
constexpr int kAxisWidth = 40;
constexpr int kAxisHeight = 14;
constexpr int kAxisTitle = 12;  // "needle depth" below, "context" beside

template <class T>
int indexOf(const std::vector<T>& v, const T& x) {
    return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

}  // namespace

NeedleView::NeedleView(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    setToolTip(tr("Rows: context length in tokens; columns: needle depth in the haystack; "
                  "cells: % of probes answered (exact match or word overlap)"));
}

void NeedleView::setResult(std::shared_ptr<const eval::NeedleGridResult> result) {
    m_result = std::move(result);
    group();
    update();
}

void NeedleView::setMetric(Metric metric) {
    m_metric = metric;
    update();
}

// Cells arrive context-major, then depth, then full, then policies × budgets:
// panels keep that first-appearance order, so full comes first.
void NeedleView::group() {
    m_contexts.clear();
    m_depths.clear();
    m_panels.clear();
    if (!m_result) return;
    for (const auto& c : m_result->cells) {
        if (indexOf(m_contexts, c.context) == static_cast<int>(m_contexts.size())) m_contexts.push_back(c.context);
        if (indexOf(m_depths, c.depth) == static_cast<int>(m_depths.size())) m_depths.push_back(c.depth);
    }
    std::sort(m_contexts.begin(), m_contexts.end());
    std::sort(m_depths.begin(), m_depths.end());
    const size_t size = m_contexts.size() * m_depths.size();
    for (const auto& c : m_result->cells) {
        auto it = std::find_if(m_panels.begin(), m_panels.end(),
                               [&](const Panel& p) { return p.policy == c.policy && p.budget == c.budget; });
        if (it == m_panels.end()) {
            m_panels.push_back({c.policy, c.budget, std::vector<const eval::NeedleCell*>(size, nullptr)});
            it = m_panels.end() - 1;
        }
        const size_t row = static_cast<size_t>(indexOf(m_contexts, c.context));
        it->cells[row * m_depths.size() + static_cast<size_t>(indexOf(m_depths, c.depth))] = &c;
    }
}

double NeedleView::value(const eval::NeedleCell& c) const { return m_metric == Metric::Exact ? c.exact : c.overlap; }

QString NeedleView::panelTitle(int panel) const {
    const Panel& p = m_panels[static_cast<size_t>(panel)];
    double sum = 0;
    int n = 0;
    for (const auto* c : p.cells)
        if (c) {
            sum += value(*c);
            ++n;
        }
    const QString name = p.budget == "-" ? QString::fromStdString(p.policy)
                                         : QStringLiteral("%1 @ %2").arg(QString::fromStdString(p.policy),
                                                                         QString::fromStdString(p.budget));
    return QStringLiteral("%1 · %2%").arg(name).arg(n ? 100.0 * sum / n : 0.0, 0, 'f', 0);
}

QRect NeedleView::panelRect(const QRect& area, int panel) const {
    const int n = std::max(1, panelCount());
    const int cols = std::clamp(area.width() / kPanelMinWidth, 1, n);
    const int rows = (n + cols - 1) / cols;
    const int w = area.width() / cols, h = area.height() / rows;
    return QRect(area.left() + (panel % cols) * w, area.top() + (panel / cols) * h, w - 6, h - 6);
}

QRect NeedleView::cellRectIn(const QRect& panelArea, int row, int column) const {
    const QRect grid = panelArea.adjusted(kAxisTitle + kAxisWidth, kTitleHeight, 0, -(kAxisHeight + kAxisTitle));
    const int rows = std::max<int>(1, static_cast<int>(m_contexts.size()));
    const int cols = std::max<int>(1, static_cast<int>(m_depths.size()));
    const double w = grid.width() / static_cast<double>(cols), h = grid.height() / static_cast<double>(rows);
    return QRectF(grid.left() + column * w, grid.top() + row * h, w, h).toAlignedRect().adjusted(0, 0, -1, -1);
}

QRect NeedleView::cellRect(int panel, int row, int column) const {
    return cellRectIn(panelRect(rect(), panel), row, column);
}

void NeedleView::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.fillRect(area, palette().color(QPalette::Base));
    p.setPen(palette().color(QPalette::WindowText));
    if (m_panels.empty()) {
        p.drawText(area, Qt::AlignCenter | Qt::TextWordWrap, tr("Run a needle grid to see which policies keep the needle"));
        p.restore();
        return;
    }
    QFont small = p.font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
    for (int i = 0; i < panelCount(); ++i) {
        const QRect panel = panelRect(area, i);
        p.setFont(font());
        p.drawText(QRect(panel.left(), panel.top(), panel.width(), kTitleHeight), Qt::AlignLeft | Qt::AlignVCenter,
                   panelTitle(i));
        p.setFont(small);
        const Panel& pn = m_panels[static_cast<size_t>(i)];
        for (size_t r = 0; r < m_contexts.size(); ++r) {
            const QRect first = cellRectIn(panel, static_cast<int>(r), 0);
            p.drawText(QRect(panel.left() + kAxisTitle, first.top(), kAxisWidth - 4, first.height()),
                       Qt::AlignRight | Qt::AlignVCenter, QString::number(m_contexts[r]));
            for (size_t c = 0; c < m_depths.size(); ++c) {
                const QRect cell = cellRectIn(panel, static_cast<int>(r), static_cast<int>(c));
                const auto* nc = pn.cells[r * m_depths.size() + c];
                if (!nc) continue;
                const double v = value(*nc);
                p.fillRect(cell, QColor(viridis(v)));
                p.setPen(v > 0.6 ? Qt::black : Qt::white);
                if (cell.width() > 24 && cell.height() > 10)
                    p.drawText(cell, Qt::AlignCenter, QString::number(100.0 * v, 'f', 0));
                p.setPen(palette().color(QPalette::WindowText));
            }
        }
        for (size_t c = 0; c < m_depths.size(); ++c) {
            const QRect last = cellRectIn(panel, static_cast<int>(m_contexts.size()) - 1, static_cast<int>(c));
            p.drawText(QRect(last.left(), last.bottom() + 1, last.width(), kAxisHeight), Qt::AlignCenter,
                       QStringLiteral("%1%").arg(100.0 * m_depths[c], 0, 'f', 0));
        }
        // Axis titles: what the columns and the rows are.
        const QRect first = cellRectIn(panel, 0, 0);
        const QRect last = cellRectIn(panel, static_cast<int>(m_contexts.size()) - 1, static_cast<int>(m_depths.size()) - 1);
        p.drawText(QRect(first.left(), last.bottom() + 1 + kAxisHeight, last.right() - first.left(), kAxisTitle),
                   Qt::AlignCenter, tr("needle depth"));
        p.save();
        p.translate(panel.left() + kAxisTitle / 2 + 1, (first.top() + last.bottom()) / 2);
        p.rotate(-90);
        p.drawText(QRect(-(last.bottom() - first.top()) / 2, -kAxisTitle / 2, last.bottom() - first.top(), kAxisTitle),
                   Qt::AlignCenter, tr("context (tokens)"));
        p.restore();
    }
    p.restore();
}

QString writeNeedleFigure(const QString& file, const NeedleView& view, double scale, const QString& modelName) {
    if (view.panelCount() == 0) return QStringLiteral("the needle grid has no panels to draw");
    const QString title = QStringLiteral("%1 · needle retrieval: context × depth").arg(modelName);
    // Four panels a row, each a quarter wider than kPanelMinWidth, so that
    // the view's own layout (as many columns as fit kPanelMinWidth) also
    // makes four; square-ish panels.
    const int cols = std::min(view.panelCount(), 4), rows = (view.panelCount() + cols - 1) / cols;
    const int panel = kPanelMinWidth * 5 / 4;
    const QSizeF size(std::max(360, panel * cols + 8), 28 + panel * rows);
    return writeFigure(
        file, size, scale,
        [&](QPainter& p, const QRectF& a) {
            p.fillRect(a, Qt::white);
            p.setPen(Qt::black);
            QFont f(QStringLiteral("DejaVu Sans"));
            f.setPointSizeF(9);
            f.setBold(true);
            p.setFont(f);
            p.drawText(QRectF(a.left() + 4, a.top(), a.width() - 8, 22), Qt::AlignLeft | Qt::AlignVCenter, title);
            p.setFont(QFont(QStringLiteral("DejaVu Sans"), 7));
            view.paint(p, a.adjusted(4, 24, -4, -4).toRect());
        },
        title);
}

void NeedleView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

}  // namespace kvlens::ui
