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
    QString headerText() const;
    void setHighlight(const Highlight& h);  // its strip, heatmap and grid
    // The whole column (header, strip, heatmap, grid) onto any painter, at
    // any size: exports render through this, not through the widgets.
    void paint(QPainter& p, const QRect& area) const;
    TokenStrip* strip() const { return m_strip; }
    AttentionHeatmap* heatmap() const { return m_heatmap; }
    HeadGrid* grid() const { return m_grid; }

private:
    QLabel* m_header;
    TokenStrip* m_strip;
    AttentionHeatmap* m_heatmap;
    HeadGrid* m_grid;
};

}  // namespace kvlens::ui
