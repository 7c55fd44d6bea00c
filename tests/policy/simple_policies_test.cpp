// Rule-based and attention-free policies: window, streaming, random, knorm, full.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/policy/cake.h"
#include "core/run/policy_run.h"
#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;

namespace {

// HF's RoPE (rotate half, theta 10000) written out: x [H, n, D], positions [n].
Rerotation hfRope(int64_t D) {
    return [D](const at::Tensor& x, const at::Tensor& positions) {
        auto angle = [D](int64_t pos, int64_t d) { return double(pos) * std::pow(10000.0, -2.0 * double(d % (D / 2)) / D); };
        at::Tensor out = x.clone();
        for (int64_t h = 0; h < x.size(0); ++h)
            for (int64_t i = 0; i < x.size(1); ++i) {
                const int64_t p = positions[i].item<int64_t>();
                for (int64_t d = 0; d < D; ++d) {
                    const double half = d < D / 2 ? -x[h][i][d + D / 2].item<float>() : x[h][i][d - D / 2].item<float>();
                    out[h][i][d] = x[h][i][d].item<float>() * std::cos(angle(p, d)) + half * std::sin(angle(p, d));
                }
            }
        return out;
    };
}

LayerState layerOf(int64_t length, int64_t budget, int64_t layer = 0, int64_t kvHeads = 1) {
    const at::Tensor k = at::randn({kvHeads, length, 4});
    std::vector<std::vector<int64_t>> pos(static_cast<size_t>(kvHeads));
    for (auto& p : pos)
        for (int64_t i = 0; i < length; ++i) p.push_back(i);
    return makeState(k, k.clone(), kvHeads, budget, pos, layer);
}

}  // namespace

TEST(Window, KeepsTheLastB) {
    const Plan plan = policy("window")->plan(layerOf(6, 3));
    EXPECT_EQ(plan.keep[0], ids({3, 4, 5}));
    EXPECT_EQ(plan.reasons[0][5], TokenStatus::Window);
    EXPECT_EQ(plan.reasons[0][2], TokenStatus::Evicted);
    EXPECT_EQ(policy("window")->plan(layerOf(2, 3)).keep[0], ids({0, 1}));  // fits: keep all
}

TEST(Streaming, SinksPlusTheMostRecent) {
    Plan plan = policy("streaming:sinks=2")->plan(layerOf(8, 4));
    EXPECT_EQ(plan.keep[0], ids({0, 1, 6, 7}));
    EXPECT_EQ(plan.reasons[0][1], TokenStatus::Sink);
    EXPECT_EQ(plan.reasons[0][6], TokenStatus::Window);
    EXPECT_TRUE(std::isnan(plan.scores[0][0].item<float>()));
    // B < S: the earliest sinks only.
    plan = policy("streaming")->plan(layerOf(8, 3));
    EXPECT_EQ(plan.keep[0], ids({0, 1, 2}));
    // rerotate changes the cache's rotation, not the plan.
    EXPECT_EQ(policy("streaming:rerotate=true")->plan(layerOf(10, 6)).keep[0], ids({0, 1, 2, 3, 8, 9}));
}

TEST(Random, SeededAndUniform) {
    auto keep = [](const std::string& spec, int64_t layer, int64_t seqLen) {
        LayerState s = layerOf(64, 8, layer);
        s.seqLen = seqLen;
        return policy(spec)->plan(s).keep[0];
    };
    EXPECT_EQ(keep("random:seed=7", 0, 64), keep("random:seed=7", 0, 64));
    EXPECT_NE(keep("random:seed=7", 0, 64), keep("random:seed=8", 0, 64));
    EXPECT_NE(keep("random:seed=7", 0, 64), keep("random:seed=7", 1, 64));
    EXPECT_NE(keep("random:seed=7", 0, 64), keep("random:seed=7", 0, 65));
    // The window option keeps the last W.
    const auto w = keep("random:seed=7,window=3", 0, 64);
    EXPECT_EQ(w.size(), 8u);
    EXPECT_EQ(std::vector<int64_t>(w.end() - 3, w.end()), ids({61, 62, 63}));
    // Uniform: over many draws every entry is kept about B/L of the time.
    std::vector<int> hits(64, 0);
    for (int64_t seed = 0; seed < 400; ++seed)
        for (int64_t i : keep("random:seed=" + std::to_string(seed), 0, 64)) ++hits[i];
    for (int h : hits) {
        EXPECT_GT(h, 20);  // expected 50; 20 and 85 are > 4 standard deviations away
        EXPECT_LT(h, 85);
    }
}

TEST(Knorm, KeepsTheLowestNormsAndSkipsEarlyLayers) {
    // Norms 5, 1, 2, 10.
    const at::Tensor k = at::tensor({3.f, 4.f, 1.f, 0.f, 0.f, 2.f, 6.f, 8.f}).view({1, 4, 2});
    auto plan = [&](const std::string& spec, int64_t layer) {
        return policy(spec)->plan(makeState(k, k.clone(), 1, 2, {}, layer));
    };
    const Plan p2 = plan("knorm", 2);
    EXPECT_EQ(p2.keep[0], ids({1, 2}));
    EXPECT_NEAR(p2.scores[0][0].item<float>(), -5.f, 1e-6);
    EXPECT_EQ(plan("knorm", 0).keep[0], ids({0, 1, 2, 3}));
    EXPECT_EQ(plan("knorm", 1).keep[0], ids({0, 1, 2, 3}));
    EXPECT_EQ(plan("knorm:skip_layers=1", 0).keep[0], ids({1, 2}));
    EXPECT_EQ(plan("knorm:skip_layers=", 1).keep[0], ids({1, 2}));
}

