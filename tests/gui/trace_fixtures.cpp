#include "trace_fixtures.h"

#include <cmath>

namespace kvlens::test {

TokenStatus statusPattern(int position) {
    static const TokenStatus order[] = {TokenStatus::Sink,    TokenStatus::Window, TokenStatus::Score,
                                        TokenStatus::Evicted, TokenStatus::Held,   TokenStatus::Unseen};
    return order[position % 6];
}

namespace {

PolicyTrace makePolicy(const std::string& id, int tokens, bool evicting) {
    PolicyTrace p;
    p.id = id;
    p.label = id;
    p.schedule = "every_step";
    p.bytesHeld = evicting ? 4096 : 8192;
    for (int l = 0; l < 2; ++l) {
        LayerTrace layer;
        layer.budget = evicting ? 6 : tokens;
        for (int kv = 0; kv < 2; ++kv) {
            HeadTrace h;
            for (int i = 0; i < tokens; ++i) {
                h.status.push_back(evicting ? statusPattern(i) : TokenStatus::Held);
                const bool scored = evicting && statusPattern(i) == TokenStatus::Score;
                h.score.push_back(scored ? 0.25f + 0.01f * static_cast<float>(i) : kNoScore);
                h.rank.push_back(scored ? i / 6 : -1);
            }
            h.cutoff = evicting ? 0.2f : kNoScore;
            h.held = evicting ? tokens / 2 : tokens;
            layer.heads.push_back(h);
        }
        layer.retainedMass.assign(8, evicting ? 0.5f : 1.0f);
        layer.outputCosine.assign(8, 1.0f);
        p.layers.push_back(layer);
    }
    for (int s = 0; s < 2; ++s) {
        StepMetrics m;
        m.position = tokens - 2 + s;
        m.kl = evicting ? 0.1 * (s + 1) : 0;
        m.top1Agrees = !(evicting && s == 1);
        m.argmax = evicting && s == 1 ? 7 : 5;
        p.metrics.push_back(m);
    }
    p.generated = {5, 5};
    return p;
}

AttentionMap makeMap(int tokens, bool evicting) {
    std::vector<float> values(static_cast<size_t>(tokens * tokens), kNoScore);
    for (int q = 0; q < tokens; ++q)
        for (int k = 0; k <= q; ++k) {
            const bool evicted = evicting && k == 3 && q > 4;
            values[static_cast<size_t>(q * tokens + k)] = evicted ? kNoScore : 1.0f / static_cast<float>(q + 1);
        }
    return AttentionMap::fromDense(1, 5, tokens, values);
}

}  // namespace

std::shared_ptr<Trace> makeTrace(int tokens) {
    auto t = std::make_shared<Trace>();
    t->step = 2;
    t->promptLength = tokens - 2;
    for (int i = 0; i < tokens; ++i) {
        t->tokens.push_back(10 + i);
        t->labels.push_back("w" + std::to_string(i));
    }
    t->numLayers = 2;
    t->numHeads = 8;
    t->numKvHeads = 2;
    t->policies = {makePolicy("full", tokens, false), makePolicy("h2o", tokens, true)};
    t->attention = {makeMap(tokens, false), makeMap(tokens, true)};
    return t;
}

std::shared_ptr<eval::NeedleGridResult> makeNeedleGrid(const std::vector<int64_t>& contexts,
                                                       const std::vector<double>& depths) {
    auto g = std::make_shared<eval::NeedleGridResult>();
    g->model = "kvlens-tiny";
    for (int64_t context : contexts)
        for (double depth : depths)
            for (const bool full : {true, false}) {
                eval::NeedleCell c;
                c.context = context;
                c.depth = depth;
                c.policy = full ? "full" : "streaming";
                c.budget = full ? "-" : "32";
                const bool missed = !full && depth < 0.5 && context > 128;
                c.exact = missed ? 0.0 : 1.0;
                c.overlap = missed ? 0.25 : 1.0;
                g->cells.push_back(c);
            }
    return g;
}

}  // namespace kvlens::test
