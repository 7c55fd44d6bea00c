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
#include <vector>

#include "core/sweep/sweep.h"

namespace kvlens::ui {

QSizeF fidelityFigureSize();
// NaN points are left out (a line breaks there), never drawn as a number.
void paintFidelityFigure(QPainter& p, const QRectF& area, const std::vector<sweep::FidelityCurve>& curves,
                         const QString& title);

}  // namespace kvlens::ui
