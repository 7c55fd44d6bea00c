#include "widgets/comparison_view.h"

#include <QEvent>
#include <QPainter>
#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>
#include <algorithm>

#include "widgets/attention_heatmap.h"
#include "widgets/attention_lod.h"
#include "widgets/head_grid.h"
#include "widgets/policy_column.h"
#include "widgets/status_legend.h"
#include "widgets/token_strip.h"

namespace kvlens::ui {

namespace {
constexpr int kGap = 6;  // between columns
}  // namespace

ComparisonView::ComparisonView(QWidget* parent)
    : QWidget(parent),
      m_legend(new StatusLegend(this)),
      m_stale(new QLabel(this)),
      m_scroll(new QScrollArea(this)),
      m_pane(new QWidget) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_legend);
    m_stale->setObjectName(QStringLiteral("staleNote"));
    m_stale->setWordWrap(true);
    m_stale->setTextFormat(Qt::PlainText);
    m_stale->setMargin(4);
    // An amber band with black text: readable in every theme.
    m_stale->setStyleSheet(QStringLiteral("QLabel { background: #ffd54f; color: black; }"));
    m_stale->hide();
    layout->addWidget(m_stale);
    layout->addWidget(m_scroll, 1);
    m_scroll->setFrameShape(QFrame::NoFrame);
    m_scroll->setWidgetResizable(true);  // the pane fills the view down to its minimum size
    m_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    m_scroll->setWidget(m_pane);
    m_pane->installEventFilter(this);
}

void ComparisonView::setStale(const QString& why) {
    m_stale->setText(why);
    m_stale->setVisible(!why.isEmpty());
}

QString ComparisonView::staleNote() const { return m_stale->isHidden() ? QString() : m_stale->text(); }

// Narrower than this a heatmap and its colour bar stop being readable: the
// columns scroll instead.
int ComparisonView::minimumColumnWidth() const { return std::max(140, fontMetrics().averageCharWidth() * 20); }

bool ComparisonView::eventFilter(QObject* watched, QEvent* e) {
    if (watched == m_pane && e->type() == QEvent::Resize) layoutColumns();
    return QWidget::eventFilter(watched, e);
}

void ComparisonView::changeEvent(QEvent* e) {
    QWidget::changeEvent(e);
    if (e->type() == QEvent::FontChange) layoutColumns();  // zoom: wider columns, taller headers
}

void ComparisonView::layoutColumns() {
    const int n = columnCount();
    const int minWidth = minimumColumnWidth();
    m_pane->setMinimumWidth(n > 0 ? n * minWidth + (n - 1) * kGap : 0);
    if (n == 0) return;
    const int w = std::max(minWidth, (m_pane->width() - (n - 1) * kGap) / n);
    m_columnWidth = w;
    int headerH = 0;
    for (PolicyColumn* c : m_columns) headerH = std::max(headerH, c->headerHeightFor(w));
    int minHeight = 0;
    for (PolicyColumn* c : m_columns) {
        c->setHeaderHeight(headerH);
        minHeight = std::max(minHeight, c->minimumHeightFor(w));
    }
    m_pane->setMinimumHeight(minHeight);
    for (int i = 0; i < n; ++i)
        m_columns[static_cast<size_t>(i)]->setGeometry(i * (w + kGap), 0, w, std::max(minHeight, m_pane->height()));
}

void ComparisonView::setHoverToken(int index) {
    m_hover = index;
    for (PolicyColumn* c : m_columns) c->setHoverToken(index);
}

void ComparisonView::rebuildColumns(int count) {
    while (static_cast<int>(m_columns.size()) > count) {
        delete m_columns.back();
        m_columns.pop_back();
    }
    while (static_cast<int>(m_columns.size()) < count) {
        auto* c = new PolicyColumn(m_pane);
        c->setHighlight(m_highlight);
        c->setHoverToken(m_hover);
        c->show();
        connect(c->strip(), &TokenStrip::tokenHovered, this, &ComparisonView::setHoverToken);
        connect(c->strip(), &TokenStrip::tokenClicked, this, &ComparisonView::tokenClicked);
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
    int headerH = 0;  // aligned as on screen
    for (const PolicyColumn* c : m_columns) headerH = std::max(headerH, c->paintedHeaderHeight(w));
    for (int i = 0; i < n; ++i)
        m_columns[static_cast<size_t>(i)]->paint(
            p, QRect(area.left() + i * (w + gap), area.top() + legendH + 4, w, area.height() - legendH - 4), headerH);
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
    layoutColumns();  // the headers' text changed
    ++m_updates;
}

}  // namespace kvlens::ui