TEST(KeyDiff, KeepsTheKeysLeastLikeTheHeadsMeanDirection) {
    // Plain loops: anchor = mean over the held keys of k / |k|, score = -cos(k, anchor).
    auto reference = [](const at::Tensor& k, const std::vector<bool>& held) {
        const int64_t L = k.size(0), D = k.size(1);
        auto kk = k.accessor<float, 2>();
        std::vector<double> anchor(static_cast<size_t>(D), 0.0), score(static_cast<size_t>(L));
        int n = 0;
        for (int64_t i = 0; i < L; ++i) {
            if (!held[static_cast<size_t>(i)]) continue;
            double norm = 0;
            for (int64_t d = 0; d < D; ++d) norm += double(kk[i][d]) * kk[i][d];
            for (int64_t d = 0; d < D; ++d) anchor[static_cast<size_t>(d)] += kk[i][d] / std::sqrt(norm);
            ++n;
        }
        double anorm = 0;
        for (double& a : anchor) anorm += (a /= n) * a;
        for (int64_t i = 0; i < L; ++i) {
            double dot = 0, norm = 0;
            for (int64_t d = 0; d < D; ++d) {
                dot += kk[i][d] * anchor[static_cast<size_t>(d)];
                norm += double(kk[i][d]) * kk[i][d];
            }
            score[static_cast<size_t>(i)] = -dot / std::sqrt(norm * anorm);
        }
        return score;
    };
    at::manual_seed(5);
    const at::Tensor k = at::randn({2, 9, 4});
    const Plan plan = policy("keydiff")->plan(makeState(k, k.clone(), 2, 3));
    for (int64_t h = 0; h < 2; ++h) {
        const std::vector<double> want = reference(k[h].contiguous(), std::vector<bool>(9, true));
        std::vector<int64_t> order(9);
        for (int64_t i = 0; i < 9; ++i) {
            order[static_cast<size_t>(i)] = i;
            EXPECT_NEAR(plan.scores[h][i].item<float>(), want[static_cast<size_t>(i)], 1e-5) << "head " << h << " key " << i;
        }
        std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return want[a] > want[b]; });
        std::vector<int64_t> top(order.begin(), order.begin() + 3);
        std::sort(top.begin(), top.end());
        EXPECT_EQ(plan.keep[h], top) << "head " << h;
    }
    // A freed slot (an earlier eviction) is not part of the anchor.
    LayerState s = makeState(k, k.clone(), 2, 3);
    s.valid = at::ones({2, 9}, at::kBool);
    s.valid[0][4] = false;
    const Plan masked = policy("keydiff")->plan(s);
    std::vector<bool> held(9, true);
    held[4] = false;
    const std::vector<double> want = reference(k[0].contiguous(), held);
    for (int64_t i = 0; i < 9; ++i)
        if (i != 4) EXPECT_NEAR(masked.scores[0][i].item<float>(), want[static_cast<size_t>(i)], 1e-5) << "key " << i;
    EXPECT_EQ(std::count(masked.keep[0].begin(), masked.keep[0].end(), 4), 0);
}

TEST(Full, KeepsEverything) {
    const Plan plan = policy("full")->plan(layerOf(10, 2, 0, 2));
    EXPECT_EQ(plan.keep[0].size(), 10u);
    EXPECT_EQ(plan.keep[1].size(), 10u);
}

namespace {

// Sum of squares of row i of x [L, D].
double energy(const at::Tensor& x, int64_t i) {
    double e = 0;
    for (int64_t d = 0; d < x.size(1); ++d) e += double(x[i][d].item<float>()) * x[i][d].item<float>();
    return e;
}

// The kept entries of a head by plain selection: the protected ones plus the
// best `slots` others by score (ties to the later entry), sorted.
std::vector<int64_t> topPlus(const std::vector<double>& score, std::vector<int64_t> kept, int64_t slots) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < static_cast<int64_t>(score.size()); ++i)
        if (std::find(kept.begin(), kept.end(), i) == kept.end()) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return score[a] != score[b] ? score[a] > score[b] : a > b;
    });
    kept.insert(kept.end(), order.begin(), order.begin() + slots);
    std::sort(kept.begin(), kept.end());
    return kept;
}

}  // namespace

