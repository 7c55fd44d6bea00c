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

    // The finest level held: 0, or for a map past kMaxSide cells a side the
    // first level that fits (at() still reads level 0 from the map).
    static constexpr int64_t kMaxSide = 4096;
    int firstLevel() const { return m_first; }
    int64_t size() const { return m_size; }
    int levels() const { return static_cast<int>(m_levels.size()); }
    int64_t levelSize(int level) const;  // cells per side at that level
    float at(int level, int64_t row, int64_t col) const;  // level 0 or >= firstLevel()
    const float* row(int level, int64_t r) const;  // levelSize(level) cells
    // Largest and smallest positive finite value (for colour ranges).
    float maxValue() const { return m_max; }
    float minPositive() const { return m_minPositive; }

    // The finest level held whose cells span at least `cellsPerPixel` base cells.
    int levelFor(double cellsPerPixel) const;

    static bool isEvicted(float v);
    static bool isFuture(float v);

private:
    int64_t m_size = 0;
    int m_first = 0;
    AttentionMap m_map;  // its rows are shared, not copied
    std::vector<std::vector<float>> m_levels;
    float m_max = 0, m_minPositive = 0;
};

}  // namespace kvlens::ui
