#pragma once
// The KV-sharing what-if (issue 22): how far a model changed to share K/V
// (Model::withMergedKvHeads) drifts from the model as trained, on the same
// tokens, teacher-forced over every position. Torch-free header.
#include <cstdint>
#include <vector>

namespace kvlens {

class Model;

struct ModelFidelity {
    int64_t positions = 0;  // predictions compared (one per token read)
    double meanKl = 0;      // mean KL(p_reference || p_other), nats
    double maxKl = 0;
    double top1 = 0;        // share of positions whose most likely next token agrees
};

// Both models read `tokens` with the full cache; throws ArgumentError when
// their vocabularies differ or `tokens` is empty.
ModelFidelity compareModels(const Model& reference, const Model& other, const std::vector<int64_t>& tokens);

}  // namespace kvlens
