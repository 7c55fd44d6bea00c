#pragma once
// The model panel: which HF model directory is loaded, on what device and in
// what dtype, load progress, and a summary of the loaded model.
#include <QWidget>

#include "core/model/device.h"
#include "core/run/model_handle.h"

class QLineEdit;
class QComboBox;
class QSpinBox;
class QProgressBar;
class QLabel;

namespace kvlens::ui {

class ModelPanel : public QWidget {
    Q_OBJECT
public:
    explicit ModelPanel(QWidget* parent = nullptr);

    void setDevices(const QStringList& devices);  // e.g. auto, cpu, cuda:0
    void setDirectory(const QString& dir);
    QString directory() const;
    void setStartDirectory(const QString& dir);   // where the open dialog starts
    RunSettings settings() const;
    void setProgress(int percent, const QString& stage);
    void setSummary(const ModelSummary& s);
    // A load that failed: says why beside the summary of the model still in
    // use (`inUse`, empty when none), and the directory field goes back to it.
    void setFailed(const QString& message, const QString& inUse);
    QString failureText() const;  // empty while the last load succeeded
    // The model's own attention window (Trace::slidingWindow; 0: none), shown
    // under the summary: keys older than that are invisible to every run.
    void setSlidingWindow(int64_t tokens);
    QString slidingWindowText() const;  // empty when the model has none

public Q_SLOTS:
    void chooseDirectory();  // the open dialog (Ctrl+O)
    void reload();

Q_SIGNALS:
    void loadRequested(const QString& dir, const kvlens::RunSettings& settings);

private:
    QLineEdit* m_dir;
    QComboBox* m_device;
    QComboBox* m_dtype;
    QSpinBox* m_threads;
    QProgressBar* m_progress;
    QLabel* m_summary;
    QLabel* m_window;
    QLabel* m_failure;
    QString m_startDir;
};

}  // namespace kvlens::ui
