#pragma once
// One undoable edit of a whole value (the budget state, the policy list):
// undo applies the value before, redo the value after. Storing whole values
// keeps every editor's undo the same few lines.
#include <QUndoCommand>
#include <functional>
#include <utility>

namespace kvlens::ui {

template <class T>
class ValueCommand : public QUndoCommand {
public:
    // mergeId >= 0: consecutive edits with the same id are one undo step
    // (the keystrokes of a number typed into a field).
    ValueCommand(const QString& text, T before, T after, std::function<void(const T&)> apply, int mergeId = -1)
        : QUndoCommand(text), m_before(std::move(before)), m_after(std::move(after)), m_apply(std::move(apply)),
          m_mergeId(mergeId) {}
    void undo() override { m_apply(m_before); }
    void redo() override { m_apply(m_after); }
    int id() const override { return m_mergeId; }
    bool mergeWith(const QUndoCommand* other) override {
        if (other->id() != m_mergeId) return false;
        m_after = static_cast<const ValueCommand*>(other)->m_after;
        return true;
    }

private:
    T m_before, m_after;
    std::function<void(const T&)> m_apply;
    int m_mergeId;
};

}  // namespace kvlens::ui
