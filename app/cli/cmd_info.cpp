// kvlens-cli info: what a model directory holds and where it would run.
#include <ATen/ATen.h>
#include <torch/version.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/common.h"
#include "core/model/device_internal.h"
#include "core/model/model.h"

namespace kvlens::cli {
namespace {

struct InfoArgs {
    ModelArgs model;
    bool json = false;
};

const char* ropeLabel(const ModelConfig& c) {
    if (!c.usesRope()) return "learned absolute positions";
    switch (c.ropeScaling.type) {
        case RopeScaling::Type::Linear: return "rope (linear scaling)";
        case RopeScaling::Type::Llama3: return "rope (llama3 scaling)";
        default: return "rope";
    }
}

void runInfo(const InfoArgs& a) {
    const auto dir = a.model.dir();
    auto model = Model::load(dir, a.model.run);
    const ModelConfig& c = model->config();
    auto tok = tokenizerFor(dir);
    const uint64_t kvPerToken = c.kvBytesPerToken(at::elementSize(model->dtype()));
    nlohmann::json j = {
        {"model_dir", dir.string()},
        {"family", familyName(c.family)},
        {"layers", c.numLayers},
        {"hidden_size", c.hiddenSize},
        {"intermediate_size", c.intermediateSize},
        {"query_heads", c.numHeads},
        {"kv_heads", c.numKvHeads},
        {"head_dim", c.headDim},
        {"vocab_size", c.vocabSize},
        {"context", c.maxPositions},
        {"positions", ropeLabel(c)},
        {"rope_theta", c.ropeTheta},
        {"tied_embeddings", model->tiedEmbeddings()},
        {"parameters", model->parameterCount()},
        {"device", model->device().str()},
        {"dtype", dtypeLabel(model->dtype())},
        {"kv_bytes_per_token", kvPerToken},
        {"tokenizer", tok ? "tokenizer.json (" + std::to_string(tok->vocabSize()) + " tokens)" : "none"},
        {"cuda_available", cudaAvailable()},
        {"libtorch", TORCH_VERSION},
    };
    // Mistral's sliding window is attention the model was trained with: every
    // run (the full cache too) sees only the last N positions.
    j["sliding_window"] = c.slidingWindow ? nlohmann::json(*c.slidingWindow) : nlohmann::json("none");
    if (a.json) {
        std::cout << j.dump(2) << "\n";
        return;
    }
    for (auto it = j.begin(); it != j.end(); ++it)
        std::cout << it.key() << ": " << (it->is_string() ? it->get<std::string>() : it->dump()) << "\n";
}

}  // namespace

void addInfoCommand(CLI::App& app) {
    auto args = std::make_shared<InfoArgs>();
    auto* cmd = app.add_subcommand("info", "summarise a model directory (default: the bundled model)");
    args->model.add(*cmd);
    cmd->add_flag("--json", args->json, "print JSON");
    cmd->callback([args] { runInfo(*args); });
}

}  // namespace kvlens::cli
