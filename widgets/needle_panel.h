#pragma once
// The needle dock: the grid to run (context lengths, depths, budgets,
// samples; for a model other than the bundled one, the needle, question and
// answer to hide in the prompt text), run / cancel with progress, and the
// NeedleView of the result.
#include <QWidget>
#include <memory>

#include "core/study/needle_grid.h"

class QLineEdit;
class QSpinBox;
class QComboBox;
class QProgressBar;
class QPushButton;
class QLabel;

namespace kvlens::ui {

class NeedleView;

class NeedlePanel : public QWidget {
    Q_OBJECT
public:
    explicit NeedlePanel(QWidget* parent = nullptr);

    // The grid as typed, without policies (the caller adds its own) and, for
    // a user needle, with `haystack` as the text to hide it in. Throws
    // ArgumentError naming the field when a list does not parse.
    eval::NeedleGridOptions options(const std::string& haystack) const;
    void setRunning(bool running);
    void setProgress(int64_t done, int64_t total);
    void setResult(std::shared_ptr<const eval::NeedleGridResult> result);
    void setMessage(const QString& message);  // errors and notes under the controls
    NeedleView* view() const { return m_view; }
    QLineEdit* contexts() const { return m_contexts; }
    QLineEdit* budgets() const { return m_budgets; }

Q_SIGNALS:
    void runRequested();
    void cancelRequested();

private:
    QLineEdit* m_contexts;
    QLineEdit* m_depths;
    QLineEdit* m_budgets;
    QSpinBox* m_samples;
    QLineEdit* m_needle;
    QLineEdit* m_question;
    QLineEdit* m_answer;
    QComboBox* m_metric;
    QPushButton* m_run;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_message;
    NeedleView* m_view;
};

}  // namespace kvlens::ui
