#pragma once
// KV memory of one model under the KV-sharing designs (issue 22): heads
// sharing K/V within a layer (MHA, the model's own GQA, MQA) and layers
// sharing it (CLA: every k consecutive layers read one layer's K/V; YOCO:
// the second half of the layers reads the first half's), each alone or with
// an eviction budget on top. Eviction and sharing multiply: bytes held =
// 2 (K and V) x layers that store K/V x KV heads x head size x element
// bytes x tokens held. Torch-free (kvlens_base): the CLI's `memory` and the
// GUI's memory view compute the same numbers.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/policy/budget.h"

namespace kvlens {

struct KvShape {
    int64_t layers = 0, heads = 0, kvHeads = 0, headDim = 0;
    uint64_t elementBytes = 4;  // f32 4, bf16/f16 2
};

struct KvDesign {
    std::string id;           // "mha", "gqa", "mqa", "cla2", "cla3", "yoco"
    std::string name;         // "MHA", "GQA (the model's own: 3 KV heads)", ...
    std::string explanation;  // one sentence: who shares what
    int64_t storedLayers = 0; // layers whose K/V is stored
    int64_t kvHeads = 0;      // K/V heads stored per such layer
    bool isModel = false;     // the design the model was trained with
    uint64_t bytesPerToken(const KvShape& s) const {
        return kvBytesPerToken(storedLayers, kvHeads, s.headDim, s.elementBytes);
    }
};

// MHA, the model's own GQA (named MHA or MQA when it is one of those, and then
// listed once), MQA, CLA with k = 2 and 3, YOCO.
std::vector<KvDesign> kvDesigns(const KvShape& shape);

struct KvMemoryRow {
    KvDesign design;
    std::vector<uint64_t> fullBytes;    // per context: every token held
    std::vector<uint64_t> budgetBytes;  // per context: min(context, budget) tokens held (empty without a budget)
};

// Every design at every context length; `budget` (tokens or % of the
// context) gives the eviction column, absent when `withBudget` is false.
std::vector<KvMemoryRow> kvMemoryTable(const KvShape& shape, const std::vector<int64_t>& contexts, bool withBudget,
                                       const BudgetSpec& budget);

// "1.5 GiB", "96.0 KiB", "512 B".
std::string formatBytes(uint64_t bytes);

// A memory budget as a user types it: "8G", "512M", "1.5GiB", "64MiB" (K, M,
// G, T: powers of 1024, with or without "iB"), or plain bytes. From 64 MiB to
// 1 PiB; anything else is an ArgumentError naming `what` and the text.
uint64_t parseMemorySize(const std::string& text, const std::string& what = "--memory-budget");


}  // namespace kvlens
