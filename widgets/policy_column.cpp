#include "widgets/policy_column.h"

#include <QAbstractTextDocumentLayout>
#include <QLabel>
#include <QPainter>
#include <QTextDocument>
#include <QTextDocumentFragment>
#include <QVBoxLayout>

#include "core/policy/policy_info.h"
#include "widgets/attention_heatmap.h"
#include "widgets/head_grid.h"
#include "widgets/metric_text.h"
#include "widgets/palette.h"
#include "widgets/token_strip.h"

namespace kvlens::ui {
namespace {

// One item of a header line: it wraps only between items, never inside one
// ("KV 96.0 KiB (46%)" stays whole).
QString item(const QString& text) { return text.toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")); }

// The hindsight oracle reads the future: its header says it is a bound, not a policy.
bool isHindsight(const std::string& id) {
    for (const PolicyInfo& info : policyRegistry())
        if (info.id == id) return info.hindsight;
    return false;
}

QString headerFor(const Trace& t, int policy) {
    const PolicyTrace& p = t.policies[static_cast<size_t>(policy)];
    const double full = static_cast<double>(t.policies[0].bytesHeld);
    const double share = full > 0 ? 100.0 * static_cast<double>(p.bytesHeld) / full : 100.0;
    QStringList items{item(policy == 0 ? QStringLiteral("reference") : QString::fromStdString(p.schedule))};
    if (p.rerotate) items << item(QStringLiteral("re-rotated"));
    if (isHindsight(p.id)) items << item(QStringLiteral("hindsight: not deployable"));
    items << item(QStringLiteral("KV %1 KiB (%2%)")
                      .arg(static_cast<double>(p.bytesHeld) / 1024.0, 0, 'f', 1)
                      .arg(share, 0, 'f', 0));
    QString note;  // a sentence, on its own line
    if (policy > 0 && !t.teacherForced)  // its own text: no per-step comparison with full
        note = p.divergedAt >= 0 ? QStringLiteral("free-running: its text leaves full's at step %1").arg(p.divergedAt)
                                 : QStringLiteral("free-running: the same text as full");
    else if (policy > 0 && (!p.metrics.empty() || !p.failure.empty()))
        items << item(QStringLiteral("KL %1").arg(metricText(runMetric(p, p.meanKl()), 3)))
              << item(QStringLiteral("top-1 %1").arg(percentText(runMetric(p, p.top1Agreement()))));
    QString text = QStringLiteral("<b><span style='color:%1'>■</span> %2</b><br/><small>%3</small>")
                       .arg(runColour(t, static_cast<size_t>(policy)).name(),
                            QString::fromStdString(p.label).toHtmlEscaped(), items.join(QStringLiteral(" · ")));
    if (!note.isEmpty()) text += QStringLiteral("<br/><small>%1</small>").arg(note.toHtmlEscaped());
    if (!p.failure.empty())
        text += QStringLiteral("<br/><small><b style='color:#B03000'>%1</b></small>").arg(stoppedText(p).toHtmlEscaped());
    if (!p.budgetNote.empty())
        text += QStringLiteral("<br/><small><i>%1</i></small>").arg(QString::fromStdString(p.budgetNote).toHtmlEscaped());
    return text;
}

}  // namespace

PolicyColumn::PolicyColumn(QWidget* parent)
    : QWidget(parent),
      m_header(new QLabel(this)),
      m_strip(new TokenStrip(this)),
      m_heatmap(new AttentionHeatmap(this)),
      m_grid(new HeadGrid(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->setSpacing(4);
    m_header->setTextFormat(Qt::RichText);
    m_header->setWordWrap(true);
    m_header->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    layout->addWidget(m_header);
    layout->addWidget(m_strip);
    layout->addWidget(m_heatmap, 1);
    layout->addWidget(m_grid);
}

void PolicyColumn::setHighlight(const Highlight& h) {
    m_strip->setHighlight(h);
    m_heatmap->setHighlight(h);
    m_grid->setHighlight(h);
}

void PolicyColumn::setData(std::shared_ptr<const Trace> trace, int policy, std::shared_ptr<const AttentionLod> lod,
                           int64_t layer, int64_t head) {
    const int64_t group = trace->numHeads / std::max<int64_t>(1, trace->numKvHeads);
    m_header->setText(headerFor(*trace, policy));
    m_strip->setData(trace, policy, layer, head / std::max<int64_t>(1, group));
    const int64_t mapLayer = lod ? trace->attention[static_cast<size_t>(policy)].layer : layer;
    const int64_t mapHead = lod ? trace->attention[static_cast<size_t>(policy)].head : head;
    m_heatmap->setMap(trace, std::move(lod), mapLayer, mapHead);
    m_grid->setData(trace, policy);
    m_grid->setSelection(layer, head);
}

QString PolicyColumn::headerText() const {
    return QTextDocumentFragment::fromHtml(m_header->text()).toPlainText().replace(QChar(0xA0), QLatin1Char(' '));
}

int PolicyColumn::headerHeightFor(int width) const {
    const QMargins m = layout()->contentsMargins();
    return m_header->heightForWidth(width - m.left() - m.right());
}

void PolicyColumn::setHeaderHeight(int height) { m_header->setFixedHeight(height); }

int PolicyColumn::minimumHeightFor(int width) const {
    const QMargins m = layout()->contentsMargins();
    const int inner = width - m.left() - m.right();
    return m.top() + m.bottom() + 3 * layout()->spacing() + m_header->height() + m_strip->heightForWidth(inner) +
           m_heatmap->minimumSizeHint().height() + m_grid->sizeHint().height();
}

void PolicyColumn::setHoverToken(int index) {
    m_strip->setHoverToken(index);
    m_heatmap->setHoverToken(index);
}

void PolicyColumn::layOutHeader(QTextDocument& header, int width) const {
    header.setDefaultFont(font());
    header.setHtml(m_header->text());
    header.setTextWidth(width);
}

int PolicyColumn::paintedHeaderHeight(int width) const {
    QTextDocument header;
    layOutHeader(header, width);
    return static_cast<int>(header.size().height());
}

void PolicyColumn::paint(QPainter& p, const QRect& area, int headerHeight) const {
    QTextDocument header;
    layOutHeader(header, area.width());
    const int headerH = std::max(headerHeight, static_cast<int>(header.size().height()));
    const int stripH = m_strip->heightForWidth(area.width());
    const int gridH = m_grid->sizeHint().height();
    p.save();
    p.translate(area.topLeft());
    header.drawContents(&p);
    p.restore();
    int y = area.top() + headerH + 2;
    m_strip->paint(p, QRect(area.left(), y, area.width(), stripH));
    y += stripH + 4;
    const int mapH = std::max(40, area.bottom() - y - gridH - 4);
    m_heatmap->paint(p, QRect(area.left(), y, area.width(), mapH));
    y += mapH + 4;
    m_grid->paint(p, QRect(area.left(), y, area.width(), gridH));
}

}  // namespace kvlens::ui
