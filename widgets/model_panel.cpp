#include "widgets/model_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace kvlens::ui {

ModelPanel::ModelPanel(QWidget* parent)
    : QWidget(parent),
      m_dir(new QLineEdit(this)),
      m_device(new QComboBox(this)),
      m_dtype(new QComboBox(this)),
      m_threads(new QSpinBox(this)),
      m_progress(new QProgressBar(this)),
      m_summary(new QLabel(this)),
      m_window(new QLabel(this)),
      m_failure(new QLabel(this)) {
    m_dir->setPlaceholderText(tr("HF model directory"));
    m_dir->setToolTip(tr("config.json, *.safetensors and tokenizer.json of a Llama-family or GPT-2 model"));
    auto* open = new QPushButton(tr("Open…"), this);
    open->setToolTip(tr("Open a model directory (Ctrl+O)"));
    auto* load = new QPushButton(tr("Load"), this);
    load->setToolTip(tr("Load the directory with this device and dtype"));
    auto* dirRow = new QHBoxLayout;
    dirRow->addWidget(m_dir, 1);
    dirRow->addWidget(open);
    m_device->addItems({"auto", "cpu"});
    m_device->setEditable(true);
    m_dtype->addItems({"auto", "f32", "f16", "bf16"});
    m_threads->setRange(0, 256);
    m_threads->setSpecialValueText(tr("default"));
    auto* form = new QFormLayout;
    form->addRow(tr("device"), m_device);
    form->addRow(tr("dtype"), m_dtype);
    form->addRow(tr("CPU threads"), m_threads);
    m_progress->setRange(0, 100);
    m_progress->setValue(0);
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(dirRow);
    layout->addLayout(form);
    layout->addWidget(load);
    layout->addWidget(m_progress);
    layout->addWidget(m_failure);
    layout->addWidget(m_summary);
    m_failure->setWordWrap(true);
    m_failure->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_failure->setStyleSheet(QStringLiteral("color: #B03000"));
    m_failure->hide();
    m_window->setWordWrap(true);
    m_window->setStyleSheet(QStringLiteral("color: #8A5A00"));
    m_window->hide();
    layout->addWidget(m_window);
    layout->addStretch(1);
    connect(open, &QPushButton::clicked, this, &ModelPanel::chooseDirectory);
    connect(load, &QPushButton::clicked, this, &ModelPanel::reload);
    connect(m_dir, &QLineEdit::returnPressed, this, &ModelPanel::reload);
}

void ModelPanel::setDevices(const QStringList& devices) {
    const QString current = m_device->currentText();
    m_device->clear();
    m_device->addItems(devices);
    m_device->setCurrentText(current);
}

void ModelPanel::setDirectory(const QString& dir) { m_dir->setText(dir); }
QString ModelPanel::directory() const { return m_dir->text().trimmed(); }
void ModelPanel::setStartDirectory(const QString& dir) { m_startDir = dir; }

RunSettings ModelPanel::settings() const {
    RunSettings s;
    s.device = m_device->currentText().trimmed().toStdString();
    s.dtype = m_dtype->currentText().toStdString();
    s.threads = m_threads->value();
    return s;
}

void ModelPanel::setProgress(int percent, const QString& stage) {
    m_progress->setValue(percent);
    m_progress->setFormat(QStringLiteral("%1 (%p%)").arg(stage));
}

void ModelPanel::setSummary(const ModelSummary& s) {
    setSlidingWindow(0);  // known once the new model's first trace arrives
    m_failure->hide();
    m_dir->setText(QString::fromStdString(s.directory));
    setProgress(100, tr("loaded"));
    m_summary->setText(tr("%1 · %2 layers · %3 query heads / %4 KV heads · head dim %5\n"
                          "%6 M parameters · vocabulary %7 · %8/%9 · KV %10 B per token")
                           .arg(QString::fromStdString(s.family))
                           .arg(s.layers)
                           .arg(s.heads)
                           .arg(s.kvHeads)
                           .arg(s.headDim)
                           .arg(static_cast<double>(s.parameters) / 1e6, 0, 'f', 2)
                           .arg(s.vocabSize)
                           .arg(QString::fromStdString(s.device), QString::fromStdString(s.dtype))
                           .arg(s.kvBytesPerToken));
}

void ModelPanel::setFailed(const QString& message, const QString& inUse) {
    const QString tried = directory();
    m_failure->setText(inUse.isEmpty() ? tr("%1 did not load: %2").arg(tried, message)
                                       : tr("%1 did not load: %2\nStill in use: %3").arg(tried, message, inUse));
    m_failure->show();
    if (inUse.isEmpty()) {
        setProgress(0, tr("no model"));
        m_summary->clear();
    } else {
        m_dir->setText(inUse);  // the field names the model the views show
        setProgress(100, tr("loaded"));
    }
}

QString ModelPanel::failureText() const { return m_failure->isHidden() ? QString() : m_failure->text(); }


void ModelPanel::setSlidingWindow(int64_t tokens) {
    m_window->setText(tokens > 0 ? tr("The model attends within a sliding window of %1 tokens: older keys are "
                                      "invisible to every run, the full cache's too.")
                                       .arg(tokens)
                                 : QString());
    m_window->setVisible(tokens > 0);
}

QString ModelPanel::slidingWindowText() const { return m_window->text(); }

void ModelPanel::chooseDirectory() {
    const QString start = directory().isEmpty() ? m_startDir : directory();
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a Hugging Face model directory"), start);
    if (dir.isEmpty()) return;
    m_dir->setText(dir);
    reload();
}

void ModelPanel::reload() {
    if (directory().isEmpty()) return;
    Q_EMIT loadRequested(directory(), settings());
}

}  // namespace kvlens::ui
