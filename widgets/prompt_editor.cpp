#include "widgets/prompt_editor.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace kvlens::ui {

PromptEditor::PromptEditor(QWidget* parent)
    : QWidget(parent),
      m_edit(new QPlainTextEdit(this)),
      m_examples(new QComboBox(this)),
      m_count(new QLabel(this)),
      m_question(new QLineEdit(this)),
      m_questionMode(new QComboBox(this)) {
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Example"), this));
    row->addWidget(m_examples, 1);
    row->addWidget(m_count);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(row);
    layout->addWidget(m_edit, 1);
    auto* ask = new QHBoxLayout;
    ask->addWidget(new QLabel(tr("Question"), this));
    ask->addWidget(m_question, 1);
    ask->addWidget(m_questionMode);
    layout->addLayout(ask);
    m_question->setPlaceholderText(tr("optional: a question about the prompt"));
    m_question->setClearButtonEnabled(true);
    m_questionMode->addItem(tr("query-agnostic"), false);
    m_questionMode->addItem(tr("query-aware"), true);
    m_questionMode->setToolTip(
        tr("query-agnostic: the prompt is compressed without the question, then every run reads it before it "
           "answers (kvpress's default)\nquery-aware: the question ends the prompt and is the observation window "
           "of every policy that has one (Finch, kvpress query_aware)"));
    auto emitQuestion = [this] { Q_EMIT questionEdited(question(), questionAware()); };
    connect(m_question, &QLineEdit::textChanged, this, emitQuestion);
    connect(m_questionMode, qOverload<int>(&QComboBox::currentIndexChanged), this, emitQuestion);
    m_edit->setPlaceholderText(tr("Type a prompt; every panel follows as you type"));
    m_edit->setTabChangesFocus(true);  // keeps Space/arrows free for the transport outside the editor
    m_examples->setPlaceholderText(tr("(your own text)"));
    connect(m_edit, &QPlainTextEdit::textChanged, this, [this] {
        // The box names an example only while the text is that example's.
        m_examples->setCurrentIndex(static_cast<int>(m_texts.indexOf(text())));
        Q_EMIT textEdited(text());
    });
    connect(m_examples, qOverload<int>(&QComboBox::activated), this, [this](int i) {
        if (i >= 0 && i < m_texts.size()) setText(m_texts[i]);
    });
}

void PromptEditor::setExamples(const QStringList& names, const QStringList& texts) {
    m_examples->clear();
    m_examples->addItems(names);
    m_texts = texts;
}

void PromptEditor::setText(const QString& text) { m_edit->setPlainText(text); }
void PromptEditor::selectExample(const QString& name) { m_examples->setCurrentIndex(m_examples->findText(name)); }
QString PromptEditor::exampleName() const { return m_examples->currentIndex() < 0 ? QString() : m_examples->currentText(); }

QString PromptEditor::text() const { return m_edit->toPlainText(); }
QString PromptEditor::question() const { return m_question->text(); }
bool PromptEditor::questionAware() const { return m_questionMode->currentData().toBool(); }

void PromptEditor::setQuestion(const QString& text, bool aware) {
    m_questionMode->setCurrentIndex(aware ? 1 : 0);
    m_question->setText(text);
    Q_EMIT questionEdited(question(), questionAware());
}

void PromptEditor::setTokenCount(int tokens, int questionTokens) {
    m_count->setText(questionTokens > 0 ? tr("%1 tokens + %2 of the question").arg(tokens).arg(questionTokens)
                                        : tr("%1 tokens").arg(tokens));
}

}  // namespace kvlens::ui
