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
class QPushButton;
class QSpinBox;
class QComboBox;

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
    // The what-if row: "[merge the KV heads to | layers share KV, every] [N]
    // [Run]" and its result. Kinds: 0 merges KV heads (N left), 1 makes
    // every N layers read the first one's K/V (CLA).
    enum WhatIfKind { MergeHeads = 0, ShareLayers = 1 };
    QComboBox* whatIfKind() const { return m_whatIfKind; }
    QSpinBox* whatIfValue() const { return m_whatIfHeads; }
    QPushButton* whatIfButton() const { return m_whatIfRun; }
    QString whatIfText() const;
    void showWhatIf(const QString& text, bool ok);

Q_SIGNALS:
    void whatIfRequested(int kind, int value);

private:
    void refresh();
    KvShape m_shape;
    BudgetSpec m_budget;
    bool m_hasShape = false;
    int64_t m_context = 512;
    QCustomPlot* m_plot;
    QTableWidget* m_table;
    QLabel* m_caption;
    void setWhatIfRange();
    QComboBox* m_whatIfKind;
    QSpinBox* m_whatIfHeads;
    QPushButton* m_whatIfRun;
    QLabel* m_whatIfResult;
};

}  // namespace kvlens::ui
