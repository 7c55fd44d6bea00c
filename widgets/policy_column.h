#pragma once
// One policy's column of the comparison view: a header (label, schedule,
// memory held, budget note), its token strip, attention heatmap and
// layers × heads grid, all showing the same selected layer and head.
#include <QWidget>
#include <memory>

#include "core/run/trace.h"
#include "widgets/attention_lod.h"
#include "widgets/highlight.h"

class QLabel;
class QTextDocument;

namespace kvlens::ui {

class TokenStrip;
class AttentionHeatmap;
class HeadGrid;

class PolicyColumn : public QWidget {
    Q_OBJECT
public:
    explicit PolicyColumn(QWidget* parent = nullptr);

    void setData(std::shared_ptr<const Trace> trace, int policy, std::shared_ptr<const AttentionLod> lod,
                 int64_t layer, int64_t head);
    QString headerText() const;  // as plain text
    // The comparison view aligns its columns: every header gets the height
    // of the tallest, so strips and heatmaps start at the same height.
    int headerHeightFor(int width) const;
    void setHeaderHeight(int height);
    int minimumHeightFor(int width) const;  // with the header height set
    void setHoverToken(int index);          // its strip and heatmap
    void setHighlight(const Highlight& h);  // its strip, heatmap and grid
    // The whole column (header, strip, heatmap, grid) onto any painter, at
    // any size: exports render through this, not through the widgets.
    // A headerHeight above the header's own aligns it with other columns.
    void paint(QPainter& p, const QRect& area, int headerHeight = 0) const;
    int paintedHeaderHeight(int width) const;
    TokenStrip* strip() const { return m_strip; }
    AttentionHeatmap* heatmap() const { return m_heatmap; }
    HeadGrid* grid() const { return m_grid; }

private:
    void layOutHeader(QTextDocument& header, int width) const;

    QLabel* m_header;
    TokenStrip* m_strip;
    AttentionHeatmap* m_heatmap;
    HeadGrid* m_grid;
};

}  // namespace kvlens::ui
