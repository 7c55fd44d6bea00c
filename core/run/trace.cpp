#include "core/run/trace.h"

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

double PolicyTrace::meanKl() const {
    if (metrics.empty()) return std::nan("");
    double sum = 0;
    for (const auto& m : metrics) sum += m.kl;
    return sum / static_cast<double>(metrics.size());
}

double PolicyTrace::meanRetainedMass() const {
    if (metrics.empty()) return std::nan("");
    double sum = 0;
    for (const auto& m : metrics) sum += m.retainedMass;
    return sum / static_cast<double>(metrics.size());
}

double PolicyTrace::meanOutputCosine() const {
    if (metrics.empty()) return std::nan("");
    double sum = 0;
    for (const auto& m : metrics) sum += m.outputCosine;
    return sum / static_cast<double>(metrics.size());
}

double PolicyTrace::top1Agreement() const {
    if (metrics.empty()) return std::nan("");
    int64_t agree = 0;
    for (const auto& m : metrics) agree += m.top1Agrees ? 1 : 0;
    return static_cast<double>(agree) / static_cast<double>(metrics.size());
}

}  // namespace kvlens
