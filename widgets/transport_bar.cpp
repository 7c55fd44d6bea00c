#include "widgets/transport_bar.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QStyle>
#include <QTimer>
#include <QToolButton>

namespace kvlens::ui {
namespace {

constexpr int kPlayIntervalMs = 350;

}  // namespace

TransportBar::TransportBar(QWidget* parent)
    : QWidget(parent),
      m_play(new QToolButton(this)),
      m_slider(new QSlider(Qt::Horizontal, this)),
      m_label(new QLabel(this)),
      m_steps(new QSpinBox(this)),
      m_free(new QCheckBox(tr("free-running"), this)),
      m_timer(new QTimer(this)) {
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    auto button = [&](QStyle::StandardPixmap icon, const QString& tip, auto slot) {
        auto* b = new QToolButton(this);
        b->setIcon(style()->standardIcon(icon));
        b->setToolTip(tip);
        connect(b, &QToolButton::clicked, this, slot);
        layout->addWidget(b);
        return b;
    };
    button(QStyle::SP_MediaSkipBackward, tr("First step (the prompt)"), [this] { stepBy(-m_slider->maximum()); });
    button(QStyle::SP_MediaSeekBackward, tr("Previous step (←)"), [this] { stepBy(-1); });
    m_play->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
    m_play->setToolTip(tr("Play / pause through the decode steps (Space)"));
    connect(m_play, &QToolButton::clicked, this, &TransportBar::togglePlay);
    layout->addWidget(m_play);
    button(QStyle::SP_MediaSeekForward, tr("Next step (→)"), [this] { stepBy(1); });
    button(QStyle::SP_MediaSkipForward, tr("Last step"), [this] { stepBy(m_slider->maximum()); });
    m_slider->setRange(0, 0);
    m_slider->setMinimumWidth(120);
    m_slider->setToolTip(tr("Scrub through the decode steps (0: the prompt has been read)"));
    layout->addWidget(m_slider, 1);
    layout->addWidget(m_label);
    layout->addWidget(new QLabel(tr("decode steps"), this));
    m_steps->setToolTip(tr("How many tokens every run decodes after the prompt"));
    m_steps->setRange(0, 4096);
    m_steps->setValue(16);
    m_steps->setKeyboardTracking(false);
    layout->addWidget(m_steps);
    m_free->setToolTip(tr("Off: every policy reads the full cache's tokens (teacher-forced, the fair comparison). "
                          "On: each policy generates its own text."));
    layout->addWidget(m_free);
    connect(m_free, &QCheckBox::toggled, this, &TransportBar::freeRunningChanged);
    m_timer->setInterval(kPlayIntervalMs);
    connect(m_timer, &QTimer::timeout, this, [this] {
        if (m_slider->value() >= m_slider->maximum()) togglePlay();  // stop at the end
        else stepBy(1);
    });
    connect(m_slider, &QSlider::valueChanged, this, [this](int v) {
        updateLabel();
        Q_EMIT stepChanged(v);
    });
    connect(m_steps, qOverload<int>(&QSpinBox::valueChanged), this, &TransportBar::decodeStepsChanged);
    updateLabel();
}

void TransportBar::setAvailable(int steps) {
    const QSignalBlocker block(m_slider);
    m_slider->setRange(0, std::max(0, steps - 1));
    updateLabel();
}

void TransportBar::setStep(int step) {
    const QSignalBlocker block(m_slider);
    m_slider->setValue(step);
    updateLabel();
}

int TransportBar::step() const { return m_slider->value(); }

void TransportBar::setDecodeSteps(int n) {
    const QSignalBlocker block(m_steps);
    m_steps->setValue(n);
}

int TransportBar::decodeSteps() const { return m_steps->value(); }

void TransportBar::setFreeRunning(bool freeRunning) {
    const QSignalBlocker block(m_free);
    m_free->setChecked(freeRunning);
}
bool TransportBar::playing() const { return m_timer->isActive(); }
bool TransportBar::freeRunning() const { return m_free->isChecked(); }

void TransportBar::togglePlay() {
    if (m_timer->isActive()) {
        m_timer->stop();
    } else {
        if (m_slider->value() >= m_slider->maximum()) m_slider->setValue(0);  // replay from the prompt
        m_timer->start();
    }
    m_play->setIcon(style()->standardIcon(m_timer->isActive() ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
}

void TransportBar::stepBy(int delta) { m_slider->setValue(std::clamp(m_slider->value() + delta, 0, m_slider->maximum())); }

void TransportBar::updateLabel() {
    m_label->setText(tr("step %1 / %2").arg(m_slider->value()).arg(m_slider->maximum()));
}

}  // namespace kvlens::ui
