#pragma once
// The budget editor: preset (uniform / pyramid(β) / custom), the average
// budget, draggable per-layer bars, the total, and a per-head view of what an
// adaptive policy's KV heads hold. Every edit is one undo step on the shared
// QUndoStack and reports the BudgetSpec the session should run with.
#include <QWidget>
#include <memory>

#include "core/policy/budget.h"
#include "core/run/trace.h"
#include "widgets/budget_state.h"
#include "widgets/widget_types.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QCheckBox;
class QUndoStack;

namespace kvlens::ui {

class BudgetBars;
class BudgetSpin;

class BudgetEditor : public QWidget {
    Q_OBJECT
public:
    explicit BudgetEditor(QUndoStack* undo, QWidget* parent = nullptr);

    // The model's layer count and the prompt length (pyramid needs it).
    void setContext(int64_t numLayers, int64_t promptLength);
    // For the per-head view: which policies exist and what they hold.
    void setTrace(std::shared_ptr<const Trace> trace);
    const BudgetState& state() const { return m_state; }
    BudgetSpec spec() const { return m_state.spec(); }
    // Records `next` as one undoable edit (no-op when unchanged).
    // mergeId >= 0: merged with the edit before it of the same id (one undo step).
    void edit(const BudgetState& next, const QString& what, int mergeId = -1);
    BudgetBars* bars() const { return m_bars; }
    // Shows run `label` per KV head from now on (a lesson, a saved session);
    // empty: the editor chooses again (the adaptive run, else the first).
    void showRun(const QString& label);
    // The run chosen by showRun or by the user, empty when the editor chose.
    QString chosenRun() const { return m_chosenRun; }
    QString shownRun() const;  // the run the per-head view shows now, empty when off
    QString totalText() const;

Q_SIGNALS:
    void budgetChanged(const kvlens::BudgetSpec& spec);
    // While a bar is dragged (not an undo step yet): lets the view follow live.
    void budgetPreviewed(const kvlens::BudgetSpec& spec);

private:
    void apply(const BudgetState& s);  // undo/redo land here
    void syncControls();
    void updateHeadView();
    // Whether a run's layer budgets differ from what the bars show.
    bool ownLayerBudgets(const PolicyTrace& p) const;

    QUndoStack* m_undo;
    BudgetState m_state;
    int64_t m_layers = 0, m_promptLength = 1;
    std::shared_ptr<const Trace> m_trace;
    QComboBox* m_preset;
    BudgetSpin* m_budget;
    QDoubleSpinBox* m_beta;
    QLabel* m_total;
    BudgetBars* m_bars;
    QCheckBox* m_perHead;
    bool m_perHeadChosen = false;  // the user ticked or cleared it: no longer set for them
    QComboBox* m_headPolicy;
    QString m_chosenRun;
};

}  // namespace kvlens::ui