TEST(Cur, ScoresEachEntrysShareOfItsBlocksKeyAndValueEnergy) {
    at::manual_seed(7);
    const int64_t L = 11, w = 4, sinks = 2, B = 6;
    const at::Tensor k = at::randn({2, L, 4}), v = at::randn({2, L, 4});
    const Plan plan = policy("cur:sinks=2,local_window=4")->plan(makeState(k, v, 2, B));
    for (int64_t h = 0; h < 2; ++h) {
        // Plain loops: k2 / its block's sum times v2 / its block's sum, over the head's total.
        std::vector<double> k2(L), v2(L), s(L);
        for (int64_t i = 0; i < L; ++i) k2[i] = energy(k[h], i), v2[i] = energy(v[h], i);
        double total = 0;
        for (int64_t i = 0; i < L; ++i) {
            double kb = 0, vb = 0;
            for (int64_t j = i / w * w; j < std::min(L, i / w * w + w); ++j) kb += k2[j], vb += v2[j];
            total += s[i] = (k2[i] / kb) * (v2[i] / vb);
        }
        for (int64_t i = 0; i < L; ++i) s[i] /= total;
        for (int64_t i = sinks; i < L; ++i) EXPECT_NEAR(plan.scores[h][i].item<float>(), s[i], 1e-6) << h << " " << i;
        EXPECT_TRUE(std::isnan(plan.scores[h][0].item<float>()));  // a sink: a rule decided
        EXPECT_EQ(plan.keep[h], topPlus(s, {0, 1}, B - sinks)) << "head " << h;
        EXPECT_EQ(plan.reasons[h][1], TokenStatus::Sink);
    }
    // leverage=key without the local approximation: each key's share of the head's key energy.
    const Plan keyOnly = policy("cur:sinks=0,local_window=0,leverage=key")->plan(makeState(k, v, 2, B));
    double total = 0;
    for (int64_t i = 0; i < L; ++i) total += energy(k[1], i);
    for (int64_t i = 0; i < L; ++i) EXPECT_NEAR(keyOnly.scores[1][i].item<float>(), energy(k[1], i) / total, 1e-6);
}

TEST(LagKv, RanksEachPartitionAgainstTheNextPartitionsRange) {
    at::manual_seed(9);
    // 2 sinks, three partitions of 3, two entries past them: partitions 0 and
    // 1 are scored, the last partition and the two after it score 1.
    const int64_t sinks = 2, lag = 3, L = 13, D = 4;
    const at::Tensor k = at::randn({1, L, D}), v = at::randn({1, L, D});
    auto softmaxedStd = [&](const at::Tensor& x, int64_t part) {  // one partition's scores (plain loops)
        std::vector<double> s(lag);
        const int64_t from = sinks + part * lag, ref = from + lag;
        for (int64_t t = 0; t < lag; ++t) {
            std::vector<double> c(D);
            double mean = 0;
            for (int64_t d = 0; d < D; ++d) {
                double lo = 1e30, hi = -1e30;
                for (int64_t r = ref; r < ref + lag; ++r) lo = std::min(lo, double(x[0][r][d].item<float>())),
                                                         hi = std::max(hi, double(x[0][r][d].item<float>()));
                mean += c[d] = (x[0][from + t][d].item<float>() - lo) / (hi - lo);
            }
            mean /= D;
            double var = 0;
            for (double cd : c) var += (cd - mean) * (cd - mean);
            s[t] = std::sqrt(var / (D - 1));
        }
        double z = 0;
        for (double& e : s) z += e = std::exp(e);
        for (double& e : s) e /= z;
        return s;
    };
    std::vector<double> raw(L, 1.0), ranked(L, 1.0);
    for (int64_t part = 0; part < 2; ++part) {
        const auto ks = softmaxedStd(k, part), vs = softmaxedStd(v, part);
        for (int64_t t = 0; t < lag; ++t) {
            const double s = (ks[t] + vs[t]) / 2;
            int64_t rank = 0;
            for (int64_t u = 0; u < lag; ++u) rank += (ks[u] + vs[u]) / 2 < s ? 1 : 0;
            raw[sinks + part * lag + t] = s;
            ranked[sinks + part * lag + t] = double(rank) / lag;
        }
    }
    const Plan plan = policy("lagkv:sinks=2,lag=3")->plan(makeState(k, v, 1, 9));
    for (int64_t i = sinks; i < L; ++i) EXPECT_NEAR(plan.scores[0][i].item<float>(), ranked[i], 1e-6) << i;
    // Sinks, the 5 entries scoring 1, and each scored partition's top-ranked entry.
    EXPECT_EQ(plan.keep[0], topPlus(ranked, {0, 1}, 7));
    const Plan cross = policy("lagkv:sinks=2,lag=3,cross=true")->plan(makeState(k, v, 1, 9));
    for (int64_t i = sinks; i < L; ++i) EXPECT_NEAR(cross.scores[0][i].item<float>(), raw[i], 1e-6) << i;
    // Shorter than sinks + 2 lag: by recency, StreamingLLM's set.
    const Plan shortPlan = policy("lagkv:sinks=2,lag=8")->plan(makeState(k, v, 1, 5));
    EXPECT_EQ(shortPlan.keep[0], ids({0, 1, 10, 11, 12}));
}

