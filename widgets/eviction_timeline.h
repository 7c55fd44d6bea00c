#pragma once
// The eviction timeline: tokens (x) × decode steps (y) raster of one
// policy's token status in one layer × KV head, so you see when each token
// left the cache. Click a row to show that step.
#include <QImage>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/run/trace.h"

namespace kvlens::ui {

class EvictionTimeline : public QWidget {
    Q_OBJECT
public:
    explicit EvictionTimeline(QWidget* parent = nullptr);

    void setHistory(std::vector<std::shared_ptr<const Trace>> history);
    void setSelection(int policy, int64_t layer, int64_t kvHead);
    void setCurrentStep(int step);
    int policy() const { return m_policy; }
    // The raster, one pixel per token and step (tests sample it).
    const QImage& raster() const { return m_raster; }
    void paint(QPainter& p, const QRect& area) const;
    QSize sizeHint() const override { return {600, 120}; }

Q_SIGNALS:
    void stepSelected(int step);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;

private:
    void rebuild();
    QRect plotIn(const QRect& area) const;

    std::vector<std::shared_ptr<const Trace>> m_history;
    int m_policy = 1;
    int64_t m_layer = 0, m_kvHead = 0;
    int m_step = 0;
    QImage m_raster;
};

}  // namespace kvlens::ui
