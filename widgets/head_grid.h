#pragma once
// Layers × query heads overview of one policy: each cell coloured by the
// share of the full cache's attention that the policy's cache retains for
// that head (latest query). Query heads are grouped under their KV head
// (GQA), with a gap between groups. Clicking a cell selects layer and head.
#include <QWidget>
#include <memory>

#include "core/run/trace.h"
#include "widgets/highlight.h"

namespace kvlens::ui {

class HeadGrid : public QWidget {
    Q_OBJECT
public:
    explicit HeadGrid(QWidget* parent = nullptr);

    void setData(std::shared_ptr<const Trace> trace, int policy);
    void setSelection(int64_t layer, int64_t head);
    int64_t selectedLayer() const { return m_layer; }
    int64_t selectedHead() const { return m_head; }
    QRect cellRect(int64_t layer, int64_t head) const;
    void paint(QPainter& p, const QRect& area) const;
    // Rings drawn over the heads a lesson step points at (widgets/highlight.h).
    void setHighlight(const Highlight& h);
    const Highlight& highlight() const { return m_highlight; }
    // Why the grid has no values, drawn across it ("" when it has them).
    QString note() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override { return {80, 50}; }

Q_SIGNALS:
    void headSelected(int64_t layer, int64_t head);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;

private:
    QRect cellRectIn(const QRect& area, int64_t layer, int64_t head) const;
    bool hitTest(const QPoint& pos, int64_t* layer, int64_t* head) const;
    float mass(int64_t layer, int64_t head) const;

    std::shared_ptr<const Trace> m_trace;
    int m_policy = 0;
    int64_t m_layer = 0, m_head = 0;
    Highlight m_highlight;
};

}  // namespace kvlens::ui
