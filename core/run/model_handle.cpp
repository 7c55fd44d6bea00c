#include "core/run/model_handle.h"

#include <ATen/ATen.h>

#include "core/model/device_internal.h"
#include "core/model/model.h"

namespace kvlens {

std::shared_ptr<const Model> loadModel(const std::filesystem::path& dir, const RunSettings& settings) {
    return std::shared_ptr<const Model>(Model::load(dir, settings));
}

ModelSummary summarizeModel(const Model& model) {
    const ModelConfig& c = model.config();
    ModelSummary s;
    s.directory = model.directory().string();
    s.family = familyName(c.family);
    s.layers = c.numLayers;
    s.heads = c.numHeads;
    s.kvHeads = c.numKvHeads;
    s.headDim = c.headDim;
    s.vocabSize = c.vocabSize;
    s.parameters = model.parameterCount();
    s.device = model.device().str();
    s.dtype = dtypeLabel(model.dtype());
    s.kvBytesPerToken = c.kvBytesPerToken(at::elementSize(model.dtype()));
    return s;
}

}  // namespace kvlens
