#include "widgets/figure.h"

#include <QFileInfo>
#include <QFontMetricsF>
#include <QImage>
#include <QLinearGradient>
#include <QPaintEngine>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <algorithm>
#include <cmath>

#include "core/policy/policy_info.h"
#include "widgets/attention_lod.h"
#include "widgets/save_file.h"

namespace kvlens::ui {
namespace {

// Sizes in points.
constexpr double kTitlePt = 9, kLabelPt = kFigureTextPt, kTickPt = kFigureTextPt, kCaptionPt = 7;
constexpr double kTitleH = 22;
constexpr double kMapSide = 360;
constexpr double kMaxLabelW = 64;
constexpr double kCaptionW = 12;
constexpr double kBarGap = 8, kBarW = 10, kBarLabelW = 30, kBarNameW = 12;
constexpr double kBarArea = kBarGap + kBarW + kBarLabelW + kBarNameW;
constexpr double kPanelSide = 200, kPanelTitleH = 14, kPanelGap = 12;
constexpr double kStripW = 560, kStripRowH = 12, kStripRowGap = 5, kLegendH = 20;

QFont figureFont(double pt, bool bold = false) {
    // One family everywhere, so the GUI's and kvlens-cli's figures are the same pixels.
    QFont f(QStringLiteral("DejaVu Sans"));
    f.setPointSizeF(pt);
    f.setBold(bold);
    f.setHintingPreference(QFont::PreferNoHinting);
    return f;
}

// Text is laid out at 72 dpi (1 pt = 1 unit) whatever the target device.
QFontMetricsF metrics(const QFont& f) {
    static const QImage device = [] {
        QImage img(1, 1, QImage::Format_RGB32);
        img.setDotsPerMeterX(qRound(72 / 0.0254));
        img.setDotsPerMeterY(qRound(72 / 0.0254));
        return img;
    }();
    return QFontMetricsF(f, &device);
}

const AttentionMap* mapOf(const FigureView& v) {
    if (!v.trace || v.policy < 0 || v.policy >= static_cast<int>(v.trace->attention.size())) return nullptr;
    const AttentionMap& m = v.trace->attention[static_cast<size_t>(v.policy)];
    return m.size > 0 ? &m : nullptr;
}

const PolicyTrace* policyOf(const FigureView& v) {
    if (!v.trace || v.policy < 0 || v.policy >= static_cast<int>(v.trace->policies.size())) return nullptr;
    return &v.trace->policies[static_cast<size_t>(v.policy)];
}

int64_t kvHeadOf(const Trace& t, int64_t head) { return head / std::max<int64_t>(1, t.numHeads / std::max<int64_t>(1, t.numKvHeads)); }

QString axisLabel(const Trace& t, int64_t i) {
    QString s = i < static_cast<int64_t>(t.labels.size()) ? QString::fromStdString(t.labels[static_cast<size_t>(i)])
                                                          : QString::number(i);
    s.replace(QLatin1Char('\n'), QStringLiteral("\\n")).replace(QLatin1Char('\t'), QStringLiteral("\\t"));
    s.replace(QLatin1Char('\r'), QStringLiteral("\\r"));
    s = s.trimmed();
    if (s.isEmpty()) s = QStringLiteral("\u2423");  // a space token
    if (s.size() > 12) s = s.left(11) + QStringLiteral("\u2026");
    return s;
}

double labelWidth(const Trace* t, int64_t n) {
    if (!t) return 16;
    const QFontMetricsF fm = metrics(figureFont(kLabelPt));
    double w = 0;
    for (int64_t i = 0; i < n; ++i) w = std::max(w, fm.horizontalAdvance(axisLabel(*t, i)));
    return std::min(kMaxLabelW, std::ceil(w)) + 4;
}

int64_t tokenCount(const FigureView& v) {
    if (const AttentionMap* m = mapOf(v)) return m->size;
    return v.trace ? static_cast<int64_t>(v.trace->tokens.size()) : 0;
}

// The value a colour-bar position t stands for: the inverse of normalise().
double valueAt(double t, ColourRange r, ColourScale s) {
    if (s == ColourScale::Log) {
        const double floor = std::max(r.hi * 1e-4, 1e-12);
        const double l0 = std::log(std::max<double>(r.lo, floor)), l1 = std::log(std::max<double>(r.hi, floor * 10));
        return std::exp(l0 + t * (l1 - l0));
    }
    return r.lo + (s == ColourScale::Power ? t * t : t) * (r.hi - r.lo);
}

QString scaleCaption(ColourScale s) {
    switch (s) {
        case ColourScale::Linear: return QStringLiteral("attention weight (linear scale)");
        case ColourScale::Log: return QStringLiteral("attention weight (log scale)");
        case ColourScale::Power: return QStringLiteral("attention weight (power scale, \u03B3 = 0.5)");
    }
    return {};
}

void drawRotated(QPainter& p, const QPointF& at, double angle, const QRectF& box, int flags, const QString& text) {
    p.save();
    p.translate(at);
    p.rotate(angle);
    p.drawText(box, flags, text);
    p.restore();
}

// The map as one image at the device's resolution (raster) or 3 px per
// point (vector), so cells stay crisp and the evicted hatch is drawn in the
// image itself; no smoothing when it is placed.
void paintMap(QPainter& p, const QRectF& plot, const AttentionLod& lod, ColourRange range, ColourScale scale) {
    const QPaintEngine* engine = p.paintEngine();
    const bool raster = engine && (engine->type() == QPaintEngine::Raster);
    const double res = raster ? std::max(1.0, std::abs(p.deviceTransform().m11())) : 3.0;
    const int w = std::clamp(static_cast<int>(std::lround(plot.width() * res)), 1, 6000);
    const int h = std::clamp(static_cast<int>(std::lround(plot.height() * res)), 1, 6000);
    const int64_t n = lod.size();
    const int level = lod.levelFor(std::max(static_cast<double>(n) / w, static_cast<double>(n) / h));
    const int64_t s = int64_t{1} << level, nl = lod.levelSize(level);
    auto cellOf = [&](int px, int size) {
        const auto base = static_cast<int64_t>((px + 0.5) * static_cast<double>(n) / size);
        return std::clamp<int64_t>(base / s, 0, nl - 1);
    };
    std::vector<int64_t> cols(static_cast<size_t>(w));
    for (int x = 0; x < w; ++x) cols[static_cast<size_t>(x)] = cellOf(x, w);
    const QRgb evicted = evictedColour().rgb(), hatch = evictedColour().darker(125).rgb(),
               future = futureColour().rgb();
    const int hatchW = std::max(1, static_cast<int>(std::lround(res * 1.5)));
    QImage img(w, h, QImage::Format_RGB32);
    for (int y = 0; y < h; ++y) {
        const float* row = lod.row(level, cellOf(y, h));
        auto* dst = reinterpret_cast<QRgb*>(img.scanLine(y));
        for (int x = 0; x < w; ++x) {
            const float v = row[cols[static_cast<size_t>(x)]];
            dst[x] = AttentionLod::isEvicted(v)  ? (((x + y) / hatchW) % 4 == 0 ? hatch : evicted)
                     : AttentionLod::isFuture(v) ? future
                                                 : viridis(normalise(v, range, scale));
        }
    }
    p.save();
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(plot, img);
    p.restore();
}

void paintColourBar(QPainter& p, const QRectF& bar, ColourRange range, ColourScale scale) {
    QLinearGradient g(bar.bottomLeft(), bar.topLeft());
    for (int i = 0; i <= 32; ++i) g.setColorAt(i / 32.0, QColor(viridis(i / 32.0)));
    p.fillRect(bar, g);
    p.setPen(QPen(Qt::black, 0.5));
    p.setBrush(Qt::NoBrush);
    p.drawRect(bar);
    p.setFont(figureFont(kTickPt));
    for (int i = 0; i <= 4; ++i) {
        const double t = i / 4.0, y = bar.bottom() - t * bar.height();
        p.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 2.5, y));
        p.drawText(QRectF(bar.right() + 4, y - 5, kBarLabelW - 2, 10), Qt::AlignLeft | Qt::AlignVCenter,
                   QString::number(valueAt(t, range, scale), 'g', 2));
    }
    p.setFont(figureFont(kCaptionPt));
    drawRotated(p, QPointF(bar.right() + kBarLabelW + kBarNameW / 2, bar.center().y()), -90,
                QRectF(-bar.height(), -kBarNameW / 2, 2 * bar.height(), kBarNameW), Qt::AlignCenter, scaleCaption(scale));
}

