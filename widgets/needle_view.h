#pragma once
// The needle view: one context × depth heatmap per policy and budget (full
// first), each cell the share of probes answered exactly (or the mean word
// overlap), so you see where in a long context each policy loses the needle.
#include <QWidget>
#include <memory>
#include <string>
#include <vector>

#include "core/study/needle_grid.h"

namespace kvlens::ui {

class NeedleView : public QWidget {
    Q_OBJECT
public:
    enum class Metric { Exact, Overlap };
    explicit NeedleView(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const eval::NeedleGridResult> result);
    const std::shared_ptr<const eval::NeedleGridResult>& result() const { return m_result; }
    void setMetric(Metric metric);
    int panelCount() const { return static_cast<int>(m_panels.size()); }
    QString panelTitle(int panel) const;
    // A cell of a panel in widget coordinates (row: context, column: depth).
    QRect cellRect(int panel, int row, int column) const;
    void paint(QPainter& p, const QRect& area) const;
    QSize sizeHint() const override { return {360, 300}; }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    struct Panel {
        std::string policy, budget;
        std::vector<const eval::NeedleCell*> cells;  // [row × columns + column], null where missing
    };
    void group();
    QRect panelRect(const QRect& area, int panel) const;
    QRect cellRectIn(const QRect& panelArea, int row, int column) const;
    double value(const eval::NeedleCell& c) const;

    std::shared_ptr<const eval::NeedleGridResult> m_result;
    std::vector<int64_t> m_contexts;
    std::vector<double> m_depths;
    std::vector<Panel> m_panels;
    Metric m_metric = Metric::Exact;
};

// The grid as a figure (PNG/SVG/PDF by the file's extension, figure.h's
// writeFigure): every panel of `view` (four a row) under "<model> · needle
// retrieval: context × depth". The GUI's Export needle grid and
// `kvlens-cli needle --figure` both write it. Empty on success, else why not.
QString writeNeedleFigure(const QString& file, const NeedleView& view, double scale, const QString& modelName);

}  // namespace kvlens::ui
