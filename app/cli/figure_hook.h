#pragma once
// Figures from the CLI: `kvlens-cli export --out FILE.png|svg|pdf` renders
// the same view the GUI exports. The rendering lives in widgets/ (Qt), so
// kvlens-cli built without the GUI (KVLENS_GUI=OFF) has a stand-in that
// says so; a GUI build links the Qt implementation (figure_hook_qt.cpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/run/trace.h"

namespace kvlens::eval {
struct NeedleGridResult;
}
namespace kvlens::sweep {
struct FidelityCurve;
}

namespace kvlens::cli {

struct FigureRequest {
    std::shared_ptr<const Trace> trace;
    size_t policy = 0;       // index into trace->policies
    int64_t layer = 0, head = 0;  // query head of the attention map
    double scale = 2.0;      // PNG device pixels per point
    std::string modelName;   // for the title
    std::string colourScale = "power";  // linear | log | power
    std::string kind = "attention";     // attention (heatmap) | status (every policy's token strip)
};

// Writes FILE.png / .svg / .pdf. Throws ArgumentError when this build cannot.
void exportFigure(const FigureRequest& request, const std::string& file);
// One figure with a grid of attention panels (export all): `columns` per row
// (≤ 0: about square), one colour range and colour bar, `title` on top.
void exportGridFigure(const std::vector<FigureRequest>& panels, int columns, const std::string& title,
                      const std::string& file);
// The needle grid as the GUI's Export needle grid draws it: one context ×
// depth heatmap per policy and budget, colour = exact match, shared scale.
void exportNeedleFigure(const eval::NeedleGridResult& grid, double scale, const std::string& file);
// A merged sweep's fidelity against budget (widgets/fidelity_figure.h).
void exportFidelityFigure(const std::vector<sweep::FidelityCurve>& curves, const std::string& title, double scale,
                          const std::string& file);
// False in a build without the GUI's widgets (every export above then throws ArgumentError).
bool figuresAvailable();

}  // namespace kvlens::cli