// A swatch saying what the hatched colour means.
void paintEvictedKey(QPainter& p, const QPointF& at) {
    const QRectF swatch(at, QSizeF(8, 8));
    p.fillRect(swatch, evictedColour());
    p.setPen(QPen(evictedColour().darker(125), 1));
    p.drawLine(swatch.topLeft() + QPointF(0, 4), swatch.topLeft() + QPointF(4, 0));
    p.drawLine(swatch.bottomLeft(), swatch.topRight());
    p.setPen(QPen(Qt::black, 0.5));
    p.drawRect(swatch);
    p.setFont(figureFont(kTickPt));
    p.drawText(QRectF(at.x() + 11, at.y() - 1, 50, 10), Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("evicted"));
}

void paintAxisLabels(QPainter& p, const QRectF& plot, const Trace& t, int64_t n, double labelW) {
    const QFont font = figureFont(kLabelPt);
    const double lineH = kLabelPt * 1.3, cell = plot.width() / static_cast<double>(n);
    const int64_t every = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(lineH / cell)));
    p.setFont(font);
    p.setPen(Qt::black);
    for (int64_t i = 0; i < n; i += every) {
        const QString label = axisLabel(t, i);
        const double c = (static_cast<double>(i) + 0.5) * cell;
        p.drawText(QRectF(plot.left() - labelW - 2, plot.top() + c - lineH / 2, labelW, lineH),
                   Qt::AlignRight | Qt::AlignVCenter, label);
        drawRotated(p, QPointF(plot.left() + c, plot.bottom() + 3), -90, QRectF(-labelW, -lineH / 2, labelW, lineH),
                    Qt::AlignRight | Qt::AlignVCenter, label);
    }
    p.setFont(figureFont(kCaptionPt));
    const QString every_ = every > 1 ? QStringLiteral(" (labels every %1 tokens)").arg(every) : QString();
    drawRotated(p, QPointF(plot.left() - labelW - 2 - kCaptionW / 2, plot.center().y()), -90,
                QRectF(-plot.height() / 2, -kCaptionW / 2, plot.height(), kCaptionW), Qt::AlignCenter,
                QStringLiteral("query") + every_);
    p.drawText(QRectF(plot.left(), plot.bottom() + 3 + labelW, plot.width(), kCaptionW), Qt::AlignCenter,
               QStringLiteral("key") + every_);
}

