#include "widgets/fidelity_figure.h"

#include <QFont>
#include <QFontMetricsF>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

constexpr double kPanelW = 220, kPanelH = 170, kTitleH = 24, kLegendH = 18;

struct Panel {
    QString name;
    std::vector<double> sweep::FidelityCurve::*values;
    bool unitRange;  // [0, 1]
};

void paintPanel(QPainter& p, const QRectF& box, const Panel& panel, const std::vector<sweep::FidelityCurve>& curves) {
    const QFont small(QStringLiteral("DejaVu Sans"), 7);
    p.setFont(small);
    const QFontMetricsF fm(small);
    const QRectF plot = box.adjusted(36, 16, -8, -28);
    double x0 = 0, x1 = 100, y0 = 0, y1 = 1;
    if (!panel.unitRange) {
        y1 = 0;
        for (const auto& c : curves)
            for (double v : c.*panel.values)
                if (std::isfinite(v)) y1 = std::max(y1, v);
        // Four gridlines at a round step (1, 2, 2.5 or 5 times a power of ten).
        double step = y1 > 0 ? y1 / 4 : 0.25;
        const double ten = std::pow(10.0, std::floor(std::log10(step)));
        for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
            if (m * ten >= step * (1 - 1e-9)) {
                step = m * ten;
                break;
            }
        y1 = 4 * step;
    }
    auto X = [&](double x) { return plot.left() + (x - x0) / (x1 - x0) * plot.width(); };
    auto Y = [&](double y) { return plot.bottom() - (y - y0) / (y1 - y0) * plot.height(); };
    p.setPen(Qt::black);
    p.drawText(QRectF(box.left(), box.top(), box.width(), 14), Qt::AlignHCenter | Qt::AlignVCenter, panel.name);
    p.setPen(QPen(QColor(220, 220, 220), 0.5));
    for (int i = 0; i <= 4; ++i) {
        const double yv = y0 + (y1 - y0) * i / 4, xv = x0 + (x1 - x0) * i / 4;
        p.drawLine(QPointF(plot.left(), Y(yv)), QPointF(plot.right(), Y(yv)));
        p.drawLine(QPointF(X(xv), plot.top()), QPointF(X(xv), plot.bottom()));
    }
    p.setPen(QPen(Qt::black, 0.8));
    p.drawRect(plot);
    for (int i = 0; i <= 4; ++i) {
        const double yv = y0 + (y1 - y0) * i / 4, xv = x0 + (x1 - x0) * i / 4;
        const QString ys = QString::number(yv, 'g', 3), xs = QString::number(xv, 'g', 3) + QStringLiteral("%");
        p.drawText(QRectF(box.left(), Y(yv) - 6, 32, 12), Qt::AlignRight | Qt::AlignVCenter, ys);
        p.drawText(QRectF(X(xv) - 20, plot.bottom() + 2, 40, 12), Qt::AlignHCenter | Qt::AlignTop, xs);
    }
    p.drawText(QRectF(plot.left(), plot.bottom() + 13, plot.width(), 12), Qt::AlignHCenter | Qt::AlignTop,
               QStringLiteral("budget (% of the prompt)"));
    p.save();
    p.setClipRect(plot.adjusted(-3, -3, 3, 3));
    for (const auto& c : curves) {
        const QColor colour = policyColour(c.policy);
        const auto& ys = c.*panel.values;
        QPainterPath path;
        bool open = false;
        p.setPen(Qt::NoPen);
        p.setBrush(colour);
        for (size_t i = 0; i < c.x.size() && i < ys.size(); ++i) {
            if (!std::isfinite(ys[i]) || !std::isfinite(c.x[i])) {
                open = false;  // a gap, not a number made of NaN
                continue;
            }
            const QPointF pt(X(c.x[i]), Y(ys[i]));
            if (open) path.lineTo(pt);
            else path.moveTo(pt);
            open = true;
            p.drawEllipse(pt, 1.8, 1.8);
        }
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(colour, 1.4));
        p.drawPath(path);
    }
    p.restore();
}

}  // namespace

namespace {
double titleHeight(int columns) { return columns == 1 ? 2.5 * kTitleH : kTitleH; }
}  // namespace

