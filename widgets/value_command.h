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
    ValueCommand(const QString& text, T before, T after, std::function<void(const T&)> apply)
        : QUndoCommand(text), m_before(std::move(before)), m_after(std::move(after)), m_apply(std::move(apply)) {}
    void undo() override { m_apply(m_before); }
    void redo() override { m_apply(m_after); }

private:
    T m_before, m_after;
    std::function<void(const T&)> m_apply;
};

}  // namespace kvlens::ui