// The prompt's end on both axes: decode steps read the tokens after it.
void paintPromptEnd(QPainter& p, const QRectF& plot, const Trace& t, int64_t n) {
    if (t.promptLength <= 0 || t.promptLength >= n) return;
    const double x = plot.left() + plot.width() * static_cast<double>(t.promptLength) / static_cast<double>(n);
    const double y = plot.top() + plot.height() * static_cast<double>(t.promptLength) / static_cast<double>(n);
    p.setPen(QPen(QColor(255, 255, 255, 200), 0.6, Qt::DashLine));
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
}

void drawTitle(QPainter& p, const QRectF& box, const QString& text, double pt, bool bold) {
    const QFont f = figureFont(pt, bold);
    p.setFont(f);
    p.setPen(Qt::black);
    p.drawText(box, Qt::AlignLeft | Qt::AlignVCenter, metrics(f).elidedText(text, Qt::ElideRight, box.width()));
}

// Map, frame, prompt end; or a note when nothing was captured.
void paintPanelMap(QPainter& p, const QRectF& plot, const FigureView& v, ColourRange range) {
    const AttentionMap* m = mapOf(v);
    if (!m) {
        p.setPen(Qt::black);
        p.setFont(figureFont(kCaptionPt));
        p.drawText(plot, Qt::AlignCenter | Qt::TextWordWrap, QStringLiteral("no attention captured"));
        return;
    }
    const AttentionLod lod(*m);
    paintMap(p, plot, lod, range, v.scale);
    paintPromptEnd(p, plot, *v.trace, m->size);
    p.setPen(QPen(Qt::black, 0.5));
    p.setBrush(Qt::NoBrush);
    p.drawRect(plot);
}

}  // namespace

