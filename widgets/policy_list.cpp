#include "widgets/policy_list.h"

#include <QHBoxLayout>
#include <QListWidget>
#include <QFileDialog>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QToolButton>
#include <QUndoStack>
#include <QVBoxLayout>
#include <algorithm>

#include "core/policy/policy_info.h"
#include "widgets/palette.h"
#include "widgets/param_form.h"
#include "widgets/value_command.h"

namespace kvlens::ui {

PolicyList::PolicyList(QUndoStack* undo, QWidget* parent)
    : QWidget(parent),
      m_undo(undo),
      m_list(new QListWidget(this)),
      m_add(new QToolButton(this)),
      m_remove(new QPushButton(tr("Remove"), this)),
      m_form(new ParamForm(this)) {
    auto* menu = new QMenu(this);
    for (const PolicyInfo& info : policyRegistry()) {
        if (info.fullCache) continue;  // always column 0
        QAction* a = menu->addAction(QString::fromStdString(info.name + "  (" + info.id + ")"));
        a->setToolTip(QString::fromStdString(info.summary));
        connect(a, &QAction::triggered, this, [this, id = info.id] { addPolicy(id); });
    }
    menu->addSeparator();
    QAction* fromFile = menu->addAction(tr("Add policy from file…"));
    fromFile->setToolTip(tr("A scorer you wrote: a TorchScript module (torch.jit.script(...).save(\"mine.pt\")); "
                            "docs/plugins.md gives its inputs"));
    connect(fromFile, &QAction::triggered, this, [this] {
        const QString file = QFileDialog::getOpenFileName(this, tr("Add a TorchScript scorer"), QString(),
                                                          tr("TorchScript scorer (*.pt);;All files (*)"));
        if (file.isEmpty()) return;
        const QString error = addPolicyFromFile(file);
        if (error.isEmpty()) return;
        auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot add the policy"), error, QMessageBox::Ok, this);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();
    });
    m_add->setText(tr("Add policy"));
    m_add->setMenu(menu);
    m_add->setPopupMode(QToolButton::InstantPopup);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_add);
    buttons->addWidget(m_remove);
    buttons->addStretch(1);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_form);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_list, 1);
    layout->addLayout(buttons);
    layout->addWidget(scroll, 2);
    m_list->setToolTip(tr("The full cache is always the first column; these run beside it"));
    connect(m_remove, &QPushButton::clicked, this, &PolicyList::removeSelected);
    connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row >= 0 && row < static_cast<int>(m_policies.size()))
            m_form->setPolicy(m_policies[static_cast<size_t>(row)]);
        else
            m_form->clear();
    });
    connect(m_form, &ParamForm::edited, this, [this](const PolicyConfig& c) {
        const int row = m_list->currentRow();
        if (row < 0 || row >= static_cast<int>(m_policies.size())) return;
        Entries next = m_entries;
        next.policies[static_cast<size_t>(row)] = c;
        edit(std::move(next), tr("Configure %1").arg(QString::fromStdString(c.id)));
    });
}

void PolicyList::setPolicies(const std::vector<PolicyConfig>& policies, const std::vector<int>& slots) {
    std::vector<int> given = slots;
    std::vector<int> sorted = slots;
    std::sort(sorted.begin(), sorted.end());
    const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    if (given.size() != policies.size() || !distinct || (!sorted.empty() && sorted.front() < 0)) {
        given.resize(policies.size());
        for (size_t i = 0; i < given.size(); ++i) given[i] = static_cast<int>(i);
    }
    present({policies, given});
}

void PolicyList::present(const Entries& entries) {
    m_entries = entries;
    std::vector<std::string> labels;
    for (const PolicyConfig& p : m_policies) labels.push_back(p.label());
    setPolicySlots(labels, m_entries.slots);
    refreshList();
}

int PolicyList::freeSlot() const {
    int slot = 0;
    while (std::find(m_entries.slots.begin(), m_entries.slots.end(), slot) != m_entries.slots.end()) ++slot;
    return slot;
}

void PolicyList::addPolicy(const std::string& id) {
    Entries next = m_entries;
    next.policies.push_back(parsePolicySpec(id));
    next.slots.push_back(freeSlot());
    edit(std::move(next), tr("Add %1").arg(QString::fromStdString(id)));
    select(static_cast<int>(m_policies.size()) - 1);
}

QString PolicyList::addPolicyFromFile(const QString& file) {
    try {
        addPolicy("script:" + file.toStdString());
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

void PolicyList::removeSelected() {
    const int row = m_list->currentRow();
    if (row < 0 || row >= static_cast<int>(m_policies.size())) return;
    Entries next = m_entries;
    next.policies.erase(next.policies.begin() + row);
    next.slots.erase(next.slots.begin() + row);
    edit(std::move(next), tr("Remove %1").arg(QString::fromStdString(m_policies[static_cast<size_t>(row)].id)));
}

void PolicyList::select(int index) { m_list->setCurrentRow(index); }

void PolicyList::edit(Entries next, const QString& what) {
    m_undo->push(new ValueCommand<Entries>(what, m_entries, std::move(next), [this](const Entries& e) { apply(e); }));
}

void PolicyList::apply(const Entries& entries) {
    present(entries);
    Q_EMIT policiesChanged(m_policies);
}

// Relabels in place when the count is unchanged, so that editing a parameter
// keeps the selection and the form the user is typing in.
void PolicyList::refreshList() {
    const int row = m_list->currentRow();
    const bool sameCount = m_list->count() == static_cast<int>(m_policies.size());
    const QSignalBlocker block(m_list);
    if (!sameCount) m_list->clear();
    for (size_t i = 0; i < m_policies.size(); ++i) {
        const QString text = QString::fromStdString(m_policies[i].label());
        QListWidgetItem* item = sameCount ? m_list->item(static_cast<int>(i)) : new QListWidgetItem(m_list);
        item->setText(text);
        item->setForeground(slotColour(m_entries.slots[i]));  // the colour every panel gives it
    }
    const int keep = std::min(row, m_list->count() - 1);
    m_list->setCurrentRow(keep);
    if (keep < 0) {
        m_form->clear();
    } else if (m_form->shownLabel() != m_policies[static_cast<size_t>(keep)].label()) {
        // Undo/redo changed what the form shows. Rebuilt later: this may run
        // inside a signal of one of the form's own controls.
        QMetaObject::invokeMethod(this, [this] {
            const int r = m_list->currentRow();
            if (r >= 0 && r < static_cast<int>(m_policies.size())) m_form->setPolicy(m_policies[static_cast<size_t>(r)]);
        }, Qt::QueuedConnection);
    }
    m_remove->setEnabled(!m_policies.empty());
}

}  // namespace kvlens::ui
