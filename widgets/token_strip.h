#pragma once
// The tokens of the sequence as a wrapped strip of cells, coloured by what
// one policy's cache did with each token in one layer × KV head: sink,
// window, kept by score, held, evicted, not read yet. Hover shows the token,
// its position, status, score, rank and the cut-off score of the decision,
// and says which token is under the mouse (the comparison view marks it in
// every column).
#include <QWidget>
#include <memory>

#include "core/run/trace.h"
#include "widgets/highlight.h"

namespace kvlens::ui {

class TokenStrip : public QWidget {
    Q_OBJECT
public:
    explicit TokenStrip(QWidget* parent = nullptr);

    void setData(std::shared_ptr<const Trace> trace, int policy, int64_t layer, int64_t kvHead);
    int tokenCount() const;
    // The cell of token `index` in widget coordinates (empty when out of range).
    QRect cellRect(int index) const;
    int indexAt(const QPoint& pos) const;  // -1 off the cells
    QString describe(int index) const;     // the tooltip text
    void paint(QPainter& p, const QRect& area) const;
    // Rings drawn over the cells a lesson step points at (widgets/highlight.h).
    void setHighlight(const Highlight& h);
    const Highlight& highlight() const { return m_highlight; }
    // The token marked as under the mouse (here or in another column), -1 for none.
    void setHoverToken(int index);
    int hoverToken() const { return m_hover; }

    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    QSize sizeHint() const override;

Q_SIGNALS:
    void tokenHovered(int index);  // -1 when the mouse leaves the cells
    void tokenClicked(int index);  // a left click on a cell (a lesson's pick)

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mouseReleaseEvent(QMouseEvent* e) override;
    void leaveEvent(QEvent* e) override;

private:
    int pitchFor(int width) const;
    int columnsFor(int width) const;
    QRect cellRectIn(const QRect& area, int index) const;
    const HeadTrace* head() const;

    std::shared_ptr<const Trace> m_trace;
    int m_policy = 0;
    int64_t m_layer = 0, m_kvHead = 0;
    Highlight m_highlight;
    int m_hover = -1;
};

}  // namespace kvlens::ui