QString figureTitle(const FigureView& v) {
    const PolicyTrace* pt = policyOf(v);
    const AttentionMap* m = mapOf(v);
    const int64_t layer = m ? m->layer : v.layer, head = m ? m->head : v.head;
    QStringList parts;
    if (!v.model.isEmpty()) parts << v.model;
    if (pt) {
        parts << QString::fromStdString(pt->label);
        if (isFullCache(pt->id))
            parts << QStringLiteral("full cache");
        else if (layer >= 0 && layer < static_cast<int64_t>(pt->layers.size()))
            parts << QStringLiteral("budget %1").arg(pt->layers[static_cast<size_t>(layer)].budget);
    }
    parts << QStringLiteral("layer %1 · head %2").arg(layer).arg(head);
    if (v.trace) parts << QStringLiteral("step %1").arg(v.trace->step);
    return parts.join(QStringLiteral(" · "));
}

ColourRange figureRange(const std::vector<FigureView>& views) {
    ColourRange range{0, 0};
    float minPositive = 1;
    const Trace* seen = nullptr;
    for (const FigureView& v : views) {
        if (!v.trace || v.trace.get() == seen) continue;
        seen = v.trace.get();
        for (const AttentionMap& m : v.trace->attention) {
            for (const AttentionMap::Row& row : m.rows) {
                if (!row) continue;
                for (float x : *row) {
                    if (std::isnan(x)) continue;
                    range.hi = std::max(range.hi, x);
                    if (x > 0) minPositive = std::min(minPositive, x);
                }
            }
        }
    }
    if (range.hi <= 0) range.hi = 1;
    range.lo = !views.empty() && views.front().scale == ColourScale::Log ? minPositive : 0.0f;
    return range;
}

QSizeF attentionFigureSize(const FigureView& v) {
    const double lw = labelWidth(v.trace.get(), tokenCount(v));
    return {std::ceil(kCaptionW + lw + 2 + kMapSide + kBarArea + 6), std::ceil(kTitleH + kMapSide + 3 + lw + kCaptionW + 4)};
}

void paintAttentionFigure(QPainter& p, const QRectF& area, const FigureView& v) {
    p.save();
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    p.fillRect(area, Qt::white);
    const int64_t n = tokenCount(v);
    const double lw = labelWidth(v.trace.get(), n);
    const double left = kCaptionW + lw + 2;
    const double side = std::max(40.0, std::min(area.width() - left - kBarArea - 6,
                                                area.height() - kTitleH - 3 - lw - kCaptionW - 4));
    const QRectF plot(area.left() + left, area.top() + kTitleH, side, side);
    drawTitle(p, QRectF(area.left() + 4, area.top(), area.width() - 8, kTitleH), figureTitle(v), kTitlePt, true);
    const ColourRange range = figureRange({v});
    paintPanelMap(p, plot, v, range);
    if (mapOf(v)) paintAxisLabels(p, plot, *v.trace, n, lw);
    paintColourBar(p, QRectF(plot.right() + kBarGap, plot.top(), kBarW, side), range, v.scale);
    paintEvictedKey(p, QPointF(plot.right() + kBarGap, plot.bottom() + 6));
    p.restore();
}

