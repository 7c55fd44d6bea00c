#include "app/cli/figure_hook.h"

#include "core/error.h"

namespace kvlens::cli {
namespace {
[[noreturn]] void noFigures(const std::string& file) {
    throw ArgumentError("cannot write " + file + ": figures (png, svg, pdf) are rendered by the GUI's widgets, which this "
                        "kvlens-cli was built without; data formats work here (csv, json, npy)");
}
}  // namespace

void exportFigure(const FigureRequest&, const std::string& file) { noFigures(file); }

void exportGridFigure(const std::vector<FigureRequest>&, int, const std::string&, const std::string& file) {
    noFigures(file);
}

void exportNeedleFigure(const eval::NeedleGridResult&, double, const std::string& file) { noFigures(file); }

void exportFidelityFigure(const std::vector<sweep::FidelityCurve>&, const std::string&, double, const std::string& file) {
    noFigures(file);
}

bool figuresAvailable() { return false; }

}  // namespace kvlens::cli
