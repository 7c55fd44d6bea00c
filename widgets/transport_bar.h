#pragma once
// Transport over the decode steps of the current run: first / previous /
// play-pause / next / last, a scrub slider, and how many decode steps to run.
#include <QWidget>

class QSlider;
class QLabel;
class QSpinBox;
class QToolButton;
class QTimer;
class QCheckBox;

namespace kvlens::ui {

class TransportBar : public QWidget {
    Q_OBJECT
public:
    explicit TransportBar(QWidget* parent = nullptr);

    void setAvailable(int steps);   // steps 0 .. steps-1 can be shown
    void setStep(int step);         // moves the slider without emitting
    int step() const;
    void setDecodeSteps(int n);     // without emitting
    int decodeSteps() const;
    bool playing() const;
    bool freeRunning() const;
    void setFreeRunning(bool freeRunning);  // without emitting (opening a session)

public Q_SLOTS:
    void togglePlay();
    void stepBy(int delta);

Q_SIGNALS:
    void stepChanged(int step);
    void decodeStepsChanged(int n);
    // Teacher-forced (every policy reads full's tokens: the fair comparison)
    // or free-running (each policy generates its own text).
    void freeRunningChanged(bool freeRunning);

private:
    void updateLabel();

    QToolButton* m_play;
    QSlider* m_slider;
    QLabel* m_label;
    QSpinBox* m_steps;
    QCheckBox* m_free;
    QTimer* m_timer;
};

}  // namespace kvlens::ui