QSizeF fidelityFigureSize(int columns) {
    const int rows = columns == 1 ? 3 : 1;
    return {(columns == 1 ? 1 : 3) * kPanelW + 16, titleHeight(columns) + rows * kPanelH + 2 * kLegendH + 8};
}

void paintFidelityFigure(QPainter& p, const QRectF& a, const std::vector<sweep::FidelityCurve>& curves,
                         const QString& title, int columns) {
    const bool column = columns == 1;
    p.fillRect(a, Qt::white);
    p.setRenderHint(QPainter::Antialiasing, true);
    QFont bold(QStringLiteral("DejaVu Sans"), 9);
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(Qt::black);
    const QString what = QStringLiteral("fidelity against budget (teacher-forced, mean over contexts and seeds)");
    if (column) {  // the title, then what is shown on a line of its own
        p.drawText(QRectF(a.left() + 6, a.top(), a.width() - 12, kTitleH), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetricsF(bold).elidedText(title, Qt::ElideRight, a.width() - 12));
        p.setFont(QFont(QStringLiteral("DejaVu Sans"), 7));
        p.drawText(QRectF(a.left() + 6, a.top() + kTitleH - 4, a.width() - 12, 1.5 * kTitleH),
                   Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, what);
    } else {
        p.drawText(QRectF(a.left() + 6, a.top(), a.width() - 12, kTitleH), Qt::AlignLeft | Qt::AlignVCenter,
                   title + QStringLiteral(" · ") + what);
    }
    const Panel panels[] = {{QStringLiteral("mean KL to the full cache (nats)"), &sweep::FidelityCurve::kl, false},
                            {QStringLiteral("top-1 agreement"), &sweep::FidelityCurve::top1, true},
                            {QStringLiteral("retained attention mass"), &sweep::FidelityCurve::retainedMass, true}};
    const double top = a.top() + titleHeight(columns);
    for (int i = 0; i < 3; ++i)
        paintPanel(p,
                   column ? QRectF(a.left() + 8, top + i * kPanelH, kPanelW, kPanelH)
                          : QRectF(a.left() + 8 + i * kPanelW, top, kPanelW, kPanelH),
                   panels[i], curves);
    // Legend: one swatch per policy.
    const QFont small(QStringLiteral("DejaVu Sans"), 7);
    p.setFont(small);
    const QFontMetricsF fm(small);
    double x = a.left() + 44;
    double y = top + (column ? 3 : 1) * kPanelH + 4;
    for (const auto& c : curves) {
        const QString name = QString::fromStdString(c.policy);
        if (x + 28 + fm.horizontalAdvance(name) > a.right() && x > a.left() + 44) {  // wrap the legend
            x = a.left() + 44;
            y += kLegendH;
        }
        p.setPen(QPen(policyColour(c.policy), 2));
        p.drawLine(QPointF(x, y + 6), QPointF(x + 14, y + 6));
        p.setPen(Qt::black);
        p.drawText(QPointF(x + 18, y + 9), name);
        x += 28 + fm.horizontalAdvance(name);
    }
}

FidelityView::FidelityView(QWidget* parent) : QWidget(parent) { setMinimumHeight(120); }

void FidelityView::setCurves(std::vector<sweep::FidelityCurve> curves, const QString& title) {
    m_curves = std::move(curves);
    m_title = title;
    update();
}

QSize FidelityView::sizeHint() const { return fidelityFigureSize(1).toSize(); }

void FidelityView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (m_curves.empty()) {
        p.setPen(palette().text().color());
        p.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("No fidelity results: open a sweep (File → Open Sweep…) or run one with the fidelity task."));
        return;
    }
    // The figure in points, scaled to the widget, aspect kept.
    // Whichever layout the widget shows larger.
    auto fit = [this](const QSizeF& s) { return std::min(width() / s.width(), height() / s.height()); };
    const int columns = fit(fidelityFigureSize(3)) >= fit(fidelityFigureSize(1)) ? 3 : 1;
    const QSizeF size = fidelityFigureSize(columns);
    const double k = fit(size);
    p.translate((width() - size.width() * k) / 2, (height() - size.height() * k) / 2);
    p.scale(k, k);
    paintFidelityFigure(p, QRectF(QPointF(0, 0), size), m_curves, m_title, columns);
}

}  // namespace kvlens::ui
