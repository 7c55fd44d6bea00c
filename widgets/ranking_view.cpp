#include "widgets/ranking_view.h"

#include <QCheckBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/eval/kv_memory.h"
#include "core/io/session_file.h"
#include "widgets/metric_text.h"

namespace kvlens::ui {
namespace {

// A cell that sorts by its number (NaN last, whichever the order), not its text.
class NumberItem : public QTableWidgetItem {
public:
    NumberItem(const QString& text, double value) : QTableWidgetItem(text) {
        setData(Qt::UserRole, value);
        setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    }
    bool operator<(const QTableWidgetItem& other) const override {
        const double a = data(Qt::UserRole).toDouble(), b = other.data(Qt::UserRole).toDouble();
        const bool ascending = !tableWidget() || tableWidget()->horizontalHeader()->sortIndicatorOrder() == Qt::AscendingOrder;
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) == std::isnan(b) ? false : (std::isnan(b) == ascending);
        return a < b;
    }
};

QString bytesText(double bytes) {
    return std::isfinite(bytes) ? QString::fromStdString(formatBytes(static_cast<uint64_t>(std::llround(bytes))))
                                : QStringLiteral("n/a");
}

}  // namespace

RankingView::RankingView(QWidget* parent)
    : QWidget(parent),
      m_match(new QCheckBox(tr("Match memory"), this)),
      m_matchText(new QLabel(this)),
      m_table(new QTableWidget(this)),
      m_note(new QLabel(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_match->setToolTip(tr("Solve each policy's budget so that the KV memory it holds over the run (the mean over "
                           "its predictions) equals that of the budget for every policy: at one budget a prefill_once "
                           "policy holds more than an every_step one, because it grows by one entry per step"));
    layout->addWidget(m_match);
    connect(m_match, &QCheckBox::toggled, this, &RankingView::matchMemoryToggled);
    m_matchText->setWordWrap(true);
    m_matchText->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_matchText->hide();
    layout->addWidget(m_matchText);
    m_note->setWordWrap(true);
    m_note->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_note);
    const QStringList headers{tr("rank"),  tr("policy"),  tr("budget"),  tr("mean KL"), tr("top-1"), tr("PPL"),
                              tr("mass"),  tr("KV mean"), tr("KV peak"), tr("memory"),  tr("oracle")};
    m_table->setColumnCount(static_cast<int>(headers.size()));
    m_table->setHorizontalHeaderLabels(headers);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    // Rank order until the user clicks a header (Qt's default indicator would sort by rank, descending).
    m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    m_table->horizontalHeader()->setSortIndicatorShown(true);
    m_table->setToolTip(tr("One row per run, ranked by mean KL to the full cache (lower is better). KV mean: the KV "
                           "bytes held over the run (mean over its predictions); KV peak: the most, prompt read "
                           "included; memory: KV mean against the median of the runs (or the matched target), "
                           "marked where it is more than 5% off. oracle: kept-set overlap with the hindsight oracle. "
                           "Click a header to sort."));
    layout->addWidget(m_table, 1);
    setTrace(nullptr);
}

void RankingView::setTrace(std::shared_ptr<const Trace> trace, double targetBytes) {
    m_table->setSortingEnabled(false);
    if (!trace || trace->policies.empty()) {
        m_ranking = Ranking{};
        m_table->setRowCount(0);
        m_note->setText(tr("Run a comparison to rank its policies."));
        return;
    }
    m_ranking = rankRuns(*trace, targetBytes);
    m_table->setRowCount(static_cast<int>(m_ranking.rows.size()));
    for (int r = 0; r < static_cast<int>(m_ranking.rows.size()); ++r) {
        const RankedRun& row = m_ranking.rows[static_cast<size_t>(r)];
        const PolicyTrace& p = trace->policies[row.run];
        int c = 0;
        auto number = [&](const QString& text, double value) { m_table->setItem(r, c++, new NumberItem(text, value)); };
        number(row.rank ? QString::number(row.rank) : QStringLiteral("–"), row.rank ? row.rank : std::nan(""));
        auto* label = new QTableWidgetItem(QString::fromStdString(row.label));
        if (!p.failure.empty()) label->setToolTip(stoppedText(p));
        m_table->setItem(r, c++, label);
        number(std::isfinite(row.budget) ? QString::number(row.budget, 'f', 0) : QStringLiteral("all"), row.budget);
        number(metricText(row.meanKl, 4), row.meanKl);
        number(percentText(row.top1, 1), row.top1);
        number(metricText(row.perplexity, 3), row.perplexity);
        number(metricText(row.retainedMass, 3), row.retainedMass);
        number(bytesText(row.meanBytes), row.meanBytes);
        number(bytesText(static_cast<double>(row.peakBytes)), static_cast<double>(row.peakBytes));
        number(row.run == 0 ? QStringLiteral("–") : percentText(row.memoryShare) + (row.unequalMemory ? QStringLiteral(" ≠") : QString()),
               row.memoryShare);
        number(metricText(row.oracleAgreement, 3), row.oracleAgreement);
        if (row.unequalMemory)
            for (int k = 0; k < c; ++k)
                m_table->item(r, k)->setToolTip(tr("Held %1 of the reference memory over the run: not compared at matched memory")
                                                    .arg(percentText(row.memoryShare)));
    }
    m_table->setSortingEnabled(true);
    showNote();
}

namespace {
// The table's column of each key of a session's view.rank_by
// (rankKeys(), core/io/session_file.h, in its order), and the order that
// puts the best first.
struct RankColumn {
    int column;
    Qt::SortOrder best;
};
constexpr RankColumn kRankColumns[] = {{3, Qt::AscendingOrder}, {4, Qt::DescendingOrder}, {5, Qt::AscendingOrder},
                                       {6, Qt::DescendingOrder}, {7, Qt::AscendingOrder}, {8, Qt::AscendingOrder},
                                       {10, Qt::DescendingOrder}};
}  // namespace

void RankingView::sortBy(const QString& key) {
    const auto& keys = rankKeys();
    const auto it = std::find(keys.begin(), keys.end(), key.toStdString());
    const auto at = static_cast<size_t>(it - keys.begin());
    const RankColumn by = at < std::size(kRankColumns) ? kRankColumns[at] : RankColumn{-1, Qt::AscendingOrder};  // -1: by rank
    m_table->horizontalHeader()->setSortIndicator(by.column, by.best);  // NumberItem reads its order
    m_table->sortItems(std::max(0, by.column), by.best);
}

QString RankingView::sortKey() const {
    const int column = m_table->horizontalHeader()->sortIndicatorSection();
    for (size_t i = 0; i < rankKeys().size() && i < std::size(kRankColumns); ++i)
        if (column == kRankColumns[i].column) return QString::fromStdString(rankKeys()[i]);
    return {};
}

void RankingView::showNote() {
    QString note = QString::fromStdString(m_ranking.note);
    if (m_ranking.unequal > 0 && !m_ranking.matched) note += tr(". Turn on Match memory to compare at matched memory.");
    // A comparison at unequal memory is marked, not only coloured.
    m_note->setText((m_ranking.unequal > 0 ? QStringLiteral("⚠ ") : QString()) + note);
}

void RankingView::setMatchText(const QString& text) {
    m_matchText->setText(text);
    m_matchText->setVisible(!text.isEmpty());
}

void RankingView::setMatchMemory(bool on) {
    const QSignalBlocker block(m_match);
    m_match->setChecked(on);
}

}  // namespace kvlens::ui