TEST(Threshold, KeepsEveryCandidateScoringAtLeastTauWhateverTheBudget) {
    // knorm scores -|k|: head 0 norms 5, 1, 2, 10, 3; head 1 norms 1, 1, 1, 1, 7.
    const at::Tensor k = at::tensor({3.f, 4.f, 1.f, 0.f, 0.f, 2.f, 6.f, 8.f, 3.f, 0.f,  //
                                     1.f, 0.f, 0.f, 1.f, 1.f, 0.f, 0.f, 1.f, 7.f, 0.f})
                             .view({2, 5, 2});
    auto plan = [&](const std::string& spec, int64_t budget) {
        return policy(spec)->plan(makeState(k, k.clone(), 2, budget, {}, 2));
    };
    // tau = -2.5: head 0 keeps norms 1 and 2, head 1 its four unit keys, at budget 1 or 4 alike.
    for (int64_t budget : {1, 4}) {
        const Plan p = plan("knorm:select=threshold,threshold=-2.5", budget);
        EXPECT_EQ(p.keep[0], ids({1, 2})) << budget;
        EXPECT_EQ(p.keep[1], ids({0, 1, 2, 3})) << budget;
        EXPECT_EQ(p.reasons[1][3], TokenStatus::Score);
        EXPECT_EQ(p.reasons[1][4], TokenStatus::Evicted);
    }
    // A score equal to tau stays (kvpress DMSPress evicts strictly below).
    EXPECT_EQ(plan("knorm:select=threshold,threshold=-2", 2).keep[0], ids({1, 2}));
    EXPECT_EQ(plan("knorm:select=threshold,threshold=-1.5", 2).keep[0], ids({1}));
    // Protected sets still come from the budget: StreamingLLM's rules have no score to reach tau, so at
    // budget 3 it keeps its sink and the last two, as it does by budget.
    EXPECT_EQ(plan("streaming:sinks=1,select=threshold,threshold=-100", 3).keep[0], ids({0, 3, 4}));
    // The plan's promises hold without a budget to hold to (a layer may keep more than Hkv x B).
    const LayerState st = makeState(k, k.clone(), 2, 1, {}, 2);
    const PolicyConfig c = parsePolicySpec("knorm:select=threshold,threshold=-2.5");
    EXPECT_NO_THROW(checkPlanHolds(c, st, policy(c.label())->plan(st)));
    EXPECT_THROW(checkPlanHolds(parsePolicySpec("knorm"), st, policy(c.label())->plan(st)), Error);
}

TEST(ChunkKv, KeepsTheChunksOfBestMeanScoreOverEveryHead) {
    at::manual_seed(11);
    const int64_t L = 10, C = 3, B = 5;
    const at::Tensor k = at::randn({2, L, 4}), v = at::randn({2, L, 4});
    // The scorer underneath: each key's share of its head's key energy (cur, no blocks, no sinks).
    const std::string base = "cur:sinks=0,local_window=0,leverage=key";
    const Plan plain = policy(base)->plan(makeState(k, v, 2, B));
    const Plan chunked = policy(base + ",chunk_length=3")->plan(makeState(k, v, 2, B));
    // Chunks {0,1,2} {3,4,5} {6,7,8} {9}: the mean of both heads' scores over the chunk.
    std::vector<double> byEntry(L);
    for (int64_t c = 0; c * C < L; ++c) {
        double sum = 0;
        int n = 0;
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = c * C; i < std::min(L, c * C + C); ++i, ++n) sum += plain.scores[h][i].item<float>();
        for (int64_t i = c * C; i < std::min(L, c * C + C); ++i) byEntry[i] = sum / n;
    }
    for (int64_t h = 0; h < 2; ++h) {
        for (int64_t i = 0; i < L; ++i) EXPECT_NEAR(chunked.scores[h][i].item<float>(), byEntry[i], 1e-6);
        // Both heads keep the same entries: the best chunk whole, then the next best's latest entries.
        EXPECT_EQ(chunked.keep[h], topPlus(byEntry, {}, B)) << "head " << h;
    }
    EXPECT_EQ(chunked.keep[0], chunked.keep[1]);
}

TEST(CriticalKv, KeepsAFirstStageByScoreThenRanksByValueNormTimesScore) {
    at::manual_seed(13);
    // 2 query heads over 1 KV head (G = 2), head_dim 4, hidden 3, 8 entries, budget 5.
    const int64_t L = 8, D = 4, E = 3, B = 5;
    const at::Tensor k = at::randn({1, L, D}), v = at::randn({1, L, D}), wo = at::randn({E, 2 * D});
    const std::string base = "cur:sinks=0,local_window=0,leverage=key";
    const Plan plain = policy(base)->plan(makeState(k, v, 2, B));
    LayerState s = makeState(k, v, 2, B);
    s.outputProjection = wo;
    const Plan plan = policy(base + ",critical=true,first_stage=0.5")->plan(s);
    // Plain loops: |W_O v|_1 of each entry through each query head's slice of W_O, averaged over the group.
    std::vector<double> score(L), second(L);
    for (int64_t i = 0; i < L; ++i) {
        double norm = 0;
        for (int64_t q = 0; q < 2; ++q)
            for (int64_t e = 0; e < E; ++e) {
                double o = 0;
                for (int64_t d = 0; d < D; ++d) o += double(wo[e][q * D + d].item<float>()) * v[0][i][d].item<float>();
                norm += std::abs(o);
            }
        score[i] = plain.scores[0][i].item<float>();
        second[i] = (score[i] + 1e-4) * norm / 2;
    }
    // First stage: floor(0.5 * 5) = 2 entries by the plain score, shown as NaN (a rule decided).
    const std::vector<int64_t> first = topPlus(score, {}, 2);
    std::vector<double> ranked = second;
    for (int64_t i : first) ranked[i] = 1e30;
    EXPECT_EQ(plan.keep[0], topPlus(ranked, {}, B));
    for (int64_t i = 0; i < L; ++i) {
        if (std::find(first.begin(), first.end(), i) != first.end())
            EXPECT_TRUE(std::isnan(plan.scores[0][i].item<float>())) << i;
        else
            EXPECT_NEAR(plan.scores[0][i].item<float>(), second[i], 1e-5 * std::abs(second[i]) + 1e-7) << i;
    }
    // Without the output projection it says what it needs.
    EXPECT_THROW(policy(base + ",critical=true")->plan(makeState(k, v, 2, B)), std::exception);
}

