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
// Policy colours follow a run's identity, a colour slot: the policy list
// gives each policy a slot when it is added (the lowest free one) and keeps
// it through parameter edits, question modes, and save and reopen
// (setPolicySlots). Slot k's colour is the k-th (mod 8) of a palette safe for
// the common colour-vision deficiencies, in a shade readable as text on the
// theme in use (light or dark). The full cache is near black, or near white
// on the dark theme.
QColor slotColour(int slot);
// The policy list as it stands: its labels and their slots, in order.
void setPolicySlots(const std::vector<std::string>& labels, const std::vector<int>& slots);
// A label's slot: the one the list gave it, else one given on first sight.
int policySlot(const std::string& label);
QColor policyColour(const std::string& label);
QColor fullCacheColour();
// Run `run` of a Trace (run 0 is the full cache): by position when the trace
// has the list's runs (a question-aware run's label is not the list's), else
// by label.
QColor runColour(const Trace& trace, size_t run);
// The palette's shades for the theme in use, or for light / dark backgrounds.
const std::vector<QColor>& policyPalette();
const std::vector<QColor>& policyPalette(bool dark);
// A series colour as it prints on white paper: a dark-theme shade becomes
// its slot's light shade (and the full cache's near white near black).
QColor paperColour(const QColor& colour);

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
