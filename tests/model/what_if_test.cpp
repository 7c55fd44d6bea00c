// The KV-sharing what-ifs (Model::withMergedKvHeads, withSharedLayerKv,
// compareModels, runWhatIf): merged KV heads are the mean of the heads they
// replace, checked where it can be worked out by hand (layer 0 reads the same
// input in both models, RoPE is linear); shared layers read exactly their
// group's first layer's K/V, through the cache as in one batch; the report
// never shows a score it did not measure.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
#include "core/model/model.h"
#include "core/paths.h"
#include "core/study/what_if.h"
#include "core/tokenizer/tokenizer.h"

using namespace kvlens;

namespace {
// Every layer's keys and values of one forward over `tokens`.
std::vector<std::pair<at::Tensor, at::Tensor>> allLayers(const Model& m, const std::vector<int64_t>& tokens) {
    std::vector<std::pair<at::Tensor, at::Tensor>> out(static_cast<size_t>(m.config().numLayers));
    ForwardOptions o;
    o.observer = [&](int64_t layer, const LayerCapture& c) {
        out[static_cast<size_t>(layer)] = {c.keys.clone(), c.values.clone()};
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
    const auto a = allLayers(*model, tokens)[0], b = allLayers(*mqa, tokens)[0];  // layer 0's keys, values
    ASSERT_EQ(b.first.size(0), 1);
    EXPECT_LT((b.first[0] - a.first.mean(0)).abs().max().item<double>(), 1e-5);
    EXPECT_LT((b.second[0] - a.second.mean(0)).abs().max().item<double>(), 1e-5);
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

TEST(WhatIf, SharedLayersReadTheirGroupsFirstLayersKv) {
    const auto model = Model::load(bundledModelDir());
    ASSERT_EQ(model->config().numLayers, 3);
    const std::vector<int64_t> tokens{1, 17, 42, 99, 5, 23, 64, 8, 77, 12};
    const auto own = allLayers(*model, tokens);
    const auto pairs = model->withSharedLayerKv(2);  // layers {0, 1} read layer 0's, {2} its own
    EXPECT_EQ(pairs->kvSourceLayer(0), 0);
    EXPECT_EQ(pairs->kvSourceLayer(1), 0);
    EXPECT_EQ(pairs->kvSourceLayer(2), 2);
    const auto shared = allLayers(*pairs, tokens);
    auto same = [](const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>() < 1e-6; };
    // Layer 0 reads the embeddings in both models: its own K/V, which layer 1 now reads too.
    EXPECT_TRUE(same(shared[0].first, own[0].first) && same(shared[0].second, own[0].second));
    EXPECT_TRUE(same(shared[1].first, shared[0].first) && same(shared[1].second, shared[0].second));
    EXPECT_FALSE(same(shared[1].first, own[1].first));
    // Layer 2 computes its own from an input that layer 1's change reached.
    EXPECT_FALSE(same(shared[2].first, shared[0].first));
    EXPECT_FALSE(same(shared[2].first, own[2].first));
    // One group of all three: every layer reads layer 0's.
    const auto one = allLayers(*model->withSharedLayerKv(3), tokens);
    for (size_t l = 1; l < 3; ++l) EXPECT_TRUE(same(one[l].first, one[0].first) && same(one[l].second, one[0].second));

    // Through the cache, token by token, the shared model predicts as it does reading the prompt at once.
    KvCache batch = pairs->newCache(), steps = pairs->newCache();
    const at::Tensor all = pairs->forward(tokens, batch).logits;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const at::Tensor row = pairs->forward({tokens[i]}, steps).logits;
        EXPECT_LT((row[0] - all[static_cast<int64_t>(i)]).abs().max().item<double>(), 1e-4) << "position " << i;
    }
    // Groups of one are the model itself; the changed model drifts from it.
    EXPECT_EQ(compareModels(*model, *model->withSharedLayerKv(1), tokens).meanKl, 0.0);
    EXPECT_GT(compareModels(*model, *pairs, tokens).meanKl, 1e-4);
    EXPECT_THROW(model->withSharedLayerKv(0), ArgumentError);
    EXPECT_THROW(model->withSharedLayerKv(4), ArgumentError);
    // Both what-ifs at once: merged heads, then shared layers.
    const auto both = model->withMergedKvHeads(1)->withSharedLayerKv(3);
    EXPECT_EQ(both->config().numKvHeads, 1);
    EXPECT_EQ(both->kvSourceLayer(2), 0);
}

TEST(WhatIf, TheReportNamesTheChangeAndNeverShowsANumberItDidNotMeasure) {
    std::shared_ptr<const Model> model = Model::load(bundledModelDir());
    auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(bundledModelDir() / "tokenizer.json"));
    const std::vector<int64_t> tokens{1, 17, 42, 99, 5, 23, 64, 8};
    KvWhatIf identity{KvWhatIf::Kind::ShareLayers, 1};
    WhatIfNeedle needle;
    needle.depths = {0.5};
    needle.samples = 1;
    const WhatIfReport r = runWhatIf(model, tok, identity, tokens, needle);
    EXPECT_EQ(r.needleProbes, 1);
    EXPECT_EQ(r.needleModel, 1.0);  // the bundled model finds the needle at 256 tokens
    EXPECT_EQ(r.needleWhatIf, r.needleModel);
    const std::string text = r.text(model->config());
    EXPECT_EQ(text.rfind("every 1 layers read the first one's K/V (CLA-style, 3 of 3 layers compute K/V)", 0), 0u) << text;
    EXPECT_NE(text.find("needle exact match (full cache, 1 probes) 100 % as trained, 100 % changed"), std::string::npos)
        << text;
    // No needle probes: none reported; a score that was not measured says so.
    const WhatIfReport none = runWhatIf(model, tok, {KvWhatIf::Kind::MergeHeads, 1}, tokens, WhatIfNeedle{{}, {}, 0});
    EXPECT_TRUE(std::isnan(none.needleModel));
    EXPECT_EQ(none.text(model->config()).find("needle"), std::string::npos);
    WhatIfReport unmeasured = none;
    unmeasured.needleProbes = 2;
    EXPECT_NE(unmeasured.text(model->config()).find("not run as trained, not run changed"), std::string::npos);
    EXPECT_THROW(runWhatIf(model, tok, {KvWhatIf::Kind::ShareLayers, 9}, tokens), ArgumentError);
}
