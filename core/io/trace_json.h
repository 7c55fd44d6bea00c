#pragma once
// Traces as JSON (format "kvlens-trace", version 1; documented in docs/file-formats.md).
// Torch-free.
#include <string>

#include <nlohmann/json.hpp>

#include "core/run/trace.h"
#include "core/study/ranking.h"

namespace kvlens {

// One character per token position in a head's status string.
char tokenStatusChar(TokenStatus s);  // '.' unseen, 'h' held, 'k' kept by score, 's' sink, 'w' window, 'x' evicted

nlohmann::json traceToJson(const Trace& trace, bool withLayers = true);
nlohmann::json policySummaryJson(const PolicyTrace& p);
// The ranking (core/study/ranking.h): "reference_kv_bytes", "matched",
// "note", and "runs", one object per row in rank order.
nlohmann::json rankingJson(const Ranking& ranking);

}  // namespace kvlens
