#pragma once
// The comparison view: one PolicyColumn per policy of a Trace (full first),
// with a synchronised layer/head selection, one colour range shared by every
// heatmap (so colours compare across columns) and synchronised zoom/pan.
// The columns are aligned: all of one width, their headers of one height, so
// a token sits in the same place in every strip and the heatmaps start at
// the same height; below a readable width they scroll sideways instead of
// squeezing (or widening the window). The token under the mouse in one
// strip is marked in every strip and heatmap.
#include <QWidget>
#include <memory>
#include <vector>

#include "core/run/trace.h"
#include "widgets/highlight.h"
#include "widgets/palette.h"

class QLabel;
class QScrollArea;

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

    // A mark over the columns when they are not the current settings' run
    // (a cancel, a failure, another model since): the sentence says which;
    // empty clears it.
    void setStale(const QString& why);
    QString staleNote() const;

    // Legend and every column onto any painter at any size (for exports).
    void paint(QPainter& p, const QRect& area) const;

    // The token marked as under the mouse in every column, -1 for none.
    void setHoverToken(int index);
    int hoverToken() const { return m_hover; }
    int columnWidth() const { return m_columnWidth; }
    int minimumColumnWidth() const;
    QScrollArea* scrollArea() const { return m_scroll; }

    int columnCount() const { return static_cast<int>(m_columns.size()); }
    PolicyColumn* column(int i) const { return m_columns[static_cast<size_t>(i)]; }
    // How many times the columns were refreshed from a trace (tests wait on it).
    int updates() const { return m_updates; }

Q_SIGNALS:
    void selectionChanged(int64_t layer, int64_t head);
    void tokenClicked(int index);  // a cell of any column's strip (a lesson's pick)

protected:
    bool eventFilter(QObject* watched, QEvent* e) override;
    void changeEvent(QEvent* e) override;

private:
    void rebuildColumns(int count);
    void layoutColumns();
    void refresh();
    void syncView(const QRectF& view);

    StatusLegend* m_legend;
    QLabel* m_stale;  // setStale's mark
    QScrollArea* m_scroll;
    QWidget* m_pane;  // the columns, side by side, inside m_scroll
    int m_columnWidth = 0;
    int m_hover = -1;
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
