#pragma once
// Colours shared by every view: the token-status palette (Okabe–Ito, safe
// for the common colour-vision deficiencies), per-policy series colours, and
// the attention colour map with its linear / log / power scales.
#include <QColor>
#include <QString>
#include <QVector>
#include <string>
#include <vector>

#include "core/run/trace.h"

namespace kvlens::ui {

QColor statusColour(TokenStatus s);
QString statusText(TokenStatus s);  // "kept by score", "evicted", ...
// A policy's colour, by its label: given on first sight and kept for the
// whole session (removing or adding another policy changes nothing), from
// hues none of the token-status colours uses. The full cache is dark grey.
QColor policyColour(const std::string& label);
QColor fullCacheColour();
// Run `run` of a Trace (run 0 is the full cache).
QColor runColour(const Trace& trace, size_t run);
// The hues policyColour() gives out, in order.
const std::vector<QColor>& policyPalette();

// Attention cells that are not in a query's cache: evicted keys (NaN in an
// AttentionMap at k <= q) get their own colour, distinct from every colour of
// the map; keys after the query (not seen yet) are background.
QColor evictedColour();
QColor futureColour();
QColor selectionColour();

enum class ColourScale { Linear, Log, Power };
QString colourScaleName(ColourScale s);           // "linear", "log", "power"
ColourScale colourScaleFromName(const QString& name);  // unknown names read as linear

struct ColourRange {
    float lo = 0, hi = 1;
};

// Maps v to [0, 1] under the scale (clamped). Log uses a floor of hi·1e-4 so
// that exact zeros stay finite; power uses γ = 0.5 (stretches small weights).
double normalise(float v, ColourRange range, ColourScale scale);

// 256-entry viridis table built from its published colour stops
// (QCustomPlot 2.1 has no viridis preset).
const QVector<QRgb>& viridisTable();
QRgb viridis(double t);  // t in [0, 1]

}  // namespace kvlens::ui
