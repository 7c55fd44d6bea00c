// The Help menu's texts of the main window: shortcuts (read from the menus
// themselves), the guide to what the window shows, and About.
#include <QApplication>
#include <QMenuBar>

#include "app/gui/main_window.h"
#include "core/model/device.h"

namespace kvlens::gui {

QString MainWindow::shortcutsText() const {
    QString rows;
    for (QAction* top : menuBar()->actions()) {
        if (!top->menu()) continue;
        for (QAction* a : top->menu()->actions())
            if (!a->shortcut().isEmpty())
                rows += QStringLiteral("<tr><td>%1</td><td>&nbsp;&nbsp;<b>%2</b></td><td>&nbsp;&nbsp;%3</td></tr>")
                            .arg(QString(top->text()).remove(u'&'), QString(a->text()).remove(u'&').toHtmlEscaped(),
                                 a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped());
    }
    return tr("<table>%1</table><p>In the heatmaps: the wheel zooms, dragging pans, a click selects a layer and "
              "head in the grids.</p>")
        .arg(rows);
}

QString MainWindow::guideText() const {
    return tr("<p><b>Columns</b>: the full cache (the reference) and each eviction policy, side by side, on the same "
              "prompt and the same decode steps.</p>"
              "<p><b>Token strip</b>: one square per token; its colour says what this run's cache did with it at the "
              "shown step in the selected layer and KV head (hover the legend's chips for each colour's meaning).</p>"
              "<p><b>Heatmap</b>: attention of each query (row) over the keys (columns) for the selected layer and "
              "query head; evicted keys are drawn pinkish grey, future keys white.</p>"
              "<p><b>Head grid</b>: the share of the full cache's attention each layer × query head still finds in "
              "this run's cache; click a cell to select it.</p>"
              "<p><b>Metrics</b>: per decode step, KL(full ‖ policy) of the next-token distributions and whether "
              "their top-1 tokens agree; retained attention mass per layer; KV memory held.</p>"
              "<p><b>Budget</b>: entries each layer × KV head may hold; drag a bar to change one layer.</p>");
}

QString MainWindow::aboutText() const {
    const QString model = m_controller->modelReady() ? QString::fromStdString(m_controller->model().directory) : tr("none");
    return tr("<p><b>KVLens %1</b> — a laboratory for KV-cache eviction in transformer language models.</p>"
              "<p>Qt %2 · LibTorch %3<br/>Model: %4</p>")
        .arg(QApplication::applicationVersion(), QString::fromLatin1(qVersion()),
             QString::fromStdString(libtorchVersion()), model.toHtmlEscaped());
}

}  // namespace kvlens::gui
