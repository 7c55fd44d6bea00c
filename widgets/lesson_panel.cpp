#include "widgets/lesson_panel.h"

#include <QButtonGroup>
#include <QEvent>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QTimer>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

namespace kvlens::ui {
namespace {

// A token as a student reads it: the word, its leading space shown as a
// gap ("▁the" and " the" read "the"), control characters named.
QString readable(const std::string& label) {
    QString s = QString::fromStdString(label);
    s.replace(QChar(0x2581), QChar(' '));
    s = s.trimmed();
    if (s.isEmpty()) return QStringLiteral("␣");
    if (s == QLatin1String("<s>") || s == QLatin1String("<|begin_of_text|>")) return QStringLiteral("BOS");
    return s;
}

}  // namespace

LessonPanel::LessonPanel(QWidget* parent)
    : QWidget(parent),
      m_title(new QLabel(this)),
      m_progressText(new QLabel(this)),
      m_progress(new QProgressBar(this)),
      m_text(new QLabel(this)),
      m_questionBox(new QWidget(this)),
      m_ask(new QLabel(m_questionBox)),
      m_choicesLayout(new QVBoxLayout),
      m_choices(new QButtonGroup(this)),
      m_picker(new QListWidget(m_questionBox)),
      m_reveal(new QPushButton(tr("Reveal"), this)),
      m_answer(new QLabel(m_questionBox)),
      m_previous(new QPushButton(tr("Previous"), this)),
      m_next(new QPushButton(tr("Next"), this)),
      m_restart(new QPushButton(tr("Restart"), this)),
      m_presenter(new QToolButton(this)),
      m_close(new QPushButton(tr("Close"), this)) {
    QFont big = m_title->font();
    big.setBold(true);
    big.setPointSizeF(big.pointSizeF() * 1.25);
    m_title->setFont(big);
    m_title->setWordWrap(true);
    m_progressText->setWordWrap(true);
    m_title->setText(tr("No lesson open — Lessons menu"));
    m_progress->setTextVisible(false);
    m_progress->setMaximumHeight(6);
    m_text->setWordWrap(true);
    m_text->setTextFormat(Qt::PlainText);
    m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_text->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_picker->setMinimumHeight(90);
    m_ask->setWordWrap(true);
    QFont bold = m_ask->font();
    bold.setBold(true);
    m_ask->setFont(bold);
    m_picker->setViewMode(QListView::IconMode);
    m_picker->setFlow(QListView::LeftToRight);
    m_picker->setWrapping(true);
    m_picker->setResizeMode(QListView::Adjust);
    m_picker->setMovement(QListView::Static);
    m_picker->setSpacing(2);
    m_picker->setWordWrap(false);
    // A scroll bar that came and went would change the width and re-wrap the rows under the mouse.
    m_picker->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
    m_picker->setTextElideMode(Qt::ElideNone);
    m_picker->setSelectionMode(QAbstractItemView::MultiSelection);
    m_picker->setToolTip(tr("Click the tokens you think survive, then Reveal"));
    m_answer->setWordWrap(true);
    m_answer->setTextFormat(Qt::RichText);
    m_presenter->setText(tr("Presenter"));
    m_presenter->setCheckable(true);
    m_presenter->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    m_presenter->setToolTip(tr("Presenter mode: large text, thick lines, high contrast, fewer panels"));
    m_close->setToolTip(tr("Close the lesson: the docks go back to how they were before it"));
    m_reveal->setToolTip(tr("Show the answer (Ctrl+Return)"));

    auto* q = new QVBoxLayout(m_questionBox);
    q->setContentsMargins(0, 4, 0, 0);
    q->addWidget(m_ask);
    q->addLayout(m_choicesLayout);
    q->addWidget(m_picker, 1);
    q->addWidget(m_answer);
    // What the step says scrolls (wrapped to the width); the buttons stay
    // below it, in short rows so that the dock stays narrow at presenter sizes.
    auto* content = new QWidget;
    auto* text = new QVBoxLayout(content);
    text->setContentsMargins(6, 6, 6, 6);
    text->addWidget(m_title);
    text->addWidget(m_progressText);
    text->addWidget(m_progress);
    text->addWidget(m_text);
    text->addWidget(m_questionBox, 1);
    m_scroll = new QScrollArea(this);
    m_scroll->setWidget(content);
    m_scroll->setWidgetResizable(true);
    m_scroll->setFrameShape(QFrame::NoFrame);
    m_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // The buttons share the dock's width rather than set it: at presenter
    // sizes their texts would otherwise widen the window past a 1280 screen.
    for (QWidget* b : std::initializer_list<QWidget*>{m_previous, m_next, m_reveal, m_restart, m_presenter, m_close})
        b->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    auto* nav = new QGridLayout;
    nav->setContentsMargins(6, 0, 6, 6);
    nav->addWidget(m_previous, 0, 0);
    nav->addWidget(m_next, 0, 1);
    nav->addWidget(m_reveal, 1, 0);
    nav->addWidget(m_restart, 1, 1);
    nav->addWidget(m_presenter, 2, 0);
    nav->addWidget(m_close, 2, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_scroll, 1);
    layout->addLayout(nav);

    connect(m_previous, &QPushButton::clicked, this, [this] { Q_EMIT stepRequested(m_step - 1); });
    connect(m_next, &QPushButton::clicked, this, [this] { Q_EMIT stepRequested(m_step + 1); });
    connect(m_restart, &QPushButton::clicked, this, [this] { Q_EMIT stepRequested(0); });
    connect(m_reveal, &QPushButton::clicked, this, &LessonPanel::reveal);
    connect(m_presenter, &QToolButton::toggled, this, &LessonPanel::presenterToggled);
    connect(m_close, &QPushButton::clicked, this, &LessonPanel::closeRequested);
    connect(m_picker, &QListWidget::itemSelectionChanged, this, &LessonPanel::picksChanged);
    showStep(0);
}

void LessonPanel::setLesson(const Lesson& lesson) {
    m_lesson = lesson;
    m_title->setText(lesson.steps.empty() ? tr("No lesson open — Lessons menu") : QString::fromStdString(lesson.title));
    m_title->setToolTip(QString::fromStdString(lesson.summary));
    showStep(0);
}

const LessonStep* LessonPanel::currentStep() const {
    return m_step >= 0 && m_step < static_cast<int>(m_lesson.steps.size()) ? &m_lesson.steps[static_cast<size_t>(m_step)]
                                                                          : nullptr;
}

void LessonPanel::clearQuestion() {
    for (QAbstractButton* b : m_choices->buttons()) m_choices->removeButton(b);
    for (QLabel* text : m_choiceTexts) delete text->parentWidget();  // the row: its button and its text
    m_choiceTexts.clear();
    {
        const QSignalBlocker quiet(m_picker);  // a new step's tokens come with its run
        m_picker->clear();
    }
    m_answer->clear();
    m_answer->hide();
    m_revealed = false;
}

void LessonPanel::showStep(int index) {
    const int n = static_cast<int>(m_lesson.steps.size());
    m_step = std::clamp(index, 0, std::max(0, n - 1));
    clearQuestion();
    const LessonStep* s = currentStep();
    m_progress->setRange(0, std::max(1, n));
    m_progress->setValue(s ? m_step + 1 : 0);
    m_progressText->setText(progressText());
    m_text->setText(s ? QString::fromStdString(s->text) : QString());
    m_previous->setEnabled(s && m_step > 0);
    m_next->setEnabled(s && m_step + 1 < n);
    m_restart->setEnabled(s && m_step > 0);
    m_close->setEnabled(s);
    const bool asks = s && s->question;
    m_questionBox->setVisible(asks);
    m_reveal->setEnabled(asks);
    if (!asks) return;
    const LessonQuestion& q = *s->question;
    m_ask->setText(QString::fromStdString(q.ask));
    const bool choice = q.kind == LessonQuestion::Kind::Choice;
    m_picker->setVisible(!choice);
    if (choice)
        for (size_t i = 0; i < q.choices.size(); ++i) {
            // A radio button's own text does not wrap: the text is a label beside it.
            auto* row = new QWidget(m_questionBox);
            auto* b = new QRadioButton(row);
            auto* label = new QLabel(QString::fromStdString(q.choices[i]), row);
            b->setAccessibleName(label->text());
            label->setWordWrap(true);
            label->setTextFormat(Qt::PlainText);
            label->setBuddy(b);
            label->installEventFilter(this);
            auto* h = new QHBoxLayout(row);
            h->setContentsMargins(0, 0, 0, 0);
            h->addWidget(b, 0, Qt::AlignTop);
            h->addWidget(label, 1);
            m_choices->addButton(b, static_cast<int>(i));
            m_choicesLayout->addWidget(row);
            m_choiceTexts.push_back(label);
        }
}

bool LessonPanel::eventFilter(QObject* watched, QEvent* event) {
    // Installed on the choices' texts only.
    if (auto* label = qobject_cast<QLabel*>(watched); label && event->type() == QEvent::MouseButtonRelease)
        if (auto* b = qobject_cast<QAbstractButton*>(label->buddy())) b->setChecked(true);
    return QWidget::eventFilter(watched, event);
}

QString LessonPanel::progressText() const {
    const LessonStep* s = currentStep();
    if (!s) return {};
    return tr("Step %1 of %2 · %3").arg(m_step + 1).arg(m_lesson.steps.size()).arg(QString::fromStdString(s->title));
}

QString LessonPanel::stepText() const { return m_text->text(); }

void LessonPanel::setPickTokens(const std::vector<std::string>& labels, int64_t promptLength) {
    const std::vector<int64_t> keep = pickedTokens();
    const QSignalBlocker quiet(m_picker);  // one picksChanged when the list is whole, not one per item
    m_picker->clear();
    const int64_t n = std::min<int64_t>(promptLength, static_cast<int64_t>(labels.size()));
    for (int64_t i = 0; i < n; ++i) {
        auto* item = new QListWidgetItem(readable(labels[static_cast<size_t>(i)]), m_picker);
        item->setData(Qt::UserRole, QVariant::fromValue<qint64>(i));
        item->setToolTip(tr("token %1: “%2”").arg(i).arg(QString::fromStdString(labels[static_cast<size_t>(i)])));
    }
    setPicked(keep);
}

int LessonPanel::pickTokenCount() const { return m_picker->count(); }

std::vector<int64_t> LessonPanel::pickedTokens() const {
    std::vector<int64_t> out;
    for (int i = 0; i < m_picker->count(); ++i)
        if (m_picker->item(i)->isSelected()) out.push_back(m_picker->item(i)->data(Qt::UserRole).toLongLong());
    return out;
}

void LessonPanel::setPicked(const std::vector<int64_t>& positions) {
    for (int i = 0; i < m_picker->count(); ++i) {
        const int64_t p = m_picker->item(i)->data(Qt::UserRole).toLongLong();
        m_picker->item(i)->setSelected(std::find(positions.begin(), positions.end(), p) != positions.end());
    }
}

bool LessonPanel::togglePick(int64_t position) {
    const LessonStep* s = currentStep();
    if (!s || !s->question || s->question->kind != LessonQuestion::Kind::Pick || m_revealed) return false;
    for (int i = 0; i < m_picker->count(); ++i)
        if (m_picker->item(i)->data(Qt::UserRole).toLongLong() == position) {
            m_picker->item(i)->setSelected(!m_picker->item(i)->isSelected());
            m_picker->scrollToItem(m_picker->item(i));
            return true;
        }
    return false;
}

int LessonPanel::chosenAnswer() const { return m_choices->checkedId(); }

void LessonPanel::choose(int option) {
    if (QAbstractButton* b = m_choices->button(option)) b->setChecked(true);
}

void LessonPanel::reveal() {
    const LessonStep* s = currentStep();
    if (!s || !s->question) return;
    const LessonQuestion& q = *s->question;
    if (q.kind == LessonQuestion::Kind::Choice && !q.measured()) showChoiceAnswer(q.answer, QString());
    Q_EMIT revealRequested();  // a Pick or a measured Choice is answered from the run
}

void LessonPanel::showChoiceAnswer(int answer, const QString& detail) {
    const LessonQuestion& q = *currentStep()->question;
    const int chosen = chosenAnswer();
    const QString right = QString::fromStdString(q.choices[static_cast<size_t>(answer)]).toHtmlEscaped();
    QString head;
    if (chosen == answer) head = tr("<b>Right:</b> %1.").arg(right);
    else if (chosen < 0) head = tr("<b>The answer:</b> %1.").arg(right);
    else head = tr("<b>Not quite</b> — the answer is: %1.").arg(right);
    for (size_t i = 0; i < m_choiceTexts.size(); ++i) {
        QFont f = m_choiceTexts[i]->font();
        f.setBold(static_cast<int>(i) == answer);
        m_choiceTexts[i]->setFont(f);
    }
    const QString measured = detail.isEmpty() ? QString() : QStringLiteral(" ") + detail.toHtmlEscaped();
    showAnswer(head + measured + QStringLiteral(" ") + QString::fromStdString(q.why).toHtmlEscaped());
}

void LessonPanel::showAnswer(const QString& text) {
    m_answer->setText(text);
    m_answer->show();
    m_revealed = true;
    m_reveal->setEnabled(false);
    QTimer::singleShot(0, m_scroll, [area = m_scroll, answer = m_answer] { area->ensureWidgetVisible(answer); });
}

QString LessonPanel::answerText() const {
    QTextDocument doc;
    doc.setHtml(m_answer->text());
    return doc.toPlainText();
}

void LessonPanel::setPresenter(bool on) {
    const QSignalBlocker block(m_presenter);
    m_presenter->setChecked(on);
}

}  // namespace kvlens::ui
