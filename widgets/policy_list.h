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

    void setPolicies(const std::vector<PolicyConfig>& policies);  // not undoable (initial state)
    const std::vector<PolicyConfig>& policies() const { return m_policies; }
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
    void edit(std::vector<PolicyConfig> next, const QString& what);
    void apply(const std::vector<PolicyConfig>& policies);
    void refreshList();

    QUndoStack* m_undo;
    std::vector<PolicyConfig> m_policies;
    QListWidget* m_list;
    QToolButton* m_add;
    QPushButton* m_remove;
    ParamForm* m_form;
};

}  // namespace kvlens::ui