TEST(Rkv, ImportanceMinusRedundancyByPlainLoops) {
    at::manual_seed(17);
    // 2 query heads over 1 KV head, head_dim 4, 10 entries, window 2 (its 2
    // queries observed), kernel 3, lambda 0.3, budget 6: the window + 4 by score.
    const int64_t L = 10, D = 4, W = 2, K = 3, B = 6;
    const double lambda = 0.3;
    at::Tensor k = at::randn({1, L, D});
    k[0][7] = k[0][2] * 2;  // a near copy: entry 2's newest duplicate (cos 1) is 7
    const at::Tensor v = at::randn({1, L, D}), q = at::randn({2, W, D});
    auto p = policy("rkv:window=2,kernel=3,lambda=0.3");
    LayerState s = makeState(k, v, 2, B);
    Observation obs;
    obs.queries = q;
    obs.queryPositions = {L - 2, L - 1};
    p->observe(s, obs);
    const Plan plan = p->plan(s);

    auto kv = [&](int64_t i, int64_t d) { return double(k[0][i][d].item<float>()); };
    // Importance of the keys before the window (0..7).
    const int64_t n = L - W;
    std::vector<double> mean(n, 0.0), importance(n);
    for (int64_t r = 0; r < W; ++r) {
        std::vector<double> logit(n);
        double top = -1e30, z = 0;
        for (int64_t j = 0; j < n; ++j) {
            logit[j] = -1e30;
            for (int64_t h = 0; h < 2; ++h) {
                double dot = 0;
                for (int64_t d = 0; d < D; ++d) dot += q[h][r][d].item<float>() * kv(j, d);
                logit[j] = std::max(logit[j], dot / std::sqrt(double(D)));
            }
            top = std::max(top, logit[j]);
        }
        for (int64_t j = 0; j < n; ++j) z += std::exp(logit[j] - top);
        for (int64_t j = 0; j < n; ++j) mean[j] += std::exp(logit[j] - top) / z / W;
    }
    for (int64_t j = 0; j < n; ++j) {
        importance[j] = 0;
        for (int64_t i = std::max<int64_t>(0, j - K / 2); i <= std::min(n - 1, j + K / 2); ++i)
            importance[j] = std::max(importance[j], mean[i]);
    }
    // Redundancy over all 10 keys.
    std::vector<std::vector<double>> sim(L, std::vector<double>(L, 0.0));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
            if (i == j) continue;
            double dot = 0, ni = 0, nj = 0;
            for (int64_t d = 0; d < D; ++d) dot += kv(i, d) * kv(j, d), ni += kv(i, d) * kv(i, d), nj += kv(j, d) * kv(j, d);
            sim[i][j] = dot / ((std::sqrt(ni) + 1e-8) * (std::sqrt(nj) + 1e-8));
        }
    for (int64_t i = 0; i < L; ++i) {
        int64_t last = -1;
        for (int64_t j = 0; j < L; ++j)
            if (sim[i][j] > 0.5) last = j;
        if (last >= 0) sim[i][last] = 0;
    }
    EXPECT_EQ(sim[2][7], 0.0);  // the newest copy of entry 2 does not count against it
    std::vector<double> red(L, 0.0);
    double z = 0;
    for (int64_t j = 0; j < L; ++j) {
        for (int64_t i = 0; i < L; ++i) red[j] += sim[i][j] / L;
        z += std::exp(red[j]);
    }
    std::vector<double> score(n);
    for (int64_t j = 0; j < n; ++j) {
        score[j] = lambda * importance[j] - (1 - lambda) * std::exp(red[j]) / z;
        EXPECT_NEAR(plan.scores[0][j].item<float>(), score[j], 1e-6) << j;
    }
    score.push_back(1e30), score.push_back(1e30);  // the window
    EXPECT_EQ(plan.keep[0], topPlus(score, {8, 9}, B - W));
    EXPECT_EQ(plan.reasons[0][9], TokenStatus::Window);
}

TEST(Cake, LayerBudgetsShareTheBudgetBeyondTheWindowByPreference) {
    // Budgets 10 with window 2 leave 8 per layer (24 in all) to share.
    // Preferences 1 : 2 : 5 give 3, 6, 15 and the 0 the rounding left.
    EXPECT_EQ(cakeLayerBudgets({10, 10, 10}, {1, 2, 5}, 2, 20), ids({5, 8, 17}));
    // Capped at what a layer holds (12 - 2): the 10 above the cap shared evenly by the others.
    EXPECT_EQ(cakeLayerBudgets({10, 10, 10}, {1, 1, 10}, 2, 12), ids({9, 9, 12}));
    // 25 over three equal preferences: 8 each, the one left to the first layer.
    EXPECT_EQ(cakeLayerBudgets({10, 10, 11}, {1, 1, 1}, 2, 100), ids({11, 10, 10}));
    // No preference (or budgets within the window): the allocator's budgets stand.
    EXPECT_EQ(cakeLayerBudgets({10, 10, 11}, {0, 0, 0}, 2, 100), ids({10, 10, 11}));
    EXPECT_EQ(cakeLayerBudgets({2, 2}, {1, 3}, 4, 100), ids({2, 2}));
}

