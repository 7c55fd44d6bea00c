#include "widgets/highlight.h"

#include <QPainter>
#include <algorithm>

namespace kvlens::ui {

bool Highlight::hasToken(int64_t position) const {
    return std::find(tokens.begin(), tokens.end(), position) != tokens.end();
}

bool Highlight::hasHead(int64_t head) const { return std::find(heads.begin(), heads.end(), head) != heads.end(); }

void drawHighlightRing(QPainter& p, const QRectF& r) {
    p.save();
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(Qt::black, 3));
    p.drawRect(r.adjusted(-1.5, -1.5, 1.5, 1.5));
    p.setPen(QPen(Qt::white, 1));
    p.drawRect(r);
    p.restore();
}

namespace {
const QColor kHoverColour(0xF0, 0xE4, 0x42);  // Okabe-Ito yellow: no token status uses it
}  // namespace

void drawHoverFrame(QPainter& p, const QRectF& r) {
    p.save();
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(Qt::black, 4));
    p.drawRect(r.adjusted(-2, -2, 2, 2));
    p.setPen(QPen(kHoverColour, 2));
    p.drawRect(r.adjusted(-2, -2, 2, 2));
    p.restore();
}

void drawHoverLine(QPainter& p, const QPointF& from, const QPointF& to) {
    p.save();
    p.setPen(QPen(Qt::black, 3));
    p.drawLine(from, to);
    p.setPen(QPen(kHoverColour, 1));
    p.drawLine(from, to);
    p.restore();
}

}  // namespace kvlens::ui
