#include "widgets/agreement_view.h"

#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "widgets/metric_text.h"

namespace kvlens::ui {
namespace {

// White (no overlap) to a saturated blue (the same tokens): dark text stays readable over it.
QColor cellColour(double j) {
    if (std::isnan(j)) return QColor(0xe0, 0xe0, 0xe0);
    const double t = std::clamp(j, 0.0, 1.0);
    return QColor::fromRgbF(static_cast<float>(1.0 - 0.55 * t), static_cast<float>(1.0 - 0.35 * t), 1.0f);
}

}  // namespace

AgreementView::AgreementView(QWidget* parent)
    : QWidget(parent), m_scope(new QComboBox(this)), m_table(new QTableWidget(this)), m_detail(new QLabel(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_scope->addItems({tr("selected layer and KV head"), tr("mean over layers and KV heads")});
    m_scope->setToolTip(tr("Where the kept sets are compared"));
    layout->addWidget(m_scope);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    // A number is never broken over two lines ("0." / "421"): a column is at
    // least as wide as "0.000", and the table scrolls when the dock is narrower.
    m_table->setWordWrap(false);
    m_table->setToolTip(tr("Jaccard overlap |A and B| / |A or B| of the tokens two policies hold at this step; "
                           "click a cell to ring the tokens one keeps and the other evicts"));
    layout->addWidget(m_table, 1);
    m_detail->setWordWrap(true);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_detail);
    connect(m_scope, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
    connect(m_table, &QTableWidget::cellClicked, this, [this](int r, int c) { pick(r, c); });
    refresh();
}

void AgreementView::setTrace(std::shared_ptr<const Trace> trace) {
    const bool samePolicies = m_trace && trace && m_trace->policies.size() == trace->policies.size();
    m_trace = std::move(trace);
    if (!samePolicies) m_pickA = m_pickB = -1;
    refresh();
}

void AgreementView::setSelection(int64_t layer, int64_t queryHead) {
    m_layer = layer;
    m_queryHead = queryHead;
    refresh();
}

void AgreementView::setSelectedHeadOnly(bool on) { m_scope->setCurrentIndex(on ? 0 : 1); }

int64_t AgreementView::kvHead() const {
    if (!m_trace || m_trace->numKvHeads <= 0) return 0;
    const int64_t group = std::max<int64_t>(1, m_trace->numHeads / m_trace->numKvHeads);
    return std::min(m_queryHead / group, m_trace->numKvHeads - 1);
}

std::vector<int64_t> AgreementView::heldByOnly(const Trace& t, size_t a, size_t b, int64_t layer, int64_t kvHead) {
    const auto& sa = t.policies.at(a).layers.at(static_cast<size_t>(layer)).heads.at(static_cast<size_t>(kvHead)).status;
    const auto& sb = t.policies.at(b).layers.at(static_cast<size_t>(layer)).heads.at(static_cast<size_t>(kvHead)).status;
    std::vector<int64_t> out;
    for (size_t i = 0; i < sa.size(); ++i)
        if (isHeld(sa[i]) && !(i < sb.size() && isHeld(sb[i]))) out.push_back(static_cast<int64_t>(i));
    return out;
}

void AgreementView::refresh() {
    const int n = m_trace ? static_cast<int>(m_trace->policies.size()) - 1 : 0;
    const bool valid = n >= 1 && m_layer < m_trace->numLayers;
    m_table->setRowCount(valid ? n : 0);
    m_table->setColumnCount(valid ? n : 0);
    if (!valid) {
        m_detail->setText(tr("Add policies to compare what they keep."));
        return;
    }
    const bool one = m_scope->currentIndex() == 0;
    QStringList names;
    for (int i = 1; i <= n; ++i) names << QString::fromStdString(m_trace->policies[static_cast<size_t>(i)].label);
    // Columns by number, rows by number and label: every column stays narrow
    // enough for the dock, and no label is cut.
    QStringList numbers, rows;
    for (int i = 0; i < n; ++i) {
        numbers << QString::number(i + 1);
        rows << QStringLiteral("%1 %2").arg(i + 1).arg(names[i]);
    }
    m_table->horizontalHeader()->setMinimumSectionSize(  // at the text size of now (presenter mode: larger)
        m_table->fontMetrics().horizontalAdvance(QStringLiteral("0.000")) + 14);
    m_table->setHorizontalHeaderLabels(numbers);
    m_table->setVerticalHeaderLabels(rows);
    for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
            const PolicyTrace &pa = m_trace->policies[static_cast<size_t>(a + 1)],
                              &pb = m_trace->policies[static_cast<size_t>(b + 1)];
            const double j = one ? keptJaccard(pa, pb, m_layer, kvHead()) : keptJaccardMean(pa, pb);
            auto* item = new QTableWidgetItem(metricText(j, 3));
            item->setTextAlignment(Qt::AlignCenter);
            item->setBackground(cellColour(j));
            item->setForeground(QColor(Qt::black));
            item->setToolTip(tr("%1 vs %2: %3").arg(names[a], names[b], item->text()));
            m_table->setItem(a, b, item);
        }
    if (m_pickA >= n || m_pickB >= n) m_pickA = m_pickB = -1;
    if (m_pickA < 0) {
        m_detail->setText(n == 1 ? tr("One policy: add another to compare what they keep.")
                                 : tr("Click a cell: the tokens one policy keeps and the other evicts are ringed."));
        return;
    }
    const size_t a = static_cast<size_t>(m_pickA + 1), b = static_cast<size_t>(m_pickB + 1);
    const std::vector<int64_t> onlyA = heldByOnly(*m_trace, a, b, m_layer, kvHead()),
                               onlyB = heldByOnly(*m_trace, b, a, m_layer, kvHead());
    std::vector<int64_t> ringed = onlyA;
    ringed.insert(ringed.end(), onlyB.begin(), onlyB.end());
    std::sort(ringed.begin(), ringed.end());
    m_detail->setText(a == b ? tr("%1 against itself: nothing differs.").arg(names[m_pickA])
                             : tr("Layer %1, KV head %2: %3 keeps %4 tokens %5 evicts, %5 keeps %6 tokens %3 evicts "
                                  "(ringed in the strips).")
                                   .arg(m_layer)
                                   .arg(kvHead())
                                   .arg(names[m_pickA], QString::number(onlyA.size()), names[m_pickB])
                                   .arg(onlyB.size()));
    Q_EMIT tokensPicked(ringed);
}

void AgreementView::pick(int a, int b) {
    m_pickA = a;
    m_pickB = b;
    m_table->setCurrentCell(a, b);
    refresh();
}

}  // namespace kvlens::ui
