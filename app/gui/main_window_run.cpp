// The Run menu's dialogs: Q-Filters' calibration text, and the memory a run
// may plan for.
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QMessageBox>
#include <QStatusBar>

#include "app/gui/main_window.h"
#include "core/error.h"
#include "core/eval/kv_memory.h"
#include "core/run/memory_guard.h"

namespace kvlens::gui {

void MainWindow::chooseCalibration() {
    const QString file = QFileDialog::getOpenFileName(this, tr("A text for Q-Filters to learn its filters from"),
                                                      QString(), tr("Text (*.txt *.md);;All files (*)"));
    if (file.isEmpty()) return;
    QFile in(file);
    constexpr qint64 kMaxBytes = 64 << 20;
    if (!in.open(QIODevice::ReadOnly) || in.size() > kMaxBytes) {
        QMessageBox::warning(this, tr("Calibrate Q-Filters"),
                             in.isOpen() ? tr("%1 is larger than 64 MiB; choose a shorter text.").arg(file)
                                         : tr("%1 cannot be read: %2").arg(file, in.errorString()));
        return;
    }
    const QString text = QString::fromUtf8(in.readAll()).trimmed();
    if (text.isEmpty()) {
        QMessageBox::warning(this, tr("Calibrate Q-Filters"), tr("%1 holds no text to learn from.").arg(file));
        return;
    }
    m_controller->setCalibration(text);
    statusBar()->showMessage(
        tr("Q-Filters learns its filters from %1 (%2 characters)").arg(QFileInfo(file).fileName()).arg(text.size()), 8000);
}

QString MainWindow::setMemoryBudget(const QString& text) {
    quint64 bytes = 0;
    try {
        if (!text.trimmed().isEmpty()) bytes = parseMemorySize(text.trimmed().toStdString(), "the memory budget");
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    m_settings.memoryBudget.set(text.trimmed());
    m_controller->setMemoryBudget(bytes);
    return {};
}

void MainWindow::chooseMemoryBudget() {
    const QString current = m_settings.memoryBudget.get();
    bool ok = false;
    const QString text = QInputDialog::getText(
        this, tr("Memory budget"),
        tr("The memory a run may plan for, such as 8G or 512M; empty: half the physical memory (%1 now).\n"
           "Past it the heatmaps keep the latest queries, and a run that cannot fit is refused.")
            .arg(QString::fromStdString(formatBytes(defaultMemoryBudget()))),
        QLineEdit::Normal, current, &ok);
    if (!ok) return;
    const QString error = setMemoryBudget(text);
    if (!error.isEmpty()) {
        QMessageBox::warning(this, tr("Memory budget"), error);
        return;
    }
    statusBar()->showMessage(text.trimmed().isEmpty() ? tr("Memory budget: half the physical memory")
                                                      : tr("Memory budget: %1").arg(text.trimmed()),
                             6000);
}

}  // namespace kvlens::gui
