#pragma once
// Needle grids as data: JSON (format "kvlens-needle", version 1; documented
// in docs/cli.md) and CSV (one row per cell), and back from JSON.
#include <string>

#include <nlohmann/json.hpp>

#include "core/study/needle_grid.h"

namespace kvlens {

nlohmann::json needleGridToJson(const eval::NeedleGridResult& grid);
// Throws FormatError naming the field at fault.
eval::NeedleGridResult needleGridFromJson(const nlohmann::json& j);
// Header: context,depth,policy,budget,exact,overlap,samples,prompt_tokens
std::string needleGridToCsv(const eval::NeedleGridResult& grid);

}  // namespace kvlens