TEST(Cake, ScoresMeanPlusGammaVarianceOfTheWindowsAttentionPooledByPlainLoops) {
    at::manual_seed(23);
    // 2 query heads over 1 KV head, head_dim 4, 9 entries, window 3 (its 3
    // queries observed), kernel 3 (avg), gamma 5, budget 6: the window + 3 by score.
    const int64_t L = 9, D = 4, W = 3, K = 3, B = 6;
    const double gamma = 5;
    const at::Tensor k = at::randn({1, L, D}), v = at::randn({1, L, D}), q = at::randn({2, W, D});
    auto p = policy("cake:window=3,kernel=3,gamma=5");
    LayerState s = makeState(k, v, 2, B);
    Observation obs;
    obs.queries = q;
    obs.queryPositions = {L - 3, L - 2, L - 1};
    p->observe(s, obs);
    const Plan plan = p->plan(s);
    const int64_t n = L - W;
    std::vector<double> score(n, 0.0);
    for (int64_t h = 0; h < 2; ++h) {
        // a[r][j]: window query r's softmax over the keys it sees (causal), on the keys before the window.
        std::vector<std::vector<double>> a(W, std::vector<double>(n));
        for (int64_t r = 0; r < W; ++r) {
            const int64_t sees = L - W + r + 1;
            std::vector<double> logit(sees);
            double top = -1e30, z = 0;
            for (int64_t j = 0; j < sees; ++j) {
                double dot = 0;
                for (int64_t d = 0; d < D; ++d) dot += q[h][r][d].item<float>() * k[0][j][d].item<float>();
                logit[j] = dot / std::sqrt(double(D));
                top = std::max(top, logit[j]);
            }
            for (double x : logit) z += std::exp(x - top);
            for (int64_t j = 0; j < n; ++j) a[r][j] = std::exp(logit[j] - top) / z;
        }
        std::vector<double> raw(n);
        for (int64_t j = 0; j < n; ++j) {
            double m = 0, var = 0;
            for (int64_t r = 0; r < W; ++r) m += a[r][j] / W;
            for (int64_t r = 0; r < W; ++r) var += (a[r][j] - m) * (a[r][j] - m) / (W - 1);
            raw[j] = m + gamma * var;
        }
        for (int64_t j = 0; j < n; ++j) {  // average over the neighbours that exist, then over the group
            double sum = 0;
            int count = 0;
            for (int64_t i = std::max<int64_t>(0, j - K / 2); i <= std::min(n - 1, j + K / 2); ++i) sum += raw[i], ++count;
            score[j] += sum / count / 2;
        }
    }
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(plan.scores[0][j].item<float>(), score[j], 1e-6) << j;
    score.insert(score.end(), {1e30, 1e30, 1e30});
    EXPECT_EQ(plan.keep[0], topPlus(score, {6, 7, 8}, B - W));
}

TEST(DuoAttention, StreamingHeadsKeepSinksAndRecentRetrievalHeadsKeepAll) {
    at::manual_seed(29);
    // Without RoPE every head's area is the same: the split falls to the
    // lower layer and head (a stable sort), half of all KV heads streaming.
    const int64_t L = 12, D = 4;
    auto p = policy("duo:sinks=2,recent=3,ratio=0.5,q_len=8");
    std::vector<LayerState> states;
    for (int64_t layer = 0; layer < 2; ++layer) {
        states.push_back(makeState(at::randn({2, L, D}), at::randn({2, L, D}), 4, 5, {}, layer));
        states.back().seqLen = states.back().promptLength = L;
        states.back().numLayers = 2;
        Observation obs;
        obs.queries = at::randn({4, L, D});
        for (int64_t i = 0; i < L; ++i) obs.queryPositions.push_back(i);
        p->observe(states.back(), obs);
    }
    std::vector<int64_t> budgets = {5, 5};
    p->planAcrossLayers(states, budgets);
    EXPECT_EQ(budgets, ids({5, 5})) << "DuoAttention leaves the budgets alone (they do not apply)";
    const Plan first = p->plan(states[0]), second = p->plan(states[1]);
    EXPECT_EQ(first.keep[0], ids({0, 1, 9, 10, 11}));  // layer 0: both heads stream
    EXPECT_EQ(first.keep[1], ids({0, 1, 9, 10, 11}));
    EXPECT_EQ(first.reasons[0][1], TokenStatus::Sink);
    EXPECT_EQ(first.reasons[0][9], TokenStatus::Window);
    EXPECT_EQ(second.keep[0].size(), static_cast<size_t>(L));  // layer 1: both retrieve
    EXPECT_EQ(second.reasons[1][5], TokenStatus::Score);
    // The area of a uniform row over q_len 8: sum_j (8 - j) / 8 / 8 = 36 / 64, on every entry.
    EXPECT_NEAR(first.scores[0][4].item<float>(), 36.0 / 64.0, 1e-6);
    const LayerState& st = states[1];
    EXPECT_NO_THROW(checkPlanHolds(parsePolicySpec("duo"), st, second)) << "no budget to hold to";
    // The allocators and wrappers that divide a budget are refused by name.
    EXPECT_THROW(policy("duo:critical=true"), ArgumentError);
    EXPECT_THROW(policy("duo:heads=adaptive"), ArgumentError);
}

