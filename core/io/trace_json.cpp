#include "core/io/trace_json.h"

namespace kvlens {

using nlohmann::json;

char tokenStatusChar(TokenStatus s) {
    switch (s) {
        case TokenStatus::Unseen: return '.';
        case TokenStatus::Held: return 'h';
        case TokenStatus::Score: return 'k';
        case TokenStatus::Sink: return 's';
        case TokenStatus::Window: return 'w';
        case TokenStatus::Evicted: return 'x';
    }
    return '?';
}

namespace {

// NaN has no JSON spelling: write null.
json number(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json floats(const std::vector<float>& v) {
    json a = json::array();
    for (float f : v) a.push_back(number(f));
    return a;
}

json layerJson(const LayerTrace& l) {
    json heads = json::array();
    for (const auto& h : l.heads) {
        std::string status;
        for (TokenStatus s : h.status) status.push_back(tokenStatusChar(s));
        heads.push_back({{"held", h.held}, {"cutoff", number(h.cutoff)}, {"status", status},
                         {"score", floats(h.score)}, {"rank", h.rank}});
    }
    return {{"budget", l.budget}, {"heads", heads}, {"retained_mass", floats(l.retainedMass)},
            {"output_cosine", floats(l.outputCosine)}};
}

json metricsJson(const std::vector<StepMetrics>& ms) {
    json a = json::array();
    for (const auto& m : ms)
        a.push_back({{"position", m.position}, {"kl", number(m.kl)}, {"top1_agrees", m.top1Agrees},
                     {"target_logprob", number(m.targetLogProb)}, {"argmax", m.argmax},
                     {"retained_mass", number(m.retainedMass)}, {"output_cosine", number(m.outputCosine)},
                     {"kv_bytes_held", m.bytesHeld}});
    return a;
}

}  // namespace

json policySummaryJson(const PolicyTrace& p) {
    return {{"mean_kl", number(p.meanKl())},
            {"top1_agreement", number(p.top1Agreement())},
            {"perplexity", number(p.perplexity())},
            {"retained_mass", number(p.meanRetainedMass())},
            {"output_cosine", number(p.meanOutputCosine())},
            {"kv_bytes_held", p.bytesHeld},
            {"kv_bytes_allocated", p.bytesAllocated},
            {"mean_kv_bytes_held", number(p.meanBytesHeld())},
            {"peak_kv_bytes_held", p.peakBytesHeld()},
            {"diverged_at", p.divergedAt}};
}

json rankingJson(const Ranking& r) {
    json runs = json::array();
    for (const RankedRun& row : r.rows)
        runs.push_back({{"label", row.label},
                        {"rank", row.rank == 0 ? json(nullptr) : json(row.rank)},
                        {"budget", number(row.budget)},
                        {"mean_kl", number(row.meanKl)},
                        {"top1_agreement", number(row.top1)},
                        {"perplexity", number(row.perplexity)},
                        {"retained_mass", number(row.retainedMass)},
                        {"mean_kv_bytes_held", number(row.meanBytes)},
                        {"peak_kv_bytes_held", row.peakBytes},
                        {"memory_share", number(row.memoryShare)},
                        {"unequal_memory", row.unequalMemory},
                        {"oracle_agreement", number(row.oracleAgreement)}});
    return {{"matched", r.matched}, {"reference_kv_bytes", number(r.referenceBytes)}, {"tolerance", r.tolerance},
            {"unequal", r.unequal}, {"note", r.note}, {"runs", runs}};
}

// Kept-set agreement of every pair of eviction runs (runs 1..N): the mean
// Jaccard overlap over layers × KV heads, and per layer and KV head with the layers.
static json agreementJson(const Trace& t, bool withLayers) {
    json labels = json::array(), mean = json::array();
    const size_t n = t.policies.size();
    for (size_t a = 1; a < n; ++a) {
        labels.push_back(t.policies[a].label);
        json row = json::array();
        for (size_t b = 1; b < n; ++b) row.push_back(number(keptJaccardMean(t.policies[a], t.policies[b])));
        mean.push_back(row);
    }
    json out = {{"what", "Jaccard overlap |A and B| / |A or B| of the token positions two runs hold at this step"},
                {"policies", labels},
                {"mean", mean}};
    if (withLayers) {
        json layers = json::array();
        for (int64_t l = 0; l < t.numLayers; ++l) {
            json heads = json::array();
            for (int64_t h = 0; h < t.numKvHeads; ++h) {
                json m = json::array();
                for (size_t a = 1; a < n; ++a) {
                    json row = json::array();
                    for (size_t b = 1; b < n; ++b) row.push_back(number(keptJaccard(t.policies[a], t.policies[b], l, h)));
                    m.push_back(row);
                }
                heads.push_back(m);
            }
            layers.push_back(heads);
        }
        out["by_layer"] = layers;  // [layer][kv head][policy][policy]
    }
    return out;
}

json traceToJson(const Trace& t, bool withLayers) {
    json policies = json::array();
    for (const auto& p : t.policies) {
        json j = {{"id", p.id},
                  {"label", p.label},
                  {"schedule", p.schedule},
                  {"rerotate", p.rerotate},
                  {"budget_note", p.budgetNote},
                  {"failure", p.failure},
                  {"generated", p.generated},
                  {"summary", policySummaryJson(p)},
                  {"metrics", metricsJson(p.metrics)}};
        json budgets = json::array();
        for (const auto& l : p.layers) budgets.push_back(l.budget);
        j["layer_budgets"] = budgets;
        if (withLayers) {
            json layers = json::array();
            for (const auto& l : p.layers) layers.push_back(layerJson(l));
            j["layers"] = layers;
        }
        policies.push_back(j);
    }
    json out = {{"format", "kvlens-trace"},
                {"version", 1},
                {"step", t.step},
                {"prompt_length", t.promptLength},
                {"teacher_forced", t.teacherForced},
                {"sliding_window", t.slidingWindow},
                {"layers", t.numLayers},
                {"query_heads", t.numHeads},
                {"kv_heads", t.numKvHeads},
                {"tokens", t.tokens},
                {"labels", t.labels},
                {"policies", policies}};
    out["agreement"] = agreementJson(t, withLayers);
    if (!t.attention.empty()) {
        json maps = json::array();
        for (const auto& m : t.attention)
            maps.push_back({{"layer", m.layer}, {"head", m.head}, {"size", m.size}, {"values", floats(m.dense())}});
        out["attention"] = maps;
    }
    return out;
}

}  // namespace kvlens
