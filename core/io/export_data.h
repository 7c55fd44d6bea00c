#pragma once
// Data exports of a Trace (torch-free, kvlens_base): attention matrices,
// kept/evicted masks, scores, budgets and metrics as CSV, JSON or NPY, in
// the shapes a notebook expects. The GUI and `kvlens-cli export` both write
// through these functions; docs/file-formats.md documents the columns.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run/trace.h"

namespace kvlens {

// What to export from a trace.
enum class ExportTable {
    Attention,  // one policy's captured attention map: [T, T] query x key; kAfterQuery (-1) where the key
                // comes after the query (causally not visible), NaN where the policy did not hold it (evicted)
    Status,     // kept/evicted status of one policy, layer, KV head: one row per token
    Scores,     // the score and rank of each token (same rows as Status)
    Budgets,    // per policy x layer budget and entries held
    Metrics,    // per policy x decode step: KL, top-1, target log-prob, retained mass, output cosine
};

struct ExportSelection {
    size_t policy = 0;   // index into Trace::policies (0 = full)
    int64_t layer = 0;
    int64_t kvHead = 0;  // Status / Scores
};

// An attention cell whose key comes after its query: no weight can be
// negative, so -1 cannot be mistaken for one, and it is not NaN, which
// marks a key the policy did not hold.
inline constexpr float kAfterQuery = -1.0f;

// CSV text: "# " lines of metadata (format, table, model shape, policy,
// layer, head, step, and what the special cells mean), a header line, then
// rows; NaN written as an empty field; labels quoted (pandas:
// read_csv(f, comment="#")). Throws ArgumentError for a selection outside
// the trace or an attention map that was not captured.
std::string exportCsv(const Trace& trace, ExportTable table, const ExportSelection& sel = {});
// The same table as JSON ({"columns": [...], "rows": [[...], ...]} with
// NaN as null), plus the context: model shape, policy label, layer, head, step.
nlohmann::json exportJson(const Trace& trace, ExportTable table, const ExportSelection& sel = {});

// NPY (format 1.0, little-endian float32, C order) for large matrices.
void writeNpy(const std::filesystem::path& file, const std::vector<float>& data, const std::vector<int64_t>& shape);
// Reads back what writeNpy writes (float32, C order). Throws FormatError.
std::vector<float> readNpy(const std::filesystem::path& file, std::vector<int64_t>* shape);
// The attention map of one policy as NPY [T, T] (kAfterQuery after the query, NaN where not held).
void writeAttentionNpy(const std::filesystem::path& file, const Trace& trace, size_t policy);

// "attention", "status", "scores", "budgets", "metrics" (throws ArgumentError otherwise).
ExportTable parseExportTable(const std::string& name);

}  // namespace kvlens
