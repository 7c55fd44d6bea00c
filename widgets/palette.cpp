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

namespace {

// One hue per colour slot, in two shades: for light backgrounds (the light
// theme, presenter mode, paper) and for the dark theme. Each shade has at
// least 4.5:1 contrast (WCAG) with its theme's window and base colours, and
// any two slots differ by ΔE ≥ 9 (CIE Lab) under normal vision and under
// simulated protanopia, deuteranopia and tritanopia (Machado et al. 2009),
// in both shades. Found by a max-min search over OKLab hues at fixed
// contrast; tests/gui/appearance_test checks both claims.
struct Shades {
    QColor light, dark;
};
const std::vector<Shades>& slotShades() {
    static const std::vector<Shades> shades{
        {QColor(0x7A, 0x4F, 0xB8), QColor(0xB1, 0x87, 0xF5)},  // violet
        {QColor(0xB5, 0x39, 0x4D), QColor(0xF5, 0x73, 0x82)},  // red
        {QColor(0x18, 0x70, 0x7D), QColor(0x58, 0xA7, 0xB5)},  // teal
        {QColor(0x99, 0x55, 0x04), QColor(0xD5, 0x8C, 0x4B)},  // amber brown
        {QColor(0x20, 0x51, 0x2D), QColor(0x9E, 0xD2, 0xA8)},  // green
        {QColor(0x6E, 0x2F, 0x6A), QColor(0xF7, 0xAE, 0xF0)},  // plum
        {QColor(0x6C, 0x68, 0x2D), QColor(0xA2, 0x9E, 0x63)},  // olive
        {QColor(0x63, 0x61, 0x94), QColor(0x98, 0x97, 0xCE)},  // slate
    };
    return shades;
}

bool darkTheme() { return QApplication::palette().color(QPalette::Base).lightness() < 128; }

// Label -> colour slot: what PolicyList gave each run (setPolicySlots), and
// labels first seen elsewhere (a sweep's figure) after them. GUI thread only.
std::map<std::string, int>& slotsByLabel() {
    static std::map<std::string, int> given;
    return given;
}
std::vector<int>& runSlots() {
    static std::vector<int> slots;
    return slots;
}

}  // namespace

const std::vector<QColor>& policyPalette(bool dark) {
    static const auto pick = [](bool d) {
        std::vector<QColor> out;
        for (const Shades& s : slotShades()) out.push_back(d ? s.dark : s.light);
        return out;
    };
    static const std::vector<QColor> light = pick(false), darkShades = pick(true);
    return dark ? darkShades : light;
}

const std::vector<QColor>& policyPalette() { return policyPalette(darkTheme()); }

QColor slotColour(int slot) {
    const auto& palette = policyPalette();
    return palette[static_cast<size_t>(std::max(slot, 0)) % palette.size()];
}

QColor paperColour(const QColor& c) {
    const auto& shades = slotShades();
    for (const Shades& s : shades)
        if (c.rgb() == s.dark.rgb()) return s.light;
    if (c.rgb() == QColor(0xE0, 0xE0, 0xE0).rgb()) return QColor(0x20, 0x20, 0x20);  // the full cache's
    return c;
}

// Near black on a light palette, near white on a dark one (View → Dark theme).
QColor fullCacheColour() { return darkTheme() ? QColor(0xE0, 0xE0, 0xE0) : QColor(0x20, 0x20, 0x20); }

void setPolicySlots(const std::vector<std::string>& labels, const std::vector<int>& slots) {
    runSlots() = slots;
    for (size_t i = 0; i < labels.size() && i < slots.size(); ++i) slotsByLabel()[labels[i]] = slots[i];
}

int policySlot(const std::string& label) {
    auto& given = slotsByLabel();
    if (const auto it = given.find(label); it != given.end()) return it->second;
    int next = 0;
    for (const auto& [l, slot] : given) next = std::max(next, slot + 1);
    return given[label] = next;
}

QColor policyColour(const std::string& label) { return slotColour(policySlot(label)); }

QColor runColour(const Trace& trace, size_t run) {
    if (run == 0 || run >= trace.policies.size()) return fullCacheColour();
    // The runs of the policy list as it is: by position (a question-aware
    // run's label differs from the list's); a trace of another list: by label.
    const auto& slots = runSlots();
    if (slots.size() + 1 == trace.policies.size()) return slotColour(slots[run - 1]);
    return policyColour(trace.policies[run].label);
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
