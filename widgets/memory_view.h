#pragma once
// The KV memory view (issue 22): the loaded model's KV-cache bytes against
// context length under MHA, its own GQA, MQA, CLA (k = 2, 3) and YOCO, as
// a plot (log-log, one line per design, dashed with the eviction budget on
// top) and a table at the current prompt length. Numbers from
// core/eval/kv_memory.h, the same as `kvlens-cli memory`.
#include <QWidget>

#include "core/eval/kv_memory.h"

class QCustomPlot;
class QTableWidget;
class QLabel;

namespace kvlens::ui {

class MemoryView : public QWidget {
    Q_OBJECT
public:
    explicit MemoryView(QWidget* parent = nullptr);
    void setShape(const KvShape& shape);
    void setBudget(const BudgetSpec& budget);
    void setContext(int64_t tokens);  // the prompt's length: the table's column, a line on the plot

    const QTableWidget* table() const { return m_table; }
    const QCustomPlot* plot() const { return m_plot; }
    static std::vector<int64_t> plotContexts();  // 128, 256, ..., 131072

private:
    void refresh();
    KvShape m_shape;
    BudgetSpec m_budget;
    bool m_hasShape = false;
    int64_t m_context = 512;
    QCustomPlot* m_plot;
    QTableWidget* m_table;
    QLabel* m_caption;
};

}  // namespace kvlens::ui
