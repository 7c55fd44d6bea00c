#include "widgets/comparison_view.h"

#include <QHBoxLayout>
#include <QPainter>
#include <QVBoxLayout>
#include <algorithm>

#include "widgets/attention_heatmap.h"
#include "widgets/attention_lod.h"
#include "widgets/head_grid.h"
#include "widgets/policy_column.h"
#include "widgets/status_legend.h"

namespace kvlens::ui {

ComparisonView::ComparisonView(QWidget* parent)
    : QWidget(parent), m_legend(new StatusLegend(this)), m_columnsLayout(new QHBoxLayout) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_legend);
    layout->addLayout(m_columnsLayout, 1);
    m_columnsLayout->setSpacing(6);
}

void ComparisonView::rebuildColumns(int count) {
    while (static_cast<int>(m_columns.size()) > count) {
        delete m_columns.back();
        m_columns.pop_back();
    }
    while (static_cast<int>(m_columns.size()) < count) {
        auto* c = new PolicyColumn(this);
        c->setHighlight(m_highlight);
        m_columnsLayout->addWidget(c, 1);
        connect(c->grid(), &HeadGrid::headSelected, this, [this](int64_t l, int64_t h) {
            setSelection(l, h);
            Q_EMIT selectionChanged(l, h);
        });
        connect(c->heatmap(), &AttentionHeatmap::viewChanged, this, &ComparisonView::syncView);
        m_columns.push_back(c);
    }
}

void ComparisonView::setHighlight(const Highlight& h) {
    m_highlight = h;
    for (PolicyColumn* c : m_columns) c->setHighlight(h);
}

void ComparisonView::setTrace(std::shared_ptr<const Trace> trace) {
    m_trace = std::move(trace);
    refresh();
}

void ComparisonView::setSelection(int64_t layer, int64_t head) {
    m_layer = layer;
    m_head = head;
    refresh();
}

void ComparisonView::setColourScale(ColourScale scale) {
    m_scale = scale;
    refresh();  // the log scale needs its own lower end of the range
}

void ComparisonView::syncView(const QRectF& view) {
    for (auto* c : m_columns)
        if (c->heatmap() != sender()) c->heatmap()->setView(view);
}

void ComparisonView::paint(QPainter& p, const QRect& area) const {
    p.fillRect(area, palette().color(QPalette::Window));
    const int legendH = m_legend->paint(p, area);
    const int n = columnCount();
    if (n == 0) return;
    constexpr int gap = 8;
    const int w = (area.width() - gap * (n - 1)) / n;
    for (int i = 0; i < n; ++i)
        m_columns[static_cast<size_t>(i)]->paint(
            p, QRect(area.left() + i * (w + gap), area.top() + legendH + 4, w, area.height() - legendH - 4));
}

void ComparisonView::refresh() {
    if (!m_trace) return;
    const int n = static_cast<int>(m_trace->policies.size());
    rebuildColumns(n);
    m_layer = std::clamp<int64_t>(m_layer, 0, std::max<int64_t>(0, m_trace->numLayers - 1));
    m_head = std::clamp<int64_t>(m_head, 0, std::max<int64_t>(0, m_trace->numHeads - 1));
    if (m_lodTrace != m_trace.get()) {
        m_lods.assign(static_cast<size_t>(n), nullptr);
        for (int i = 0; i < n && i < static_cast<int>(m_trace->attention.size()); ++i) {
            auto lod = std::make_shared<const AttentionLod>(m_trace->attention[static_cast<size_t>(i)]);
            if (lod->size() > 0) m_lods[static_cast<size_t>(i)] = lod;
        }
        m_lodTrace = m_trace.get();
    }
    const auto& lods = m_lods;
    // One range for every column: the same colour means the same weight.
    ColourRange range{0, 0};
    float minPositive = 1;
    for (const auto& lod : lods) {
        if (!lod) continue;
        range.hi = std::max(range.hi, lod->maxValue());
        if (lod->minPositive() > 0) minPositive = std::min(minPositive, lod->minPositive());
    }
    if (range.hi <= 0) range.hi = 1;
    range.lo = m_scale == ColourScale::Log ? minPositive : 0.0f;
    m_range = range;
    for (int i = 0; i < n; ++i) {
        PolicyColumn* c = m_columns[static_cast<size_t>(i)];
        c->heatmap()->setColourRange(range);
        c->heatmap()->setColourScale(m_scale);
        c->setData(m_trace, i, lods[static_cast<size_t>(i)], m_layer, m_head);
    }
    ++m_updates;
}

}  // namespace kvlens::ui
