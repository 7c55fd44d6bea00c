#pragma once
// The prompt: plain text with the example prompts one click away. Reports
// every edit; the controller debounces the re-runs.
#include <QWidget>

class QPlainTextEdit;
class QComboBox;
class QLabel;

namespace kvlens::ui {

class PromptEditor : public QWidget {
    Q_OBJECT
public:
    explicit PromptEditor(QWidget* parent = nullptr);

    // Example name -> text (from resources/examples).
    void setExamples(const QStringList& names, const QStringList& texts);
    void setText(const QString& text);  // emits textEdited
    void selectExample(const QString& name);  // shows the name, leaves the text alone
    // The example the text is, or empty once it is edited (the box then says "(your own text)").
    QString exampleName() const;
    QString text() const;
    void setTokenCount(int tokens);
    QPlainTextEdit* editor() const { return m_edit; }

Q_SIGNALS:
    void textEdited(const QString& text);

private:
    QPlainTextEdit* m_edit;
    QComboBox* m_examples;
    QLabel* m_count;
    QStringList m_texts;
};

}  // namespace kvlens::ui
