#include "widgets/status_legend.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include "core/run/trace.h"
#include "widgets/palette.h"

namespace kvlens::ui {
namespace {

const TokenStatus kShown[] = {TokenStatus::Sink, TokenStatus::Window, TokenStatus::Score,
                              TokenStatus::Held, TokenStatus::Evicted, TokenStatus::Unseen};

}  // namespace

StatusLegend::StatusLegend(QWidget* parent) : QWidget(parent) {
    QSizePolicy sp(QSizePolicy::Expanding, QSizePolicy::Fixed);
    sp.setHeightForWidth(true);
    setSizePolicy(sp);
}

QSize StatusLegend::sizeHint() const { return {600, heightForWidth(600)}; }

namespace {

struct Item {
    QColor colour;
    QString text, explanation;
};

QString explanation(TokenStatus s) {
    switch (s) {
        case TokenStatus::Sink: return StatusLegend::tr("Kept as an attention sink: one of the first tokens, which many heads attend to whatever the text says");
        case TokenStatus::Window: return StatusLegend::tr("Kept as one of the most recent tokens (the policy's window)");
        case TokenStatus::Score: return StatusLegend::tr("Kept because its score ranked within the budget");
        case TokenStatus::Held: return StatusLegend::tr("In the cache; no eviction decision has touched it yet");
        case TokenStatus::Evicted: return StatusLegend::tr("Removed from this run's cache: no later query can attend to it");
        case TokenStatus::Unseen: return StatusLegend::tr("Not read yet at this step (later in the text)");
    }
    return {};
}

QList<Item> items() {
    QList<Item> out;
    for (TokenStatus s : kShown) out.push_back({statusColour(s), statusText(s), explanation(s)});
    out.push_back({evictedColour(), QStringLiteral("evicted key (heatmap)"),
                   StatusLegend::tr("In a heatmap: a key this run had evicted, where the full cache still attends")});
    return out;
}

// Lays the items out left to right, wrapping; calls `draw` for each.
template <class Draw>
int flow(const QFontMetrics& fm, const QRect& area, Draw draw) {
    const int line = fm.height() + 4, box = fm.height() - 4;
    int x = area.left() + 4, y = area.top();
    for (const Item& item : items()) {
        const int w = box + 4 + fm.horizontalAdvance(item.text) + 14;
        if (x + w > area.right() && x > area.left() + 4) {
            x = area.left() + 4;
            y += line;
        }
        draw(item, QRect(x, y + (line - box) / 2, box, box), QRect(x + box + 4, y, w - box - 4, line));
        x += w;
    }
    return y + line - area.top();
}

}  // namespace

int StatusLegend::heightForWidth(int width) const {
    return flow(fontMetrics(), QRect(0, 0, width, 1000), [](const Item&, const QRect&, const QRect&) {});
}

int StatusLegend::paint(QPainter& p, const QRect& area) const {
    p.save();
    p.setPen(palette().color(QPalette::WindowText));
    const int h = flow(p.fontMetrics(), area, [&p](const Item& item, const QRect& box, const QRect& text) {
        p.fillRect(box, item.colour);
        p.drawText(text, Qt::AlignVCenter | Qt::AlignLeft, item.text);
    });
    p.restore();
    return h;
}

QString StatusLegend::explanationAt(const QPoint& pos) const {
    QString found;
    flow(fontMetrics(), rect(), [&](const Item& item, const QRect& box, const QRect& text) {
        if (box.united(text).contains(pos)) found = item.explanation;
    });
    return found;
}

bool StatusLegend::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const QString text = explanationAt(help->pos());
        if (text.isEmpty()) QToolTip::hideText();
        else QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(e);
}

void StatusLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    paint(p, rect());
}

}  // namespace kvlens::ui
