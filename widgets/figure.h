#pragma once
// Publication figures of a Trace — the one rendering path behind every
// export (the GUI's File menu and `kvlens-cli export`): an attention heatmap
// with token axes, a colour bar naming its scale and a title naming model,
// policy, budget, layer/head and step; the token statuses of every policy;
// and a grid of heatmap panels ("export all").
//
// Everything is painted in points (1/72 in) onto any QPainter, so a PNG (at a
// scale), an SVG and a PDF show the same figure. Needs a QGuiApplication, no
// widgets: kvlens-cli renders these on the offscreen platform.
#include <QPainter>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <functional>
#include <memory>
#include <vector>

#include "core/run/trace.h"
#include "widgets/palette.h"

namespace kvlens::ui {

struct FigureView {
    std::shared_ptr<const Trace> trace;
    int policy = 0;                  // index into trace->policies (0 = full)
    int64_t layer = 0, head = 0;     // query head (the captured attention map's)
    ColourScale scale = ColourScale::Power;
    QString model;                   // model name for the title
};

// "kvlens-tiny · snapkv:window=16 · budget 32 · layer 2 · head 5 · step 4"
QString figureTitle(const FigureView& v);
// One colour range for every map of these views' traces, so the same colour
// means the same weight across policies and panels (as in the GUI).
ColourRange figureRange(const std::vector<FigureView>& views);

// The attention heatmap of v's policy: title, token labels on both axes
// (rotated on the key axis, every k-th one when dense), evicted keys in the
// NaN colour with a hatch, colour bar.
QSizeF attentionFigureSize(const FigureView& v);
void paintAttentionFigure(QPainter& p, const QRectF& area, const FigureView& v);

// Every policy's token statuses in v's layer and the KV head of v's query head.
QSizeF statusFigureSize(const FigureView& v);
void paintStatusFigure(QPainter& p, const QRectF& area, const FigureView& v);

// Attention panels in a grid (`columns` ≤ 0: about square) under one title,
// one shared colour range and colour bar.
QSizeF gridFigureSize(int panels, int columns);
void paintGridFigure(QPainter& p, const QRectF& area, const std::vector<FigureView>& panels, int columns,
                     const QString& title);

using FigurePainter = std::function<void(QPainter&, const QRectF&)>;
// The size of a figure's axis and tick text; titles and captions keep their
// proportion to it.
constexpr double kFigureTextPt = 6.5;
// `paint` with its text at textPt instead of kFigureTextPt: the figure is laid
// out in an area scaled by kFigureTextPt / textPt and drawn scaled back, so
// the output keeps its size and larger text leaves less room to the map.
FigurePainter withTextSize(FigurePainter paint, double textPt);
// Writes FILE.png (size × scale pixels, 72·scale dpi), FILE.svg or FILE.pdf
// (vector, size in points) by the suffix, through saveThrough() (a temporary
// file renamed into place: a failed write leaves the old file as it was).
// Returns an empty string on success, otherwise one sentence saying why not
// ("cannot write FILE: No space left on device").
QString writeFigure(const QString& file, const QSizeF& size, double scale, const FigurePainter& paint,
                    const QString& title = {});
bool isFigureFile(const QString& file);  // .png, .svg or .pdf

}  // namespace kvlens::ui