QSizeF statusFigureSize(const FigureView& v) {
    const int rows = v.trace ? static_cast<int>(v.trace->policies.size()) : 1;
    return {kStripW, std::ceil(kTitleH + rows * (kStripRowH + kStripRowGap) + kLegendH + 6)};
}

void paintStatusFigure(QPainter& p, const QRectF& area, const FigureView& v) {
    p.save();
    p.setRenderHint(QPainter::Antialiasing, false);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    p.fillRect(area, Qt::white);
    if (!v.trace) {
        p.restore();
        return;
    }
    const Trace& t = *v.trace;
    const int64_t kv = kvHeadOf(t, v.head);
    QString title = QStringLiteral("token status · layer %1 · KV head %2 (query head %3) · step %4")
                        .arg(v.layer).arg(kv).arg(v.head).arg(t.step);
    if (!v.model.isEmpty()) title = v.model + QStringLiteral(" · ") + title;
    drawTitle(p, QRectF(area.left() + 4, area.top(), area.width() - 8, kTitleH), title, kTitlePt, true);
    const QFont labelFont = figureFont(kCaptionPt);
    double lw = 0;
    for (const auto& pol : t.policies)
        lw = std::max(lw, metrics(labelFont).horizontalAdvance(QString::fromStdString(pol.label)));
    lw = std::min(140.0, std::ceil(lw)) + 8;
    const int64_t n = static_cast<int64_t>(t.tokens.size());
    const double x0 = area.left() + 4 + lw, cellsW = area.right() - 6 - x0;
    const double cell = cellsW / static_cast<double>(std::max<int64_t>(1, n));
    double y = area.top() + kTitleH;
    for (const auto& pol : t.policies) {
        p.setFont(labelFont);
        p.setPen(Qt::black);
        p.drawText(QRectF(area.left() + 4, y, lw - 6, kStripRowH), Qt::AlignRight | Qt::AlignVCenter,
                   metrics(labelFont).elidedText(QString::fromStdString(pol.label), Qt::ElideRight, lw - 6));
        const HeadTrace* h = v.layer < static_cast<int64_t>(pol.layers.size()) &&
                                     kv < static_cast<int64_t>(pol.layers[static_cast<size_t>(v.layer)].heads.size())
                                 ? &pol.layers[static_cast<size_t>(v.layer)].heads[static_cast<size_t>(kv)]
                                 : nullptr;
        for (int64_t i = 0; i < n; ++i) {
            const TokenStatus s = h && i < static_cast<int64_t>(h->status.size()) ? h->status[static_cast<size_t>(i)]
                                                                                 : TokenStatus::Unseen;
            // Wide cells get a hairline gap so neighbours stay distinguishable.
            const double a = x0 + cell * static_cast<double>(i), b = x0 + cell * static_cast<double>(i + 1);
            p.fillRect(QRectF(a, y, b - a + (cell > 3 ? -0.6 : 0), kStripRowH), statusColour(s));
        }
        y += kStripRowH + kStripRowGap;
    }
    if (t.promptLength > 0 && t.promptLength < n) {
        const double x = x0 + cell * static_cast<double>(t.promptLength);
        p.setPen(QPen(Qt::black, 0.8, Qt::DashLine));
        p.drawLine(QPointF(x, area.top() + kTitleH - 2), QPointF(x, y - kStripRowGap + 2));
    }
    // Legend: every status colour with its name.
    double x = area.left() + 4 + lw;
    p.setFont(figureFont(kTickPt));
    const QFontMetricsF fm = metrics(figureFont(kTickPt));
    for (TokenStatus s : {TokenStatus::Sink, TokenStatus::Window, TokenStatus::Score, TokenStatus::Held,
                          TokenStatus::Evicted, TokenStatus::Unseen}) {
        p.fillRect(QRectF(x, y + 4, 8, 8), statusColour(s));
        p.setPen(Qt::black);
        const QString text = statusText(s);
        p.drawText(QRectF(x + 11, y + 2, fm.horizontalAdvance(text) + 4, 12), Qt::AlignLeft | Qt::AlignVCenter, text);
        x += 11 + fm.horizontalAdvance(text) + 12;
    }
    p.restore();
}

