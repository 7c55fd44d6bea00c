#include "core/run/sampler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace kvlens {

Sampler::Sampler(SamplingOptions options) : m_options(options), m_rng(options.seed) {
    if (!options.greedy) {
        if (!(options.temperature > 0) || !std::isfinite(options.temperature))
            throw ArgumentError("--temperature must be > 0 (got " + std::to_string(options.temperature) + ")");
        if (!(options.topP > 0 && options.topP <= 1))
            throw ArgumentError("--top-p must be in (0, 1] (got " + std::to_string(options.topP) + ")");
    }
}

int64_t Sampler::next(const at::Tensor& logits) {
    at::Tensor l = logits.reshape({-1}).to(at::kCPU, at::kDouble).contiguous();
    const double* p = l.data_ptr<double>();
    const int64_t V = l.numel();
    if (m_options.greedy) return std::max_element(p, p + V) - p;  // first maximum: ties to the lower id

    std::vector<double> prob(p, p + V);
    const double maxLogit = *std::max_element(prob.begin(), prob.end());
    double sum = 0;
    for (double& x : prob) sum += (x = std::exp((x - maxLogit) / m_options.temperature));
    std::vector<int64_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    // Nucleus: the smallest set of most likely tokens whose mass reaches top_p.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
    double mass = 0;
    size_t keep = 0;
    while (keep < order.size() && (keep == 0 || mass < m_options.topP * sum)) mass += prob[order[keep++]];
    std::uniform_real_distribution<double> u(0.0, mass);
    double r = u(m_rng), acc = 0;
    for (size_t i = 0; i < keep; ++i) {
        acc += prob[order[i]];
        if (r < acc) return order[i];
    }
    return order[keep - 1];
}

}  // namespace kvlens
