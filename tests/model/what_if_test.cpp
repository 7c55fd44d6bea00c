// The KV-sharing what-if (Model::withMergedKvHeads, compareModels): merged
// KV heads are the mean of the heads they replace, checked where it can be
// worked out by hand: layer 0 reads the same input in both models, so its
// merged keys and values are the mean of the original heads' (RoPE is
// linear, the positions are the same).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/error.h"
#include "core/model/model.h"
#include "core/paths.h"
#include "core/run/what_if.h"

using namespace kvlens;

namespace {
struct Layer0 {
    at::Tensor keys, values;  // [Hkv, n, D]
};
Layer0 layer0(const Model& m, const std::vector<int64_t>& tokens) {
    Layer0 out;
    ForwardOptions o;
    o.observer = [&](int64_t layer, const LayerCapture& c) {
        if (layer == 0) out.keys = c.keys.clone(), out.values = c.values.clone();
    };
    KvCache cache = m.newCache();
    m.forward(tokens, cache, o);
    return out;
}
}  // namespace

TEST(WhatIf, MergedKvHeadsAreTheMeanOfTheHeadsTheyReplace) {
    const auto model = Model::load(bundledModelDir());
    ASSERT_EQ(model->config().numKvHeads, 2);
    const std::vector<int64_t> tokens{1, 17, 42, 99, 5, 23, 64, 8};
    const auto mqa = model->withMergedKvHeads(1);
    EXPECT_EQ(mqa->config().numKvHeads, 1);
    EXPECT_EQ(mqa->config().numHeads, model->config().numHeads);
    const Layer0 a = layer0(*model, tokens), b = layer0(*mqa, tokens);
    ASSERT_EQ(b.keys.size(0), 1);
    EXPECT_LT((b.keys[0] - a.keys.mean(0)).abs().max().item<double>(), 1e-5);
    EXPECT_LT((b.values[0] - a.values.mean(0)).abs().max().item<double>(), 1e-5);
    // Merged, the model changes what it predicts; as many heads as it has, nothing.
    const ModelFidelity merged = compareModels(*model, *mqa, tokens);
    EXPECT_EQ(merged.positions, 8);
    EXPECT_GT(merged.meanKl, 1e-4);
    EXPECT_GE(merged.maxKl, merged.meanKl);
    const ModelFidelity same = compareModels(*model, *model->withMergedKvHeads(2), tokens);
    EXPECT_EQ(same.meanKl, 0.0);
    EXPECT_EQ(same.top1, 1.0);
    EXPECT_THROW(model->withMergedKvHeads(3), ArgumentError);
    EXPECT_THROW(model->withMergedKvHeads(0), ArgumentError);
}
