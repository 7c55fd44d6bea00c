#include "widgets/palette.h"

#include <QApplication>
#include <QPalette>

#include <algorithm>
#include <cmath>
#include <map>

namespace kvlens::ui {

QColor statusColour(TokenStatus s) {
    switch (s) {
        case TokenStatus::Unseen: return QColor(0xE4, 0xE4, 0xE4);
        case TokenStatus::Held: return QColor(0x00, 0x72, 0xB2);     // blue
        case TokenStatus::Score: return QColor(0x00, 0x9E, 0x73);    // bluish green
        case TokenStatus::Sink: return QColor(0xCC, 0x79, 0xA7);     // reddish purple
        case TokenStatus::Window: return QColor(0x56, 0xB4, 0xE9);   // sky blue
        case TokenStatus::Evicted: return QColor(0xD5, 0x5E, 0x00);  // vermillion
    }
    return Qt::black;
}

QString statusText(TokenStatus s) {
    switch (s) {
        case TokenStatus::Unseen: return QStringLiteral("not read");
        case TokenStatus::Held: return QStringLiteral("held");
        case TokenStatus::Score: return QStringLiteral("kept by score");
        case TokenStatus::Sink: return QStringLiteral("sink");
        case TokenStatus::Window: return QStringLiteral("window");
        case TokenStatus::Evicted: return QStringLiteral("evicted");
    }
    return QStringLiteral("?");
}

const std::vector<QColor>& policyPalette() {
    // Hues at least 70 (RGB distance) from each other, from the status
    // colours, the selection orange, the full cache's grey and white
    // (readable as text), chosen by greedy max-min distance.
    static const std::vector<QColor> colours{
        QColor(0x33, 0x22, 0x88),  // indigo
        QColor(0x99, 0x99, 0x33),  // olive
        QColor(0x88, 0x22, 0x55),  // wine
        QColor(0x1B, 0x78, 0x37),  // green
        QColor(0x80, 0x73, 0xAC),  // lavender
        QColor(0xE7, 0x29, 0x8A),  // magenta
        QColor(0x7F, 0x3B, 0x08),  // brown
        QColor(0x66, 0x66, 0x66),  // grey
    };
    return colours;
}

// Near black on a light palette, near white on a dark one (View → Dark theme).
QColor fullCacheColour() {
    return QApplication::palette().color(QPalette::Base).lightness() < 128 ? QColor(0xE0, 0xE0, 0xE0)
                                                                          : QColor(0x20, 0x20, 0x20);
}

QColor policyColour(const std::string& label) {
    static std::map<std::string, size_t> given;  // GUI thread only
    const auto it = given.emplace(label, given.size()).first;
    const auto& palette = policyPalette();
    return palette[it->second % palette.size()];
}

QColor runColour(const Trace& trace, size_t run) {
    return run == 0 || run >= trace.policies.size() ? fullCacheColour() : policyColour(trace.policies[run].label);
}

// A pinkish grey: viridis never passes through it, and it reads as "missing".
QColor evictedColour() { return QColor(0xC8, 0xA8, 0xB4); }
QColor futureColour() { return QColor(0xFA, 0xFA, 0xFA); }
QColor selectionColour() { return QColor(0xE6, 0x9F, 0x00); }

QString colourScaleName(ColourScale s) {
    switch (s) {
        case ColourScale::Linear: return QStringLiteral("linear");
        case ColourScale::Log: return QStringLiteral("log");
        case ColourScale::Power: return QStringLiteral("power");
    }
    return QStringLiteral("linear");
}

ColourScale colourScaleFromName(const QString& name) {
    if (name == QLatin1String("log")) return ColourScale::Log;
    if (name == QLatin1String("power")) return ColourScale::Power;
    return ColourScale::Linear;
}

double normalise(float v, ColourRange range, ColourScale scale) {
    const double hi = range.hi, lo = range.lo;
    double t = 0;
    if (scale == ColourScale::Log) {
        const double floor = std::max(hi * 1e-4, 1e-12);
        const double l0 = std::log(std::max(lo, floor)), l1 = std::log(std::max(hi, floor * 10));
        t = l1 > l0 ? (std::log(std::max<double>(v, floor)) - l0) / (l1 - l0) : 0.0;
    } else {
        t = hi > lo ? (v - lo) / (hi - lo) : 0.0;
        t = std::clamp(t, 0.0, 1.0);
        if (scale == ColourScale::Power) t = std::sqrt(t);
    }
    return std::clamp(t, 0.0, 1.0);
}

const QVector<QRgb>& viridisTable() {
    static const QVector<QRgb> table = [] {
        // Viridis at t = 0, 0.125, ..., 1 (matplotlib's _viridis_data).
        static const int stops[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                        {39, 173, 129}, {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
        QVector<QRgb> t(256);
        for (int i = 0; i < 256; ++i) {
            const double x = i / 255.0 * 8.0;
            const int a = std::min(7, static_cast<int>(x));
            const double f = x - a;
            auto mix = [&](int c) { return static_cast<int>(std::lround(stops[a][c] * (1 - f) + stops[a + 1][c] * f)); };
            t[i] = qRgb(mix(0), mix(1), mix(2));
        }
        return t;
    }();
    return table;
}

QRgb viridis(double t) {
    const int i = static_cast<int>(std::lround(std::clamp(t, 0.0, 1.0) * 255.0));
    return viridisTable()[i];
}

}  // namespace kvlens::ui
