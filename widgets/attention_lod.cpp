#include "widgets/attention_lod.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvlens::ui {
namespace {

constexpr float kFuture = -std::numeric_limits<float>::infinity();

// Max over the finite values of a block; a block with none is evicted if any
// of its cells is, otherwise future.
float pool(float a, float b, bool& anyEvicted) {
    if (std::isnan(b)) {
        anyEvicted = true;
        return a;
    }
    return std::max(a, b);
}

std::vector<float> downsample(const std::vector<float>& src, int64_t n) {
    const int64_t m = (n + 1) / 2;
    std::vector<float> out(static_cast<size_t>(m * m));
    for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < m; ++c) {
            float best = kFuture;
            bool anyEvicted = false;
            for (int64_t dr = 0; dr < 2; ++dr)
                for (int64_t dc = 0; dc < 2; ++dc) {
                    const int64_t rr = 2 * r + dr, cc = 2 * c + dc;
                    if (rr < n && cc < n) best = pool(best, src[static_cast<size_t>(rr * n + cc)], anyEvicted);
                }
            out[static_cast<size_t>(r * m + c)] =
                best == kFuture && anyEvicted ? std::numeric_limits<float>::quiet_NaN() : best;
        }
    return out;
}

}  // namespace

AttentionLod::AttentionLod(const AttentionMap& map) : m_size(map.size), m_map(map) {
    if (m_size <= 0 || map.rows.size() != static_cast<size_t>(m_size)) {
        m_size = 0;
        return;
    }
    // The finest level kept: a map past kMaxSide cells a side starts at the
    // level that fits (a 38k-token map would take 5.8 GB at one float a cell).
    while (levelSize(m_first) > kMaxSide) ++m_first;
    const int64_t block = int64_t{1} << m_first, m = levelSize(m_first);
    std::vector<float> base(static_cast<size_t>(m * m), kFuture);
    std::vector<uint8_t> evicted(base.size(), 0);
    m_minPositive = std::numeric_limits<float>::infinity();
    for (int64_t q = 0; q < m_size; ++q)
        for (int64_t k = 0; k < m_size; ++k) {
            const float v = map.at(q, k);
            // The map marks both evicted and future keys NaN; causality tells them apart.
            const size_t cell = static_cast<size_t>((q / block) * m + k / block);
            if (std::isnan(v)) {
                if (k <= q) evicted[cell] = 1;
                continue;
            }
            base[cell] = std::max(base[cell], v);
            m_max = std::max(m_max, v);
            if (v > 0) m_minPositive = std::min(m_minPositive, v);
        }
    // A block with no value is evicted if any of its cells is, otherwise future (as pool()).
    for (size_t i = 0; i < base.size(); ++i)
        if (base[i] == kFuture && evicted[i]) base[i] = std::numeric_limits<float>::quiet_NaN();
    if (!std::isfinite(m_minPositive)) m_minPositive = 0;
    m_levels.resize(static_cast<size_t>(m_first));
    m_levels.push_back(std::move(base));
    for (int64_t n = m; n > 1; n = (n + 1) / 2) m_levels.push_back(downsample(m_levels.back(), n));
}

int64_t AttentionLod::levelSize(int level) const {
    int64_t n = m_size;
    for (int i = 0; i < level; ++i) n = (n + 1) / 2;
    return n;
}

float AttentionLod::at(int level, int64_t row, int64_t col) const {
    if (level == 0 && m_first > 0) {  // the cell itself, from the map
        const float v = m_map.at(row, col);
        return std::isnan(v) && col > row ? kFuture : v;
    }
    return m_levels[static_cast<size_t>(level)][static_cast<size_t>(row * levelSize(level) + col)];
}

const float* AttentionLod::row(int level, int64_t r) const {
    return m_levels[static_cast<size_t>(level)].data() + r * levelSize(level);
}

int AttentionLod::levelFor(double cellsPerPixel) const {
    // The finest level whose cells are at least a pixel wide: finer levels
    // would have the scaled image skip cells, and so lose their maxima.
    int level = m_first;
    while (level + 1 < levels() && static_cast<double>(int64_t{1} << level) < cellsPerPixel) ++level;
    return level;
}

bool AttentionLod::isEvicted(float v) { return std::isnan(v); }
bool AttentionLod::isFuture(float v) { return v == kFuture; }

}  // namespace kvlens::ui