TEST(DuoAttention, HeadsThatLookFurtherBackRetrieveWithRope) {
    // Without RoPE the mean key is the same at every position, so the last
    // query's row is uniform: the area is (q_len + 1) / (2 q_len), whatever
    // the statistics (the Session tests run the bundled model's RoPE).
    at::manual_seed(31);
    auto p = policy("duo:ratio=0,q_len=1000");
    LayerState s = makeState(at::randn({1, 6, 4}), at::randn({1, 6, 4}), 1, 3);
    s.seqLen = s.promptLength = 6;
    Observation obs;
    obs.queries = at::randn({1, 6, 4});
    obs.queryPositions = {0, 1, 2, 3, 4, 5};
    p->observe(s, obs);
    std::vector<int64_t> budgets = {3};
    p->planAcrossLayers({s}, budgets);
    const Plan plan = p->plan(s);
    EXPECT_EQ(plan.keep[0].size(), 6u) << "ratio 0: no head streams";
    EXPECT_NEAR(plan.scores[0][0].item<float>(), 1001.0 / 2000.0, 1e-6);
}

TEST(DuoAttention, HeadScoreUndoesRopeAndPlacesTheMeansByPlainLoops) {
    at::manual_seed(37);
    // 2 query heads over 1 KV head, head_dim 4, 6 prompt tokens, q_len 5.
    // The cache and the observed queries are after RoPE; the head's score
    // comes from the means before it, placed at 0..4 and the query at 4.
    const int64_t D = 4, T = 6, Q = 5;
    const Rerotation rope = hfRope(D);
    const at::Tensor qpre = at::randn({2, T, D}), kpre = at::randn({1, T, D});
    const at::Tensor positions = at::arange(T, at::kLong);
    auto p = policy("duo:ratio=0,q_len=5");
    LayerState s = makeState(rope(kpre, positions), at::randn({1, T, D}), 2, 3);
    s.seqLen = s.promptLength = T;
    s.rotate = rope;
    Observation obs;
    obs.queries = rope(qpre, positions);
    for (int64_t i = 0; i < T; ++i) obs.queryPositions.push_back(i);
    p->observe(s, obs);
    std::vector<int64_t> budgets = {3};
    p->planAcrossLayers({s}, budgets);
    const Plan plan = p->plan(s);
    const at::Tensor kbar = kpre.mean(1, /*keepdim=*/true).expand({1, Q, D}).contiguous();  // [1, Q, D]
    const at::Tensor keys = rope(kbar, at::arange(Q, at::kLong));
    double score = 0;
    for (int64_t h = 0; h < 2; ++h) {
        const at::Tensor q = rope(qpre[h].mean(0).view({1, 1, D}), at::full({1}, Q - 1, at::kLong));
        std::vector<double> logit(Q);
        double top = -1e30, z = 0, area = 0;
        for (int64_t j = 0; j < Q; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q[0][0][d].item<float>() * keys[0][j][d].item<float>();
            logit[j] = dot / std::sqrt(double(D));
            top = std::max(top, logit[j]);
        }
        for (double x : logit) z += std::exp(x - top);
        for (int64_t j = 0; j < Q; ++j) area += std::exp(logit[j] - top) / z * double(Q - j) / Q;
        score += area / 2;
    }
    EXPECT_NEAR(plan.scores[0][2].item<float>(), score, 1e-5);
    EXPECT_GT(std::abs(score - 6.0 / 10.0), 1e-3) << "RoPE must move the score off the uniform row's (q_len+1)/(2 q_len)";
}

TEST(QFilter, ScoresKeysOnTheMainDirectionOfTheHeadsPromptQueries) {
    at::manual_seed(19);
    // Two query heads over one KV head. Each head's 5 prompt queries lie on
    // one direction: head 0's mostly along +u0, head 1's mostly along -u1.
    // Filters (first right singular vector, against the majority): -u0 and
    // +u1; the KV head's is their mean, and a key scores -<f, k> = <k, u0 - u1> / 2.
    const int64_t D = 4, L = 9, B = 4;
    const at::Tensor u0 = at::randn({D}), u1 = at::randn({D});
    const at::Tensor n0 = u0 / u0.norm(), n1 = u1 / u1.norm();
    const at::Tensor c0 = at::tensor({3.f, 2.f, -1.f, 4.f, 1.f}), c1 = at::tensor({-2.f, -3.f, 1.f, -1.f, -5.f});
    const at::Tensor q = at::stack({c0.unsqueeze(1) * n0, c1.unsqueeze(1) * n1}).contiguous();  // [2, 5, D]
    const at::Tensor k = at::randn({1, L, D});
    auto p = policy("qfilter");
    LayerState s = makeState(k, k.clone(), 2, B);
    s.promptLength = 5;
    Observation obs;
    obs.queries = q;
    obs.queryPositions = {0, 1, 2, 3, 4};
    p->observe(s, obs);
    const Plan plan = p->plan(s);
    std::vector<double> want(L);
    for (int64_t i = 0; i < L; ++i) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
            dot += k[0][i][d].item<float>() * (n0[d].item<float>() - n1[d].item<float>()) / 2;
        want[i] = dot;
        EXPECT_NEAR(plan.scores[0][i].item<float>(), want[i], 1e-5) << i;
    }
    EXPECT_EQ(plan.keep[0], topPlus(want, {}, B));
    // Only every other query with samples=3 (5 prompt tokens: stride 2) gives the same directions.
    auto sampled = policy("qfilter:samples=3");
    sampled->observe(s, obs);
    const Plan again = sampled->plan(s);
    for (int64_t i = 0; i < L; ++i) EXPECT_NEAR(again.scores[0][i].item<float>(), want[i], 1e-5) << i;
}

