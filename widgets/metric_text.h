#pragma once
// Metric values as text. A number computed from NaN is never shown as a
// number: a non-finite value (a run whose logits became NaN/Inf, a mean over
// no steps) reads "n/a", and so does every metric of a run that stopped.
#include <QString>
#include <cmath>

#include "core/run/trace.h"

namespace kvlens::ui {

inline QString metricText(double value, int decimals) {
    return std::isfinite(value) ? QString::number(value, 'f', decimals) : QStringLiteral("n/a");
}

// A share (0..1) as "83%", or "n/a".
inline QString percentText(double share, int decimals = 0) {
    return std::isfinite(share) ? QString::number(100.0 * share, 'f', decimals) + QLatin1Char('%') : QStringLiteral("n/a");
}

// "stopped: <reason>" for a run that stopped (PolicyTrace::failure, which
// may say "stopped" itself), else empty.
inline QString stoppedText(const PolicyTrace& p) {
    const QString why = QString::fromStdString(p.failure);
    if (why.isEmpty() || why.startsWith(QLatin1String("stopped"))) return why;
    return QStringLiteral("stopped: %1").arg(why);
}

// A run's summary metric: n/a once the run stopped, whatever was computed.
inline double runMetric(const PolicyTrace& p, double value) {
    return p.failure.empty() ? value : std::nan("");
}

}  // namespace kvlens::ui
