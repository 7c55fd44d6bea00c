#pragma once
// What a lesson step points at, drawn over the comparison view's panels:
// tokens (ringed in every token strip), query heads of the shown layer
// (ringed in every layers × heads grid) and a query × key region (framed on
// every attention heatmap). A ring is black outside and white inside, so it
// reads over every colour of the maps, in either theme.
#include <QRect>
#include <QRectF>
#include <cstdint>
#include <optional>
#include <vector>

class QPainter;

namespace kvlens::ui {

struct Highlight {
    std::vector<int64_t> tokens;  // positions
    std::vector<int64_t> heads;   // query heads of the shown layer
    // Cells, inclusive: x keys, y queries.
    std::optional<QRect> region;
    bool empty() const { return tokens.empty() && heads.empty() && !region; }
    bool hasToken(int64_t position) const;
    bool hasHead(int64_t head) const;
};

void drawHighlightRing(QPainter& p, const QRectF& r);

// The token under the mouse, marked in every column at once: a yellow frame
// with a black edge round a token strip's cell (not a lesson's black and
// white ring), and thin yellow-on-black lines across a heatmap's key column
// and query row.
void drawHoverFrame(QPainter& p, const QRectF& r);
void drawHoverLine(QPainter& p, const QPointF& from, const QPointF& to);

}  // namespace kvlens::ui
