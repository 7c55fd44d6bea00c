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

}  // namespace kvlens::ui
