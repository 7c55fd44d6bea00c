#pragma once
// The Ranking dock: which run is best, and at what memory. One row per run
// of the shown Trace (core/study/ranking.h): rank by mean KL, top-1,
// perplexity, retained mass, the KV bytes held over the run (mean and
// peak), agreement with the hindsight oracle when one runs, and a mark on
// the runs held at unequal memory. Every column sorts (click its header).
#include <QWidget>
#include <memory>

#include "core/run/trace.h"
#include "core/study/ranking.h"

class QCheckBox;
class QLabel;
class QTableWidget;

namespace kvlens::ui {

class RankingView : public QWidget {
    Q_OBJECT
public:
    explicit RankingView(QWidget* parent = nullptr);

    // `targetBytes`: the memory the budgets were matched to, NaN for none.
    void setTrace(std::shared_ptr<const Trace> trace, double targetBytes = std::nan(""));

    // How the shown run's budgets were matched (the worker's line), empty for none.
    void setMatchText(const QString& text);
    // The switch, without emitting matchMemoryToggled.
    void setMatchMemory(bool on);

    // Orders the rows by a metric, best first (a session's view.rank_by:
    // kl, top1, perplexity, mass, kv_mean, kv_peak, oracle); empty: by rank.
    // Unknown keys are ignored (the session file checks them).
    void sortBy(const QString& key);
    // The metric the rows are ordered by (a header click included), empty: by rank.
    QString sortKey() const;

    QTableWidget* table() const { return m_table; }
    QLabel* note() const { return m_note; }
    QCheckBox* matchSwitch() const { return m_match; }
    const Ranking& ranking() const { return m_ranking; }

Q_SIGNALS:
    // The user turned "Match memory" on or off: the next run solves each policy's budget (or not).
    void matchMemoryToggled(bool on);

private:
    void showNote();

    QCheckBox* m_match;
    QLabel* m_matchText;
    QTableWidget* m_table;
    QLabel* m_note;
    Ranking m_ranking;
};

}  // namespace kvlens::ui
