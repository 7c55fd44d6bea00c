#pragma once
// A max-pool mip pyramid over an attention map, so that a view of an
// 8192 × 8192 map costs one pass over the pixels on screen, not over the
// cells: level k holds 2^k × 2^k blocks. Max pooling keeps sinks and heavy
// hitters visible when zoomed out. Cell encoding: a value ≥ 0, NaN for an
// evicted key (not in the query's cache), −inf for a key after the query.
#include <cstdint>
#include <vector>

#include "core/run/trace.h"

namespace kvlens::ui {

class AttentionLod {
public:
    AttentionLod() = default;
    explicit AttentionLod(const AttentionMap& map);

    int64_t size() const { return m_size; }
    int levels() const { return static_cast<int>(m_levels.size()); }
    int64_t levelSize(int level) const;  // cells per side at that level
    float at(int level, int64_t row, int64_t col) const;
    const float* row(int level, int64_t r) const;  // levelSize(level) cells
    // Largest and smallest positive finite value (for colour ranges).
    float maxValue() const { return m_max; }
    float minPositive() const { return m_minPositive; }

    // The finest level whose cells span at least `cellsPerPixel` base cells.
    int levelFor(double cellsPerPixel) const;

    static bool isEvicted(float v);
    static bool isFuture(float v);

private:
    int64_t m_size = 0;
    std::vector<std::vector<float>> m_levels;
    float m_max = 0, m_minPositive = 0;
};

}  // namespace kvlens::ui
