#pragma once
// The comparison view: one PolicyColumn per policy of a Trace (full first),
// with a synchronised layer/head selection, one colour range shared by every
// heatmap (so colours compare across columns) and synchronised zoom/pan.
#include <QWidget>
#include <memory>
#include <vector>

#include "core/run/trace.h"
#include "widgets/highlight.h"
#include "widgets/palette.h"

class QHBoxLayout;

namespace kvlens::ui {

class PolicyColumn;
class AttentionLod;
class StatusLegend;

class ComparisonView : public QWidget {
    Q_OBJECT
public:
    explicit ComparisonView(QWidget* parent = nullptr);

    void setTrace(std::shared_ptr<const Trace> trace);
    std::shared_ptr<const Trace> trace() const { return m_trace; }
    void setSelection(int64_t layer, int64_t head);
    int64_t selectedLayer() const { return m_layer; }
    int64_t selectedHead() const { return m_head; }
    // What a lesson step points at, on every column; kept across traces
    // until replaced (an empty Highlight clears it).
    void setHighlight(const Highlight& h);
    const Highlight& highlight() const { return m_highlight; }
    void setColourScale(ColourScale scale);
    ColourScale colourScale() const { return m_scale; }
    ColourRange colourRange() const { return m_range; }

    // Legend and every column onto any painter at any size (for exports).
    void paint(QPainter& p, const QRect& area) const;

    int columnCount() const { return static_cast<int>(m_columns.size()); }
    PolicyColumn* column(int i) const { return m_columns[static_cast<size_t>(i)]; }
    // How many times the columns were refreshed from a trace (tests wait on it).
    int updates() const { return m_updates; }

Q_SIGNALS:
    void selectionChanged(int64_t layer, int64_t head);

private:
    void rebuildColumns(int count);
    void refresh();
    void syncView(const QRectF& view);

    StatusLegend* m_legend;
    QHBoxLayout* m_columnsLayout;
    std::vector<PolicyColumn*> m_columns;
    std::shared_ptr<const Trace> m_trace;
    int64_t m_layer = 0, m_head = 0;
    ColourScale m_scale = ColourScale::Linear;
    ColourRange m_range;
    // Level-of-detail pyramids of m_trace's maps, built once per trace (a
    // selection or scale change reuses them).
    const Trace* m_lodTrace = nullptr;
    std::vector<std::shared_ptr<const AttentionLod>> m_lods;
    int m_updates = 0;
    Highlight m_highlight;
};

}  // namespace kvlens::ui
