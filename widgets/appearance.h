#pragma once
// Zoom and theme for the whole application (View → Zoom in / Zoom out /
// Actual size, Dark theme): the text size as a percentage of the style's own
// and a light or dark palette. Widgets that paint themselves take their font
// and colours from font() and palette(), so they follow; QCustomPlot copies
// fonts and colours when a plot is made, so every plot is restyled here
// (fonts, axes, grid, legend, background) — stylePlot() is also what a panel
// calls on a plot it makes, so a new plot starts in the current appearance.
#include <QPalette>
#include <QBrush>
#include <QPen>
#include <utility>
#include <vector>

class QCustomPlot;

namespace kvlens::ui {

struct Appearance {
    int zoom = 100;     // percent of the style's default text size
    bool dark = false;  // the Fusion style with a dark palette; light: the style's own palette
    // Presenter mode, for a projector at the back of a room: text at 1.5 ×
    // the zoom, series lines twice as thick, and a high-contrast palette
    // (black on white, Fusion style) whatever `dark` says.
    bool presenter = false;
};
inline constexpr double kPresenterTextScale = 1.5, kPresenterLineScale = 2.0;

inline constexpr int kMinZoom = 50, kMaxZoom = 200;
// The next zoom step from `zoom` in `direction` (+1 / -1): 50, 67, 75, 80,
// 90, 100, 110, 125, 150, 175, 200; the limits stay put.
int nextZoom(int zoom, int direction);

// Applies `a` to the application and every top-level widget's plots.
void applyAppearance(const Appearance& a);
const Appearance& currentAppearance();
QPalette darkPalette();
QPalette highContrastPalette();
// The pen of a plotted series (a curve, a bar outline): `width` times the
// current line scale (2 in presenter mode). applyAppearance rescales the
// series already plotted, so panels make their pens through this.
QPen seriesPen(const QColor& colour, double width, Qt::PenStyle style = Qt::SolidLine);

// A plot in the application's current appearance: tick labels, axis labels
// and the legend at 80 % of the font (bold title), axis, tick, grid and text
// colours and the background from the palette.
void stylePlot(QCustomPlot* plot);

// Moves the plot's legend from inside its axes to a row under them (names
// `perRow` a row), so that it never covers a curve or a tick; false when
// the legend was not inside the axes.
bool legendBelowAxes(QCustomPlot* plot, int perRow);

// While it lives, a plot is in the light theme at 100 % (an exported figure
// goes on white paper at its own size, whatever the screen shows): its
// series in their light shades (paperColour), and a legend drawn inside the
// axes moved under them, so that it never covers data. Restyled back when
// it goes.
class PaperStyle {
public:
    explicit PaperStyle(QCustomPlot* plot);
    ~PaperStyle();
    PaperStyle(const PaperStyle&) = delete;
    PaperStyle& operator=(const PaperStyle&) = delete;

private:
    QCustomPlot* m_plot;
    std::vector<std::pair<QPen, QBrush>> m_series;  // each plottable's own, restored
    bool m_legendMoved = false;
    Qt::Alignment m_legendAlignment;
    int m_legendWrap = 0;
    int m_legendFill = 0;  // QCPLayoutGrid::FillOrder, restored with the wrap
};

}  // namespace kvlens::ui
