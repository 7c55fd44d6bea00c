#pragma once
// Kept-set agreement: for every pair of eviction runs of the shown Trace, the
// Jaccard overlap of the tokens they hold (|A ∩ B| / |A ∪ B|), in the
// selected layer × KV head or averaged over every layer and KV head, as a
// matrix. Clicking a cell names the tokens one run keeps and the other
// evicts in the selected layer × KV head, and asks for them to be ringed.
#include <QWidget>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/run/trace.h"

class QComboBox;
class QLabel;
class QTableWidget;

namespace kvlens::ui {

class AgreementView : public QWidget {
    Q_OBJECT
public:
    explicit AgreementView(QWidget* parent = nullptr);

    void setTrace(std::shared_ptr<const Trace> trace);
    // The comparison view's selection (a query head: its KV head is shown).
    void setSelection(int64_t layer, int64_t queryHead);
    // true: the selected layer × KV head; false: the mean over all of them.
    void setSelectedHeadOnly(bool on);

    QTableWidget* table() const { return m_table; }
    QLabel* detail() const { return m_detail; }
    // Picks the pair (rows and columns count the eviction runs from 0), as a click does.
    void pick(int a, int b);

    // Positions run a holds and run b does not (runs index Trace::policies).
    static std::vector<int64_t> heldByOnly(const Trace& t, size_t a, size_t b, int64_t layer, int64_t kvHead);

Q_SIGNALS:
    // Tokens to ring in the token strips (empty: none).
    void tokensPicked(const std::vector<int64_t>& positions);

private:
    void refresh();
    int64_t kvHead() const;

    QComboBox* m_scope;
    QTableWidget* m_table;
    QLabel* m_detail;
    std::shared_ptr<const Trace> m_trace;
    int64_t m_layer = 0, m_queryHead = 0;
    int m_pickA = -1, m_pickB = -1;
};

}  // namespace kvlens::ui
