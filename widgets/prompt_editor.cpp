#include "widgets/prompt_editor.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace kvlens::ui {

PromptEditor::PromptEditor(QWidget* parent)
    : QWidget(parent), m_edit(new QPlainTextEdit(this)), m_examples(new QComboBox(this)), m_count(new QLabel(this)) {
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Example"), this));
    row->addWidget(m_examples, 1);
    row->addWidget(m_count);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(row);
    layout->addWidget(m_edit, 1);
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
void PromptEditor::setTokenCount(int tokens) { m_count->setText(tr("%1 tokens").arg(tokens)); }

}  // namespace kvlens::ui
