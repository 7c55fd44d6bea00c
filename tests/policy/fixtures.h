#pragma once
// Small hand-built layers for the policy tests: no model, just tensors.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "core/cache/kv_cache.h"
#include "core/policy/factory.h"
#include "core/policy/policy.h"

namespace kvlens::test {

// A layer with keys/values [Hkv, L, D]; positions[h] default to 0..L-1.
// Heads with fewer positions than L are ragged (padding at the end).
LayerState makeState(const at::Tensor& keys, const at::Tensor& values, int64_t numHeads, int64_t budget,
                     std::vector<std::vector<int64_t>> positions = {}, int64_t layer = 0);

// Keys [Hkv, L, 1] = ln(w): with a query of 1 (D = 1, scale 1) the attention
// on entry j is w_j / Σ w over the visible entries.
at::Tensor keysFromWeights(const std::vector<std::vector<double>>& weights);

// One query of ones per query head at each position in qpos: [Hq, n, 1].
Observation onesQueries(int64_t numHeads, const std::vector<int64_t>& qpos, at::Tensor probs = {});

// probs [Hq, n, L] from nested rows.
at::Tensor probsFrom(const std::vector<std::vector<std::vector<float>>>& rows);

std::unique_ptr<Policy> policy(const std::string& spec);

std::vector<int64_t> ids(std::initializer_list<int64_t> v);

// Runs a policy over a stream of random tokens the way the Session does:
// append to a real KvCache, observe with the attention of the new queries
// over the cache's entries (causal, fp32), trim when the layer holds more
// than Hkv × budget, apply, and tell the policy.
class Driver {
public:
    Driver(std::unique_ptr<Policy> policy, int64_t numHeads, int64_t numKvHeads, int64_t headDim, int64_t budget,
           uint64_t seed);
    // Feeds n tokens as one batch, then trims if needed; returns the plan (empty keep when no trim).
    Plan step(int64_t n = 1);
    LayerState state() const;
    // The state the last plan was made for (before its apply).
    const LayerState& planned() const { return m_planned; }
    Policy& policy() { return *m_policy; }
    const KvCache& cache() const { return m_cache; }

private:
    std::unique_ptr<Policy> m_policy;
    int64_t m_heads, m_kvHeads, m_dim, m_budget;
    KvCache m_cache;
    LayerState m_planned;
    at::Tensor m_k, m_v, m_q;  // per token: [T, Hkv, D], [T, Hkv, D], [T, Hq, D]
};

// Two policies fed the same token stream (a 20-token prompt batch, then one
// token a step, 60 steps) keep the same entries at every trim (a gtest failure
// names the step); more than 30 steps must trim.
void expectSameKeeps(const std::string& a, const std::string& b, int64_t heads, int64_t kvHeads, int64_t budget,
                     uint64_t seed = 11);

}  // namespace kvlens::test
