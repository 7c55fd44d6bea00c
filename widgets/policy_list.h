#pragma once
// The policies compared against the full cache: add (from the registry),
// remove, and configure the selected one. Every change is one undo step on
// the shared QUndoStack and reports the whole list.
#include <QWidget>
#include <vector>

#include "core/policy/policy_info.h"
#include "widgets/widget_types.h"

class QListWidget;
class QToolButton;
class QPushButton;
class QUndoStack;

namespace kvlens::ui {

class ParamForm;

class PolicyList : public QWidget {
    Q_OBJECT
public:
    explicit PolicyList(QUndoStack* undo, QWidget* parent = nullptr);

    // Not undoable (the initial state, an opened session). `slots`: each
    // policy's colour slot (widgets/palette.h) as saved; empty, or not one
    // distinct slot per policy: given afresh.
    void setPolicies(const std::vector<PolicyConfig>& policies, const std::vector<int>& slots = {});
    const std::vector<PolicyConfig>& policies() const { return m_policies; }
    // Each policy's colour slot: given when it is added (the lowest free
    // one), kept while it is edited, dropped when it is removed.
    const std::vector<int>& colourSlots() const { return m_entries.slots; }
    void addPolicy(const std::string& id);
    // A TorchScript scorer (docs/plugins.md) as a new policy; why not, or empty.
    QString addPolicyFromFile(const QString& file);
    void removeSelected();
    void select(int index);
    ParamForm* form() const { return m_form; }
    QListWidget* list() const { return m_list; }

Q_SIGNALS:
    void policiesChanged(const std::vector<kvlens::PolicyConfig>& policies);

private:
    struct Entries {
        std::vector<PolicyConfig> policies;
        std::vector<int> slots;  // one per policy
    };
    void edit(Entries next, const QString& what);
    void present(const Entries& entries);  // the list, its colours (setPolicySlots), no signal
    void apply(const Entries& entries);  // present() and policiesChanged
    void refreshList();
    int freeSlot() const;

    QUndoStack* m_undo;
    Entries m_entries;
    const std::vector<PolicyConfig>& m_policies = m_entries.policies;
    QListWidget* m_list;
    QToolButton* m_add;
    QPushButton* m_remove;
    ParamForm* m_form;
};

}  // namespace kvlens::ui
