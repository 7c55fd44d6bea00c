#include "core/run/trace.h"

#include <algorithm>

namespace kvlens {

const char* tokenStatusName(TokenStatus s) {
    switch (s) {
        case TokenStatus::Unseen: return "unseen";
        case TokenStatus::Held: return "held";
        case TokenStatus::Score: return "kept";
        case TokenStatus::Sink: return "sink";
        case TokenStatus::Window: return "window";
        case TokenStatus::Evicted: return "evicted";
    }
    return "?";
}

double PolicyTrace::perplexity() const {
    double sum = 0;
    int64_t n = 0;
    for (const auto& m : metrics)
        if (!std::isnan(m.targetLogProb)) {
            sum -= m.targetLogProb;
            ++n;
        }
    return n ? std::exp(sum / static_cast<double>(n)) : std::nan("");
}

namespace {

template <class F>
double meanOver(const std::vector<StepMetrics>& metrics, F value) {
    if (metrics.empty()) return std::nan("");
    double sum = 0;
    for (const auto& m : metrics) sum += value(m);
    return sum / static_cast<double>(metrics.size());
}

}  // namespace

std::vector<float> AttentionMap::dense() const {
    std::vector<float> out(static_cast<size_t>(size * size), kNoScore);
    for (int64_t q = 0; q < size; ++q) {
        const Row& r = rows[static_cast<size_t>(q)];
        if (r) std::copy_n(r->begin(), std::min<int64_t>(size, static_cast<int64_t>(r->size())), out.begin() + q * size);
    }
    return out;
}

AttentionMap AttentionMap::fromDense(int64_t layer, int64_t head, int64_t size, const std::vector<float>& values) {
    AttentionMap m;
    m.layer = layer;
    m.head = head;
    m.size = size;
    m.rows.reserve(static_cast<size_t>(size));
    for (int64_t q = 0; q < size; ++q)
        m.rows.push_back(std::make_shared<const std::vector<float>>(values.begin() + q * size, values.begin() + (q + 1) * size));
    return m;
}

double PolicyTrace::meanKl() const { return meanOver(metrics, [](const StepMetrics& m) { return m.kl; }); }

double PolicyTrace::meanRetainedMass() const {
    return meanOver(metrics, [](const StepMetrics& m) { return m.retainedMass; });
}

double PolicyTrace::meanOutputCosine() const {
    return meanOver(metrics, [](const StepMetrics& m) { return m.outputCosine; });
}

double PolicyTrace::meanBytesHeld() const {
    return meanOver(metrics, [](const StepMetrics& m) { return static_cast<double>(m.bytesHeld); });
}

uint64_t PolicyTrace::peakBytesHeld() const {
    uint64_t peak = std::max(promptPeakBytes, bytesHeld);
    for (const auto& m : metrics) peak = std::max(peak, m.bytesHeld);
    return peak;
}

double PolicyTrace::top1Agreement() const {
    return meanOver(metrics, [](const StepMetrics& m) { return m.top1Agrees ? 1.0 : 0.0; });
}

double keptJaccard(const PolicyTrace& a, const PolicyTrace& b, int64_t layer, int64_t kvHead) {
    const auto& sa = a.layers.at(static_cast<size_t>(layer)).heads.at(static_cast<size_t>(kvHead)).status;
    const auto& sb = b.layers.at(static_cast<size_t>(layer)).heads.at(static_cast<size_t>(kvHead)).status;
    const size_t n = std::max(sa.size(), sb.size());
    int64_t both = 0, either = 0;
    for (size_t i = 0; i < n; ++i) {
        const bool ha = i < sa.size() && isHeld(sa[i]), hb = i < sb.size() && isHeld(sb[i]);
        both += ha && hb ? 1 : 0;
        either += ha || hb ? 1 : 0;
    }
    return either ? static_cast<double>(both) / static_cast<double>(either) : std::nan("");
}

double keptJaccardMean(const PolicyTrace& a, const PolicyTrace& b) {
    double sum = 0;
    int64_t n = 0;
    for (size_t l = 0; l < std::min(a.layers.size(), b.layers.size()); ++l)
        for (size_t h = 0; h < std::min(a.layers[l].heads.size(), b.layers[l].heads.size()); ++h) {
            const double j = keptJaccard(a, b, static_cast<int64_t>(l), static_cast<int64_t>(h));
            if (!std::isnan(j)) sum += j, ++n;
        }
    return n ? sum / static_cast<double>(n) : std::nan("");
}

}  // namespace kvlens
