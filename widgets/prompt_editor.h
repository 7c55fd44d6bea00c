#pragma once
// The prompt: plain text with the example prompts one click away. Reports
// every edit; the controller debounces the re-runs.
#include <QWidget>

class QPlainTextEdit;
class QComboBox;
class QLabel;
class QLineEdit;

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
    // "304 tokens", or "304 tokens + 15 of the question" when a query-aware
    // question ends the prompt the runs read.
    void setTokenCount(int tokens, int questionTokens = 0);
    // A question about the prompt, and whether the policies see it
    // (aware: it ends the prompt and is their observation window) or not
    // (agnostic: read after the compression). Setting emits questionEdited.
    QString question() const;
    bool questionAware() const;
    void setQuestion(const QString& text, bool aware);
    QPlainTextEdit* editor() const { return m_edit; }

Q_SIGNALS:
    void textEdited(const QString& text);
    void questionEdited(const QString& text, bool aware);

private:
    QPlainTextEdit* m_edit;
    QComboBox* m_examples;
    QLabel* m_count;
    QLineEdit* m_question;
    QComboBox* m_questionMode;
    QStringList m_texts;
};

}  // namespace kvlens::ui
