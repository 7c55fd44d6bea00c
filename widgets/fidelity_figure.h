#pragma once
// A merged sweep's fidelity against budget (`kvlens-cli sweep merge`): three
// panels — mean KL to the full cache, top-1 agreement, retained attention
// mass — with the budget as a share of the prompt on x and one line per
// policy in its GUI colour. Painted in points onto any QPainter, written
// through writeFigure() (widgets/figure.h).
#include <QPainter>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <QWidget>
#include <vector>

#include "core/sweep/sweep.h"

namespace kvlens::ui {

// `columns`: 3 panels side by side (the exported figure) or 1 above each
// other (a narrow dock).
QSizeF fidelityFigureSize(int columns = 3);
// NaN points are left out (a line breaks there), never drawn as a number.
void paintFidelityFigure(QPainter& p, const QRectF& area, const std::vector<sweep::FidelityCurve>& curves,
                         const QString& title, int columns = 3);

// The same figure as a widget (the Sweep dock), scaled to fit, its panels in
// a row or a column, whichever fits the widget's shape; a note when there
// are no curves.
class FidelityView : public QWidget {
public:
    explicit FidelityView(QWidget* parent = nullptr);
    void setCurves(std::vector<sweep::FidelityCurve> curves, const QString& title);
    const std::vector<sweep::FidelityCurve>& curves() const { return m_curves; }
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;

private:
    std::vector<sweep::FidelityCurve> m_curves;
    QString m_title;
};

}  // namespace kvlens::ui
