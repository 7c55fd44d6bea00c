#pragma once
// Query × key attention of one (layer, query head) for one policy. Zoom with
// the wheel, pan by dragging, double-click to reset. Paints through a QImage
// built from a max-pool level of detail, so its cost is bounded by the pixels
// on screen; evicted keys get their own colour (NaN colour).
#include <QRectF>
#include <QWidget>
#include <memory>

#include "core/run/trace.h"
#include "widgets/attention_lod.h"
#include "widgets/highlight.h"
#include "widgets/palette.h"

namespace kvlens::ui {

class AttentionHeatmap : public QWidget {
    Q_OBJECT
public:
    explicit AttentionHeatmap(QWidget* parent = nullptr);
    // A colour-bar label in at most about five characters: 0.25, 1, 9e-5, 3e4.
    static QString compactNumber(double v);
    // The title at this width: "attention L2 H5 · query ↓ key →", shortened to
    // "L2 H5 · query ↓ key →", then "attention L2 H5", as the width allows.
    QString titleText() const;

    // `map` may be null (no capture): the view says so. The trace keeps the
    // token labels alive for tooltips.
    void setMap(std::shared_ptr<const Trace> trace, std::shared_ptr<const AttentionLod> lod, int64_t layer,
                int64_t head);
    void setColourRange(ColourRange range);
    void setColourScale(ColourScale scale);
    ColourScale colourScale() const { return m_scale; }
    // The visible part of the map in cell coordinates (x: keys, y: queries).
    QRectF view() const { return m_view; }
    void setView(const QRectF& view);  // does not emit viewChanged
    void resetView();

    // Paints the whole view (title, map, colour bar) into `area`; used by
    // paintEvent and by exports onto any QPainter (PNG/SVG/PDF).
    void paint(QPainter& p, const QRect& area) const;
    // Rings drawn over the region a lesson step points at (widgets/highlight.h).
    void setHighlight(const Highlight& h);
    const Highlight& highlight() const { return m_highlight; }
    // The token under the mouse in a token strip: lines across its key
    // column and its query row (-1: none).
    void setHoverToken(int64_t position);
    int64_t hoverToken() const { return m_hover; }
    // Where the map itself lies in widget coordinates, and a cell's centre.
    QRect plotRect() const;
    QPoint cellCentre(int64_t query, int64_t key) const;

    QSize sizeHint() const override { return {320, 320}; }
    QSize minimumSizeHint() const override { return {120, 120}; }

Q_SIGNALS:
    void viewChanged(const QRectF& view);

protected:
    void paintEvent(QPaintEvent*) override;
    void wheelEvent(QWheelEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mouseReleaseEvent(QMouseEvent* e) override;
    void mouseDoubleClickEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;

private:
    QString titleFor(const QFontMetrics& fm, int width) const;
    QRect plotRectIn(const QRect& area) const;
    int barGap() const;  // room right of the colour bar for its labels
    QPointF toCell(const QPointF& widgetPos) const;
    QImage renderImage(const QRect& plot, QRectF* targetRect) const;
    void paintColourBar(QPainter& p, const QRect& bar) const;
    void applyView(QRectF view);

    std::shared_ptr<const Trace> m_trace;
    std::shared_ptr<const AttentionLod> m_lod;
    int64_t m_layer = 0, m_head = 0;
    ColourRange m_range;
    ColourScale m_scale = ColourScale::Linear;
    QRectF m_view;
    QPointF m_dragStart;
    QRectF m_dragView;
    bool m_dragging = false;
    Highlight m_highlight;
    int64_t m_hover = -1;
};

}  // namespace kvlens::ui
