#include "widgets/status_legend.h"

#include <QPainter>

#include "core/run/trace.h"
#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

const TokenStatus kShown[] = {TokenStatus::Sink, TokenStatus::Window, TokenStatus::Score,
                              TokenStatus::Held, TokenStatus::Evicted, TokenStatus::Unseen};

}  // namespace

StatusLegend::StatusLegend(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

QSize StatusLegend::sizeHint() const { return {600, fontMetrics().height() + 6}; }

void StatusLegend::paint(QPainter& p, const QRect& area) const {
    p.save();
    const QFontMetrics fm = p.fontMetrics();
    int x = area.left() + 4;
    const int box = fm.height() - 4, y = area.top() + (area.height() - box) / 2;
    auto item = [&](const QColor& c, const QString& text) {
        p.fillRect(QRect(x, y, box, box), c);
        x += box + 4;
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(x, area.top(), fm.horizontalAdvance(text) + 2, area.height()), Qt::AlignVCenter, text);
        x += fm.horizontalAdvance(text) + 14;
    };
    for (TokenStatus s : kShown) item(statusColour(s), statusText(s));
    item(evictedColour(), QStringLiteral("evicted key (map)"));
    p.restore();
}

void StatusLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

}  // namespace kvlens::ui
