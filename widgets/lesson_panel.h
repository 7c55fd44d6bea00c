#pragma once
// The lesson dock: where a class is in a lesson (title, "Step 2 of 6",
// progress), the step's text, and its question — one of several choices,
// or "pick the tokens you think survive" from the prompt's tokens — with
// Reveal, which shows the answer and one sentence of why. Previous / Next /
// Restart / Close and Presenter mode ask the window (signals); the panel
// itself only shows the lesson (core/io/lesson_file.h) and what the class
// chose. The text, the choices and the tokens wrap to the dock's width and
// scroll; the buttons stay in view below them, and a pick never moves a
// token.
#include <QWidget>
#include <string>
#include <vector>

#include "core/io/lesson_file.h"

class QButtonGroup;
class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QScrollArea;
class QToolButton;
class QVBoxLayout;

namespace kvlens::ui {

class LessonPanel : public QWidget {
    Q_OBJECT
public:
    explicit LessonPanel(QWidget* parent = nullptr);

    void setLesson(const Lesson& lesson);  // shows its first step; an empty one: "no lesson"
    bool hasLesson() const { return !m_lesson.steps.empty(); }
    const Lesson& lesson() const { return m_lesson; }
    void showStep(int index);  // clamped; the question starts unanswered
    int step() const { return m_step; }
    const LessonStep* currentStep() const;

    // The tokens a Pick question offers: the prompt's, as the model reads them.
    void setPickTokens(const std::vector<std::string>& labels, int64_t promptLength);
    int pickTokenCount() const;
    std::vector<int64_t> pickedTokens() const;
    void setPicked(const std::vector<int64_t>& positions);
    // A token clicked in a strip: picked if it was not, else dropped (a
    // Pick question before Reveal; false when there is none to pick).
    bool togglePick(int64_t position);
    int chosenAnswer() const;  // a Choice question's checked option, -1 when none
    void choose(int option);

    // Reveal for a Choice question is worked out here; for a Pick question
    // the window computes it from the run and passes the text.
    // A measured Choice: the window passes the right choice, measured on
    // the run, and what was measured (`detail`, plain text).
    void showChoiceAnswer(int right, const QString& detail);
    void showAnswer(const QString& text);
    // What the Reveal button does (a Choice is answered here; revealRequested).
    void reveal();
    bool revealed() const { return m_revealed; }
    QString answerText() const;
    QString stepText() const;      // the step's text as shown (plain)
    QString progressText() const;  // "Step 2 of 6 · Heavy hitters"
    void setPresenter(bool on);    // the toggle's state, without a signal

Q_SIGNALS:
    void stepRequested(int index);
    void revealRequested();
    void presenterToggled(bool on);
    void closeRequested();
    void picksChanged();  // the class's picks, in the list or through togglePick

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;  // a choice's text checks its button

private:
    void clearQuestion();

    Lesson m_lesson;
    int m_step = 0;
    bool m_revealed = false;
    QLabel* m_title;
    QLabel* m_progressText;
    QProgressBar* m_progress;
    QLabel* m_text;
    QWidget* m_questionBox;
    QLabel* m_ask;
    QVBoxLayout* m_choicesLayout;
    QButtonGroup* m_choices;
    std::vector<QLabel*> m_choiceTexts;  // each beside its radio button, in a row of its own
    QListWidget* m_picker;
    QPushButton* m_reveal;
    QLabel* m_answer;
    QPushButton* m_previous;
    QPushButton* m_next;
    QPushButton* m_restart;
    QToolButton* m_presenter;
    QPushButton* m_close;
    QScrollArea* m_scroll;
};

}  // namespace kvlens::ui
