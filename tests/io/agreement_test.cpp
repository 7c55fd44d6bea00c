// Kept-set agreement (core/run/trace.h): Jaccard overlaps of the token
// positions two runs hold, per layer x KV head and averaged, and the trace
// JSON's "agreement" block, on a hand-built Trace.
#include <gtest/gtest.h>

#include <cmath>

#include "core/io/trace_json.h"
#include "core/run/trace.h"

using namespace kvlens;

namespace {

// A run of one layer whose KV heads hold the positions marked 'x' (others evicted).
PolicyTrace run(const std::string& label, const std::vector<std::string>& heads) {
    PolicyTrace p;
    p.id = p.label = label;
    LayerTrace l;
    for (const std::string& held : heads) {
        HeadTrace h;
        for (char c : held) h.status.push_back(c == 'x' ? TokenStatus::Score : TokenStatus::Evicted);
        l.heads.push_back(h);
    }
    p.layers.push_back(l);
    return p;
}

}  // namespace

TEST(KeptAgreement, JaccardOfTheHeldPositionsPerHeadAndMean) {
    Trace t;
    t.numLayers = 1;
    t.numKvHeads = 2;
    t.policies = {run("full", {"xxxxxx", "xxxxxx"}), run("a", {"xx..x.", "x.x.x."}), run("b", {"x..xx.", "x.x.x."}),
                  run("c", {"......", "......"})};
    // Head 0: {0,1,4} vs {0,3,4}: 2 shared of 4. Head 1: the same 3.
    EXPECT_DOUBLE_EQ(keptJaccard(t.policies[1], t.policies[2], 0, 0), 0.5);
    EXPECT_DOUBLE_EQ(keptJaccard(t.policies[1], t.policies[2], 0, 1), 1.0);
    EXPECT_DOUBLE_EQ(keptJaccardMean(t.policies[1], t.policies[2]), 0.75);
    EXPECT_DOUBLE_EQ(keptJaccard(t.policies[1], t.policies[3], 0, 0), 0.0);  // nothing in common
    EXPECT_TRUE(std::isnan(keptJaccard(t.policies[3], t.policies[3], 0, 0)));  // nothing held at all
    EXPECT_DOUBLE_EQ(keptJaccardMean(t.policies[0], t.policies[1]), 0.5);     // 3 of 6 in each head

    const nlohmann::json j = traceToJson(t)["agreement"];
    EXPECT_EQ(j["policies"], nlohmann::json({"a", "b", "c"}));  // the eviction runs, not the full cache
    EXPECT_DOUBLE_EQ(j["mean"][0][1].get<double>(), 0.75);
    EXPECT_DOUBLE_EQ(j["mean"][1][0].get<double>(), 0.75);
    EXPECT_DOUBLE_EQ(j["mean"][0][0].get<double>(), 1.0);
    EXPECT_TRUE(j["mean"][2][2].is_null());                    // NaN is never a number
    EXPECT_DOUBLE_EQ(j["by_layer"][0][0][0][1].get<double>(), 0.5);
    EXPECT_FALSE(traceToJson(t, /*withLayers=*/false)["agreement"].contains("by_layer"));
}
