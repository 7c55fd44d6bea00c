#pragma once
// A torch-free way to load a model and describe it, for code that must not
// see ATen (the GUI: its headers are compiled with Qt, whose `slots` macro
// clashes with ATen). The Model itself stays opaque here.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/model/device.h"

namespace kvlens {

class Model;

struct ModelSummary {
    std::string directory;
    std::string family;        // "llama", "gpt2", ...
    int64_t layers = 0;
    int64_t heads = 0;         // query heads
    int64_t kvHeads = 0;
    int64_t headDim = 0;
    int64_t vocabSize = 0;
    int64_t parameters = 0;
    std::string device;        // "cpu", "cuda:0"
    std::string dtype;         // "f32", "bf16", ...
    uint64_t kvBytesPerToken = 0;  // K and V of every layer and KV head
};

// Model::load behind a torch-free signature; throws what Model::load throws
// (FormatError / ModelError / ArgumentError).
std::shared_ptr<const Model> loadModel(const std::filesystem::path& dir, const RunSettings& settings);
ModelSummary summarizeModel(const Model& model);

}  // namespace kvlens
