#pragma once
// Per-layer budget bars that the mouse drags: press on a layer's column and
// move up or down; releasing reports the new budgets once (one undo step per
// drag). Optionally shows, beside each bar, what one policy's KV heads
// actually hold in that layer (per-head view for adaptive allocators).
#include <QWidget>
#include <cstdint>
#include <vector>

namespace kvlens::ui {

class BudgetBars : public QWidget {
    Q_OBJECT
public:
    explicit BudgetBars(QWidget* parent = nullptr);

    void setBudgets(const std::vector<int64_t>& perLayer);
    const std::vector<int64_t>& budgets() const { return m_budgets; }
    void setLimit(int64_t promptLength);  // bars are scaled to at least this
    // held[layer][kvHead]; empty hides the per-head view.
    void setHeadHeld(std::vector<std::vector<int64_t>> held);

    QRect barSlot(int layer) const;          // the column a layer's bar lives in
    // Deep models (30, 80 layers): a layer label every labelStride()-th
    // column and a value only where it fits its column, so that nothing is
    // drawn over anything; the exact numbers are in the hover text.
    int labelStride() const;
    bool valueFits(int layer) const;
    // The hover text at a point: the layer, its budget and what each KV head
    // holds; empty outside the bars.
    QString hoverText(const QPoint& pos) const;
    QPoint pointFor(int layer, int64_t value) const;  // where dragging to `value` lands
    void paint(QPainter& p, const QRect& area) const;
    QSize sizeHint() const override { return {260, 140}; }
    QSize minimumSizeHint() const override { return {120, 80}; }

Q_SIGNALS:
    void dragged(const std::vector<int64_t>& perLayer);  // while dragging (live preview)
    void edited(const std::vector<int64_t>& perLayer);   // on release

protected:
    bool event(QEvent* e) override;
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mouseReleaseEvent(QMouseEvent* e) override;

private:
    QFont labelFont() const;
    bool hasHeadBars(int layer) const;
    int barWidthIn(const QRect& slot, int layer) const;
    int valueRoomIn(const QRect& slot, int layer) const;
    int strideIn(const QRect& area) const;
    QRect plotIn(const QRect& area) const;
    QRect slotIn(const QRect& area, int layer) const;
    double scaleMax() const;
    int64_t valueAt(int y) const;
    void dragTo(const QPoint& pos);

    std::vector<int64_t> m_budgets;
    std::vector<std::vector<int64_t>> m_held;
    int64_t m_limit = 1;
    int m_dragLayer = -1;
    double m_frozenScale = 0;  // the scale stays put while dragging
};

}  // namespace kvlens::ui