namespace {
int gridColumns(int panels, int columns) {
    if (columns > 0) return std::min(columns, std::max(1, panels));
    return std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(std::max(1, panels))))));
}
}  // namespace

QSizeF gridFigureSize(int panels, int columns) {
    const int cols = gridColumns(panels, columns), rows = (std::max(1, panels) + cols - 1) / cols;
    return {std::ceil(6 + cols * (kPanelSide + kPanelGap) + kBarArea),
            std::ceil(kTitleH + rows * (kPanelTitleH + kPanelSide + kPanelGap) + 14)};
}

void paintGridFigure(QPainter& p, const QRectF& area, const std::vector<FigureView>& panels, int columns,
                     const QString& title) {
    p.save();
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    p.fillRect(area, Qt::white);
    drawTitle(p, QRectF(area.left() + 4, area.top(), area.width() - 8, kTitleH), title, kTitlePt, true);
    const int n = static_cast<int>(panels.size());
    const int cols = gridColumns(n, columns), rows = (std::max(1, n) + cols - 1) / cols;
    const double side = std::max(
        20.0, std::min((area.width() - 6 - kBarArea) / cols - kPanelGap,
                       (area.height() - kTitleH - 14) / rows - kPanelTitleH - kPanelGap));
    const ColourRange range = figureRange(panels);
    for (int i = 0; i < n; ++i) {
        const FigureView& v = panels[static_cast<size_t>(i)];
        const double x = area.left() + 6 + (i % cols) * (side + kPanelGap);
        const double y = area.top() + kTitleH + (i / cols) * (kPanelTitleH + side + kPanelGap);
        const PolicyTrace* pt = policyOf(v);
        const AttentionMap* m = mapOf(v);
        const QString label = QStringLiteral("%1 · L%2 H%3")
                                  .arg(pt ? QString::fromStdString(pt->label) : QStringLiteral("?"))
                                  .arg(m ? m->layer : v.layer)
                                  .arg(m ? m->head : v.head);
        drawTitle(p, QRectF(x, y, side, kPanelTitleH), label, kCaptionPt, false);
        paintPanelMap(p, QRectF(x, y + kPanelTitleH, side, side), v, range);
        if (m && m->size > 0) {  // the key axis's ends, in the gap under the panel
            p.setPen(Qt::black);
            p.setFont(figureFont(kTickPt));
            const QRectF ticks(x, y + kPanelTitleH + side, side, kPanelGap);
            p.drawText(ticks, Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("0"));
            p.drawText(ticks, Qt::AlignRight | Qt::AlignVCenter, QString::number(m->size - 1));
        }
    }
    // The axes of every panel, once.
    p.setPen(Qt::black);
    p.setFont(figureFont(kCaptionPt));
    p.drawText(QRectF(area.left() + 6, area.bottom() - 14, area.width() - 12, 14), Qt::AlignLeft | Qt::AlignVCenter,
               QStringLiteral("each panel: rows = query tokens (top to bottom), columns = key tokens 0 … N−1 (left to "
                              "right); evicted keys hatched"));
    const double barX = area.left() + 6 + cols * (side + kPanelGap);
    const double barH = std::min(rows * (kPanelTitleH + side + kPanelGap) - kPanelGap - kPanelTitleH, 300.0);
    paintColourBar(p, QRectF(barX, area.top() + kTitleH + kPanelTitleH, kBarW, barH), range,
                   panels.empty() ? ColourScale::Power : panels.front().scale);
    paintEvictedKey(p, QPointF(barX, area.top() + kTitleH + kPanelTitleH + barH + 8));
    p.restore();
}

