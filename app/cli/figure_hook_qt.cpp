// Figures for kvlens-cli through widgets/figure.h — the renderer the GUI's
// exports use — on the offscreen platform, so no display is needed. Built
// into its own library (app/CMakeLists.txt): kvlens-cli's other sources keep
// the core's precompiled header and never see a Qt header.
#include <QApplication>
#include <QDir>
#include <sys/stat.h>
#include <unistd.h>

#include "app/cli/figure_hook.h"
#include "core/error.h"
#include "widgets/fidelity_figure.h"
#include "widgets/figure.h"
#include "widgets/needle_view.h"

namespace kvlens::cli {
namespace {

// One application for the process (export-all writes many figures), a
// QApplication because the needle grid is drawn by its widget; left alive
// until exit, as the CLI does not run an event loop.
void ensureGuiApp() {
    if (QCoreApplication::instance()) return;
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    // Headless shells often have no XDG_RUNTIME_DIR; give Qt the private one
    // it would pick itself, so it does not warn on every export.
    if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
        const QByteArray dir = QDir::tempPath().toLocal8Bit() + "/runtime-" + QByteArray::number(getuid());
        ::mkdir(dir.constData(), 0700);
        qputenv("XDG_RUNTIME_DIR", dir);
    }
    static int argc = 1;
    static char name[] = "kvlens-cli";
    static char* argv[] = {name, nullptr};
    new QApplication(argc, argv);
}

ui::FigureView viewOf(const FigureRequest& r) {
    if (!r.trace) throw ArgumentError("no trace to draw");
    if (r.policy >= r.trace->policies.size()) throw ArgumentError("no run " + std::to_string(r.policy) + " in the trace");
    if (r.colourScale != "linear" && r.colourScale != "log" && r.colourScale != "power")
        throw ArgumentError("--colour-scale: '" + r.colourScale + "' is not linear, log or power");
    ui::FigureView v;
    v.trace = r.trace;
    v.policy = static_cast<int>(r.policy);
    v.layer = r.layer;
    v.head = r.head;
    v.scale = ui::colourScaleFromName(QString::fromStdString(r.colourScale));
    v.model = QString::fromStdString(r.modelName);
    return v;
}

void write(const std::string& file, const QSizeF& size, double scale, const ui::FigurePainter& paint,
           const QString& title) {
    const QString error = ui::writeFigure(QString::fromStdString(file), size, scale, paint, title);
    if (!error.isEmpty()) throw ArgumentError(error.toStdString());
}

}  // namespace

void exportFigure(const FigureRequest& request, const std::string& file) {
    ensureGuiApp();
    const ui::FigureView v = viewOf(request);
    if (request.kind == "status") {
        write(file, ui::statusFigureSize(v), request.scale,
              [&v](QPainter& p, const QRectF& area) { ui::paintStatusFigure(p, area, v); }, ui::figureTitle(v));
        return;
    }
    if (request.kind != "attention")
        throw ArgumentError("a figure shows attention or status, not '" + request.kind + "'");
    write(file, ui::attentionFigureSize(v), request.scale,
          [&v](QPainter& p, const QRectF& area) { ui::paintAttentionFigure(p, area, v); }, ui::figureTitle(v));
}

void exportGridFigure(const std::vector<FigureRequest>& panels, int columns, const std::string& title,
                      const std::string& file) {
    ensureGuiApp();
    std::vector<ui::FigureView> views;
    for (const auto& r : panels) views.push_back(viewOf(r));
    const QString t = QString::fromStdString(title);
    const double scale = panels.empty() ? 2.0 : panels.front().scale;
    write(file, ui::gridFigureSize(static_cast<int>(views.size()), columns), scale,
          [&](QPainter& p, const QRectF& area) { ui::paintGridFigure(p, area, views, columns, t); }, t);
}

void exportNeedleFigure(const eval::NeedleGridResult& grid, double scale, const std::string& file) {
    ensureGuiApp();
    ui::NeedleView view;
    view.setResult(std::make_shared<const eval::NeedleGridResult>(grid));
    const QString error = ui::writeNeedleFigure(QString::fromStdString(file), view, scale, QString::fromStdString(grid.model));
    if (!error.isEmpty()) throw ArgumentError(error.toStdString());
}

void exportFidelityFigure(const std::vector<sweep::FidelityCurve>& curves, const std::string& title, double scale,
                          const std::string& file) {
    ensureGuiApp();
    const QString t = QString::fromStdString(title);
    write(file, ui::fidelityFigureSize(), scale,
          [&](QPainter& p, const QRectF& area) { ui::paintFidelityFigure(p, area, curves, t); }, t);
}

bool figuresAvailable() { return true; }

}  // namespace kvlens::cli
