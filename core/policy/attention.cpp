#include "core/policy/attention.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/host_paths.h"

namespace kvlens {
namespace {

at::Tensor headLengths(const LayerState& state, at::Device device) {
    std::vector<int64_t> lens;
    for (int64_t h = 0; h < state.numKvHeads; ++h) lens.push_back(state.length(h));
    return at::tensor(lens, at::TensorOptions().dtype(at::kLong)).view({state.numKvHeads, 1}).to(device);
}

int64_t maxLength(const LayerState& state) { return state.maxLength(); }

at::Tensor columnIndex(int64_t L, at::Device device) {
    return at::arange(L, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(0);
}

at::Device stateDevice(const LayerState& state) {
    return state.keys.defined() ? state.keys.device() : state.device;
}

}  // namespace

at::Tensor entryMask(const LayerState& state) {
    const at::Device dev = stateDevice(state);
    return columnIndex(maxLength(state), dev) < headLengths(state, dev);
}

at::Tensor entryPositions(const LayerState& state) {
    const int64_t L = maxLength(state);
    std::vector<int64_t> flat(static_cast<size_t>(state.numKvHeads * L), std::numeric_limits<int64_t>::max());
    for (int64_t h = 0; h < state.numKvHeads; ++h)
        std::copy(state.positions[h].begin(), state.positions[h].end(), flat.begin() + h * L);
    return at::tensor(flat, at::TensorOptions().dtype(at::kLong)).view({state.numKvHeads, L}).to(stateDevice(state));
}

at::Tensor edgeMask(const LayerState& state, int64_t sinks, int64_t window) {
    const at::Device dev = stateDevice(state);
    const at::Tensor col = columnIndex(maxLength(state), dev), len = headLengths(state, dev);
    return (col < len) & ((col < sinks) | (col >= len - window));
}

at::Tensor attentionOver(const LayerState& state, const at::Tensor& queries, const std::vector<int64_t>& qpos) {
    const int64_t Hkv = state.numKvHeads, Hq = queries.size(0), G = Hq / Hkv, m = queries.size(1);
    const int64_t L = maxLength(state), D = queries.size(2);
    const at::Device dev = stateDevice(state);
    const at::Tensor k = state.keys.to(at::kFloat);
    const at::Tensor q = queries.to(dev, at::kFloat).reshape({Hkv, G * m, D});
    const double scale = state.scale > 0 ? state.scale : 1.0 / std::sqrt(static_cast<double>(D));
    at::Tensor logits = at::matmul(q, k.transpose(1, 2)).mul_(scale).view({Hkv, G, m, L});
    // Entries at or before the earliest query are seen by every query: only
    // those after it (the window's own keys, and padding) need the causal
    // mask, so it is built and applied on that tail alone.
    const int64_t earliest = qpos.empty() ? 0 : *std::min_element(qpos.begin(), qpos.end());
    int64_t first = L;
    for (int64_t h = 0; h < Hkv; ++h) {
        const auto& pos = state.positions[h];
        first = std::min<int64_t>(first, std::upper_bound(pos.begin(), pos.end(), earliest) - pos.begin());
    }
    if (first == L) return at::softmax(logits, -1);
    const int64_t tail = L - first;
    const at::Tensor qp = at::tensor(qpos, at::TensorOptions().dtype(at::kLong)).to(dev).view({1, 1, m, 1});
    const at::Tensor hidden = entryPositions(state).narrow(1, first, tail).reshape({Hkv, 1, 1, tail}) > qp;
    logits.narrow(3, first, tail).masked_fill_(hidden, -std::numeric_limits<double>::infinity());
    // A query whose keys were all evicted gives a NaN row; it attends nowhere.
    at::Tensor probs = at::softmax(logits, -1);
    probs.narrow(3, first, tail).masked_fill_(hidden, 0);  // entries before the tail are seen by all
    return probs;
}

void QueryWindow::add(int64_t layer, const Observation& obs) {
    if (m_size <= 0 || !obs.queries.defined()) return;
    if (static_cast<int64_t>(m_layers.size()) <= layer) m_layers.resize(static_cast<size_t>(layer + 1));
    Layer& w = m_layers[static_cast<size_t>(layer)];
    // Only the tail of a batch can stay (a whole prompt at prefill_once).
    const int64_t n = obs.queries.size(1), tail = std::min(n, m_size);
    const at::Tensor q = obs.queries.narrow(1, n - tail, tail).to(at::kFloat);
    w.queries = w.queries.defined() ? at::cat({w.queries.to(q.device()), q}, 1) : q;
    w.positions.insert(w.positions.end(), obs.queryPositions.end() - tail, obs.queryPositions.end());
    const int64_t m = w.queries.size(1);
    if (m > m_size) {
        w.queries = w.queries.narrow(1, m - m_size, m_size).contiguous();
        w.positions.erase(w.positions.begin(), w.positions.end() - m_size);
    }
}

at::Tensor QueryWindow::queries(int64_t layer) const {
    return layer < static_cast<int64_t>(m_layers.size()) ? m_layers[static_cast<size_t>(layer)].queries : at::Tensor();
}

std::vector<int64_t> QueryWindow::positions(int64_t layer) const {
    return layer < static_cast<int64_t>(m_layers.size()) ? m_layers[static_cast<size_t>(layer)].positions
                                                         : std::vector<int64_t>();
}

at::Tensor& EntryStats::grown(int64_t layer, int64_t heads, int64_t length, at::Device device) {
    if (static_cast<int64_t>(m_layers.size()) <= layer) {
        m_layers.resize(static_cast<size_t>(layer + 1));
        m_lengths.resize(static_cast<size_t>(layer + 1), 0);
    }
    at::Tensor& t = m_layers[static_cast<size_t>(layer)];
    int64_t& used = m_lengths[static_cast<size_t>(layer)];
    if (t.defined() && t.device() != device) t = t.to(device);
    const int64_t capacity = t.defined() ? t.size(1) : 0;
    if (capacity < length) {
        at::Tensor bigger = at::zeros({heads, std::max<int64_t>({length, capacity + capacity / 2, 16})},
                                      at::TensorOptions().dtype(at::kFloat).device(device));
        if (used > 0) bigger.narrow(1, 0, used).copy_(t.narrow(1, 0, used));
        t = bigger;
    }
    if (used < length) {  // new entries start from zero
        if (onHostF32(t) && t.is_contiguous()) {
            float* data = t.data_ptr<float>();
            const int64_t cap = t.size(1);
            for (int64_t h = 0; h < t.size(0); ++h) std::fill(data + h * cap + used, data + h * cap + length, 0.0f);
        } else {
            t.narrow(1, used, length - used).zero_();
        }
    }
    used = std::max(used, length);
    return t;
}

at::Tensor EntryStats::forState(const LayerState& state) {
    const int64_t L = maxLength(state);
    return grown(state.layer, state.numKvHeads, L, stateDevice(state)).narrow(1, 0, L);
}

void EntryStats::realign(int64_t layer, const std::vector<std::vector<int64_t>>& keep) {
    if (layer >= static_cast<int64_t>(m_layers.size()) || !m_layers[static_cast<size_t>(layer)].defined()) return;
    int64_t newMax = 0, needed = 0;
    for (const auto& k : keep) {
        newMax = std::max<int64_t>(newMax, static_cast<int64_t>(k.size()));
        if (!k.empty()) needed = std::max(needed, k.back() + 1);
    }
    const auto heads = static_cast<int64_t>(keep.size());
    at::Tensor& t = grown(layer, heads, needed, m_layers[static_cast<size_t>(layer)].device());
    if (onHostF32(t) && t.is_contiguous()) {
        // In place, row by row: kept indices are increasing, so each write
        // lands at or before the entry it reads.
        float* data = t.data_ptr<float>();
        const int64_t cap = t.size(1);
        for (int64_t h = 0; h < heads; ++h) {
            float* row = data + h * cap;
            const auto& k = keep[static_cast<size_t>(h)];
            forEachKeptRun(k, [&](int64_t to, int64_t from, int64_t count) {
                if (to != from) std::copy(row + from, row + from + count, row + to);
            });
            std::fill(row + k.size(), row + newMax, 0.0f);
        }
        m_lengths[static_cast<size_t>(layer)] = newMax;
        return;
    }
    std::vector<int64_t> idx(static_cast<size_t>(heads * newMax), 0), lens;
    for (size_t h = 0; h < keep.size(); ++h) {
        std::copy(keep[h].begin(), keep[h].end(), idx.begin() + static_cast<int64_t>(h) * newMax);
        lens.push_back(static_cast<int64_t>(keep[h].size()));
    }
    const at::Tensor index = at::tensor(idx, at::TensorOptions().dtype(at::kLong)).view({heads, newMax}).to(t.device());
    at::Tensor kept = t.narrow(1, 0, std::max<int64_t>(needed, 1)).gather(1, index);
    if (newMax > 0) {
        const at::Tensor len = at::tensor(lens, at::TensorOptions().dtype(at::kLong)).view({heads, 1}).to(t.device());
        kept.masked_fill_(columnIndex(newMax, t.device()) >= len, 0);
    }
    t.narrow(1, 0, newMax).copy_(kept);  // gather made a copy: no overlap
    m_lengths[static_cast<size_t>(layer)] = newMax;
}

void EntryStats::set(int64_t layer, const at::Tensor& stats) {
    if (static_cast<int64_t>(m_layers.size()) <= layer) {
        m_layers.resize(static_cast<size_t>(layer + 1));
        m_lengths.resize(static_cast<size_t>(layer + 1), 0);
    }
    m_layers[static_cast<size_t>(layer)] = stats.to(at::kFloat);
    m_lengths[static_cast<size_t>(layer)] = stats.size(1);
}

}  // namespace kvlens