FigurePainter withTextSize(FigurePainter paint, double textPt) {
    const double k = textPt > 0 ? textPt / kFigureTextPt : 1.0;
    if (k == 1.0) return paint;
    return [paint = std::move(paint), k](QPainter& p, const QRectF& area) {
        p.save();
        p.translate(area.topLeft());
        p.scale(k, k);
        paint(p, QRectF(0, 0, area.width() / k, area.height() / k));
        p.restore();
    };
}

bool isFigureFile(const QString& file) {
    const QString s = QFileInfo(file).suffix().toLower();
    return s == QLatin1String("png") || s == QLatin1String("svg") || s == QLatin1String("pdf");
}

QString writeFigure(const QString& file, const QSizeF& size, double scale, const FigurePainter& paint,
                    const QString& title) {
    const QString suffix = QFileInfo(file).suffix().toLower();
    const QRectF area(QPointF(0, 0), size);
    if (suffix == QLatin1String("png")) {
        if (!(scale > 0 && scale <= 16)) return QStringLiteral("the PNG scale must be in (0, 16], not %1").arg(scale);
        QImage img(qCeil(size.width() * scale), qCeil(size.height() * scale), QImage::Format_RGB32);
        if (img.isNull()) return QStringLiteral("cannot write %1: the image is too large").arg(file);
        // Laid out at 72 dpi (points); the file then says 72 × scale dpi.
        img.setDotsPerMeterX(qRound(72 / 0.0254));
        img.setDotsPerMeterY(qRound(72 / 0.0254));
        img.fill(Qt::white);
        QPainter p(&img);
        p.scale(scale, scale);
        paint(p, area);
        p.end();
        img.setDotsPerMeterX(qRound(72 * scale / 0.0254));
        img.setDotsPerMeterY(qRound(72 * scale / 0.0254));
        if (!title.isEmpty()) img.setText(QStringLiteral("Title"), title);
        img.setText(QStringLiteral("Software"), QStringLiteral("KVLens"));
        return saveThrough(file, [&img](QIODevice& out) {
            return img.save(&out, "PNG") ? QString() : QStringLiteral("the PNG could not be encoded");
        });
    }
    if (suffix == QLatin1String("svg")) {
        return saveThrough(file, [&](QIODevice& out) {
            QSvgGenerator svg;
            svg.setOutputDevice(&out);
            svg.setSize(size.toSize());
            svg.setViewBox(area);
            svg.setResolution(72);
            svg.setTitle(title);
            svg.setDescription(QStringLiteral("KVLens figure"));
            QPainter p;
            if (!p.begin(&svg)) return QStringLiteral("the SVG could not be started");
            paint(p, area);
            return p.end() ? QString() : QStringLiteral("the SVG could not be finished");
        });
    }
    if (suffix == QLatin1String("pdf")) {
        return saveThrough(file, [&](QIODevice& out) {
            QPdfWriter pdf(&out);
            pdf.setResolution(72);
            pdf.setPageSize(QPageSize(size, QPageSize::Point, QString(), QPageSize::ExactMatch));
            pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
            pdf.setTitle(title);
            pdf.setCreator(QStringLiteral("KVLens"));
            QPainter p;
            if (!p.begin(&pdf)) return QStringLiteral("the PDF could not be started");
            paint(p, area);
            return p.end() ? QString() : QStringLiteral("the PDF could not be finished");
        });
    }
    return QStringLiteral("%1: a figure is .png, .svg or .pdf").arg(file);
}

}  // namespace kvlens::ui