TEST(Oracle, KeepsTheTopBByTheFutureItIsGiven) {
    // 2 KV heads, 8 entries at positions 0..7; the future covers the 6 prompt positions.
    const at::Tensor k = at::randn({2, 8, 4});
    LayerState s = makeState(k, k.clone(), 4, 4);
    s.sessionScores = at::tensor({0.1f, 0.9f, 0.3f, 0.8f, 0.2f, 0.5f, /**/ 0.7f, 0.1f, 0.6f, 0.0f, 0.4f, 0.3f}).view({2, 6});
    const Plan plan = policy("oracle")->plan(s);
    // Head 0: positions 6 and 7 (after the prompt) are never dropped for the future, then 1 and 3.
    EXPECT_EQ(plan.keep[0], ids({1, 3, 6, 7}));
    EXPECT_EQ(plan.keep[1], ids({0, 2, 6, 7}));
    EXPECT_FLOAT_EQ(plan.scores[1][2].item<float>(), 0.6f);
    // Outside a Session it has nothing to read and says so.
    EXPECT_THROW(policy("oracle")->plan(makeState(k, k.clone(), 4, 4)), std::exception);
}

TEST(ExpectedAttention, ExpectedLogitsOfTheRotatedQueryStatisticsByPlainLoops) {
    at::manual_seed(23);
    // 2 query heads over 1 KV head, head_dim 4, 6 prompt tokens (1 sink),
    // statistics rotated over 3 future positions (6, 7, 8). HF's RoPE
    // (rotate half, theta 10000) written out here.
    const int64_t D = 4, T = 6, S = 1, F = 3;
    auto angle = [&](int64_t pos, int64_t d) { return double(pos) * std::pow(10000.0, -2.0 * double(d % (D / 2)) / D); };
    const Rerotation rope = hfRope(D);
    const at::Tensor pre = at::randn({2, T, D}), k = at::randn({1, T, D}), v = at::randn({1, T, D});
    const at::Tensor post = rope(pre, at::arange(T, at::kLong));
    auto p = policy("expected_attention:sinks=1,n_future=3");
    LayerState s = makeState(k, v, 2, 3);
    s.promptLength = T;
    s.seqLen = T;
    s.rotate = rope;
    Observation obs;
    obs.queries = post;
    for (int64_t i = 0; i < T; ++i) obs.queryPositions.push_back(i);
    p->observe(s, obs);
    const Plan plan = p->plan(s);

    // R̄: the mean over t of HF's rotation at position t, as a matrix acting on column vectors.
    std::vector<std::vector<double>> R(D, std::vector<double>(D, 0.0));
    for (int64_t t = T; t < T + F; ++t)
        for (int64_t d = 0; d < D; ++d) {
            R[d][d] += std::cos(angle(t, d)) / F;
            if (d < D / 2) R[d][d + D / 2] -= std::sin(angle(t, d)) / F;
            else R[d][d - D / 2] += std::sin(angle(t, d)) / F;
        }
    std::vector<double> score(T, 0.0);
    for (int64_t h = 0; h < 2; ++h) {
        std::vector<double> mu(D, 0.0), mu2(D, 0.0);
        std::vector<std::vector<double>> cov(D, std::vector<double>(D, 0.0)), tmp = cov, cov2 = cov;
        const int64_t n = T - S;
        for (int64_t i = S; i < T; ++i)
            for (int64_t a = 0; a < D; ++a) mu[a] += pre[h][i][a].item<float>() / n;
        for (int64_t i = S; i < T; ++i)
            for (int64_t a = 0; a < D; ++a)
                for (int64_t b = 0; b < D; ++b)
                    cov[a][b] += (pre[h][i][a].item<float>() - mu[a]) * (pre[h][i][b].item<float>() - mu[b]) / n;
        for (int64_t a = 0; a < D; ++a)
            for (int64_t b = 0; b < D; ++b) mu2[a] += R[a][b] * mu[b];
        for (int64_t a = 0; a < D; ++a)
            for (int64_t b = 0; b < D; ++b)
                for (int64_t c = 0; c < D; ++c) tmp[a][b] += R[a][c] * cov[c][b];
        for (int64_t a = 0; a < D; ++a)
            for (int64_t b = 0; b < D; ++b)
                for (int64_t c = 0; c < D; ++c) cov2[a][b] += tmp[a][c] * R[b][c];
        std::vector<double> logit(T, 0.0);
        double z = 0;
        for (int64_t j = S; j < T; ++j) {
            for (int64_t a = 0; a < D; ++a) {
                logit[j] += mu2[a] * k[0][j][a].item<float>() / std::sqrt(double(D));
                for (int64_t b = 0; b < D; ++b)
                    logit[j] += k[0][j][a].item<float>() * cov2[a][b] * k[0][j][b].item<float>() / (2.0 * D);
            }
            z += std::exp(logit[j]);
        }
        for (int64_t j = S; j < T; ++j) score[j] += std::exp(logit[j]) / z / 2;
    }
    for (int64_t j = S; j < T; ++j) {
        double vn = 0;
        for (int64_t a = 0; a < D; ++a) vn += double(v[0][j][a].item<float>()) * v[0][j][a].item<float>();
        score[j] *= std::sqrt(vn);
        EXPECT_NEAR(plan.scores[0][j].item<float>(), score[j], 1e-5) << j;
    }
    EXPECT_EQ(plan.reasons[0][0], TokenStatus::Sink);
    EXPECT_EQ(plan.keep[0], topPlus(score, {0}, 2));
}
