#include "core/cache/kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/host_paths.h"

namespace kvlens {
namespace {

at::Tensor hostLongs(const std::vector<int64_t>& v, int64_t rows, int64_t cols, at::Device device) {
    return at::tensor(v, at::TensorOptions().dtype(at::kLong)).view({rows, cols}).to(device);
}

}  // namespace

KvCache::KvCache(int64_t layers, int64_t kvHeads, int64_t headDim, at::ScalarType dtype, at::Device device,
                 Rerotation rerotate, CacheOptions options)
    : m_kvHeads(kvHeads),
      m_headDim(headDim),
      m_dtype(dtype),
      m_device(device),
      m_rerotate(std::move(rerotate)),
      m_options(options) {
    if (options.rerotate && !m_rerotate) throw ArgumentError("rerotate needs a model with rotary position embeddings");
    m_layers.resize(layers);
    clear();
}

void KvCache::truncate(int64_t n) {
    if (n < 0 || n > m_seqLen) throw Error("KvCache::truncate: " + std::to_string(n) + " of " + std::to_string(m_seqLen) + " tokens");
    for (const Layer& L : m_layers) {
        bool whole = !m_options.rerotate && L.dense && L.used == m_seqLen;
        for (size_t h = 0; whole && h < L.pos.size(); ++h)
            whole = static_cast<int64_t>(L.pos[h].size()) == m_seqLen && (m_seqLen == 0 || L.pos[h].back() == m_seqLen - 1) &&
                    L.holes[h].empty();
        if (!whole) throw Error("KvCache::truncate: only a cache that never evicted can go back to a prefix");
    }
    for (Layer& L : m_layers) {
        L.used = n;
        for (auto& c : L.cols) c.resize(static_cast<size_t>(n));
        for (auto& p : L.pos) p.resize(static_cast<size_t>(n));
        L.indexCache = Entries{};
        L.indexIdentity = L.indexValid = false;
    }
    m_seqLen = n;
    m_peakEntries = entries();
}

void KvCache::clear() {
    m_seqLen = 0;
    m_peakEntries = 0;
    for (auto& L : m_layers) {
        L = Layer{};
        L.cols.assign(m_kvHeads, {});
        L.pos.assign(m_kvHeads, {});
        L.rot.assign(m_kvHeads, {});
        L.holes.assign(m_kvHeads, {});
    }
}

uint64_t KvCache::entries() const {
    uint64_t n = 0;
    for (const Layer& L : m_layers) n += entriesOf(L);
    return n;
}

void KvCache::notePeak() { m_peakEntries = std::max(m_peakEntries, entries()); }

uint64_t KvCache::entriesOf(const Layer& L) const {
    uint64_t n = 0;
    for (const auto& c : L.cols) n += c.size();
    return n;
}

uint64_t KvCache::entryBytes() const {
    return 2ull * static_cast<uint64_t>(m_headDim) * at::elementSize(m_dtype);
}

int64_t KvCache::rotaryPosition(int64_t layer) const {
    return m_options.rerotate ? length(layer, 0) : m_seqLen;
}

int64_t KvCache::length(int64_t layer, int64_t head) const {
    return static_cast<int64_t>(m_layers.at(layer).cols.at(head).size());
}

const std::vector<int64_t>& KvCache::positions(int64_t layer, int64_t head) const {
    return m_layers.at(layer).pos.at(head);
}

const std::vector<int64_t>& KvCache::columns(int64_t layer, int64_t head) const {
    return m_layers.at(layer).cols.at(head);
}

at::Tensor KvCache::positionTensor(int64_t layer) const {
    const Layer& L = m_layers.at(layer);
    std::vector<int64_t> flat(static_cast<size_t>(m_kvHeads * L.used), -1);
    for (int64_t h = 0; h < m_kvHeads; ++h)
        for (size_t i = 0; i < L.cols[h].size(); ++i) flat[h * L.used + L.cols[h][i]] = L.pos[h][i];
    return hostLongs(flat, m_kvHeads, L.used, m_device);
}

void KvCache::reserve(Layer& L, int64_t columns) {
    const int64_t cap = L.k.defined() ? L.k.size(1) : 0;
    if (columns <= cap) return;
    const int64_t newCap = std::max<int64_t>({columns, cap + cap / 2, 16});
    auto opts = at::TensorOptions().dtype(m_dtype).device(m_device);
    at::Tensor k = at::empty({m_kvHeads, newCap, m_headDim}, opts);
    at::Tensor v = at::empty({m_kvHeads, newCap, m_headDim}, opts);
    if (L.used > 0) {
        k.narrow(1, 0, L.used).copy_(L.k.narrow(1, 0, L.used));
        v.narrow(1, 0, L.used).copy_(L.v.narrow(1, 0, L.used));
    }
    if (L.valid.defined()) {
        at::Tensor valid = at::zeros({m_kvHeads, newCap}, opts.dtype(at::kBool));
        valid.narrow(1, 0, L.used).copy_(L.valid.narrow(1, 0, L.used));
        L.valid = valid;
    }
    L.k = k;
    L.v = v;
}

KvCache::LayerView KvCache::append(int64_t layer, const at::Tensor& k, const at::Tensor& v) {
    Layer& L = m_layers.at(layer);
    L.indexValid = false;
    const int64_t n = k.size(1);
    if (k.size(0) != m_kvHeads || k.size(2) != m_headDim || !v.sizes().equals(k.sizes()))
        throw Error("KvCache::append: expected k and v of shape [" + std::to_string(m_kvHeads) + ", n, " +
                    std::to_string(m_headDim) + "]");
    const int64_t rot0 = rotaryPosition(layer);
    if (n == 1 && placeInHoles(L, k, v, rot0)) {
        ++L.ahead;
        notePeak();
        LayerView view{L.k.narrow(1, 0, L.used), L.v.narrow(1, 0, L.used), at::Tensor(), 1, false};
        if (!L.dense) view.valid = L.valid.narrow(1, 0, L.used);
        return view;
    }
    reserve(L, L.used + n);
    L.k.narrow(1, L.used, n).copy_(k);
    L.v.narrow(1, L.used, n).copy_(v);
    if (L.valid.defined()) L.valid.narrow(1, L.used, n).fill_(true);
    for (int64_t h = 0; h < m_kvHeads; ++h)
        for (int64_t i = 0; i < n; ++i) {
            L.cols[h].push_back(L.used + i);
            L.pos[h].push_back(m_seqLen + L.ahead + i);
            if (m_options.rerotate) L.rot[h].push_back(rot0 + i);
        }
    L.used += n;
    L.ahead += n;
    notePeak();
    LayerView view{L.k.narrow(1, 0, L.used), L.v.narrow(1, 0, L.used), at::Tensor(), n};
    if (!L.dense) view.valid = L.valid.narrow(1, 0, L.used);
    return view;
}

void KvCache::advance(int64_t n) {
    m_seqLen += n;
    for (Layer& L : m_layers) L.ahead = 0;
}

bool KvCache::placeInHoles(Layer& L, const at::Tensor& k, const at::Tensor& v, int64_t rot0) {
    for (const auto& h : L.holes)
        if (h.empty()) return false;
    std::vector<int64_t> cols;
    bool holesLeft = false;
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        cols.push_back(L.holes[h].back());
        L.holes[h].pop_back();
        holesLeft = holesLeft || !L.holes[h].empty();
        L.cols[h].push_back(cols.back());
        L.pos[h].push_back(m_seqLen + L.ahead);
        if (m_options.rerotate) L.rot[h].push_back(rot0);
    }
    // Dense again once every freed column is reused and the heads are even.
    bool even = true;
    for (int64_t h = 0; h < m_kvHeads; ++h) even = even && static_cast<int64_t>(L.cols[h].size()) == L.used;
    const bool dense = !holesLeft && even;
    if (onHost(m_device)) {
        // A handful of rows: plain copies beat a dozen small ATen dispatches.
        const at::Tensor kc = k.to(m_dtype).contiguous(), vc = v.to(m_dtype).contiguous();
        const size_t row = static_cast<size_t>(m_headDim) * at::elementSize(m_dtype);
        auto* kd = static_cast<uint8_t*>(L.k.data_ptr());
        auto* vd = static_cast<uint8_t*>(L.v.data_ptr());
        const int64_t cap = L.k.size(1);
        for (int64_t h = 0; h < m_kvHeads; ++h) {
            std::memcpy(kd + (h * cap + cols[h]) * row, static_cast<const uint8_t*>(kc.data_ptr()) + h * row, row);
            std::memcpy(vd + (h * cap + cols[h]) * row, static_cast<const uint8_t*>(vc.data_ptr()) + h * row, row);
            L.valid.data_ptr<bool>()[h * cap + cols[h]] = true;
        }
    } else {
        at::Tensor col = hostLongs(cols, m_kvHeads, 1, m_device);
        at::Tensor index = col.unsqueeze(-1).expand({m_kvHeads, 1, m_headDim});
        L.k.scatter_(1, index, k.to(m_dtype));
        L.v.scatter_(1, index, v.to(m_dtype));
        L.valid.scatter_(1, col, true);
    }
    // Dense again: the mask stays allocated (all true) for the next eviction.
    L.dense = dense;
    return true;
}

bool KvCache::evictInPlace(Layer& L, const std::vector<std::vector<int64_t>>& keep) {
    const int64_t maxHoles = std::max<int64_t>(8, L.used / 8);
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        const int64_t evicted = static_cast<int64_t>(L.cols[h].size() - keep[h].size());
        if (static_cast<int64_t>(L.holes[h].size()) + evicted > maxHoles) return false;
    }
    if (!L.valid.defined()) {
        L.valid = at::zeros({m_kvHeads, L.k.size(1)}, at::TensorOptions().dtype(at::kBool).device(m_device));
        L.valid.narrow(1, 0, L.used).fill_(true);
    }
    L.dense = false;
    std::vector<int64_t> freedHead, freedCol;
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        // Close up the bookkeeping run by run (kept runs move towards the
        // front); the entries between runs free their columns.
        auto &cols = L.cols[h], &pos = L.pos[h];  // no rot: never called under rerotate
        int64_t next = 0;  // first entry not yet kept or freed
        auto freeUpTo = [&](int64_t end) {
            for (; next < end; ++next) {
                L.holes[h].push_back(cols[next]);
                freedHead.push_back(h);
                freedCol.push_back(cols[next]);
            }
        };
        forEachKeptRun(keep[h], [&](int64_t to, int64_t from, int64_t count) {
            freeUpTo(from);
            next = from + count;
            if (to == from) return;
            std::copy(cols.begin() + from, cols.begin() + from + count, cols.begin() + to);
            std::copy(pos.begin() + from, pos.begin() + from + count, pos.begin() + to);
        });
        freeUpTo(static_cast<int64_t>(cols.size()));
        const size_t out = keep[h].size();
        cols.resize(out);
        pos.resize(out);
    }
    if (onHost(m_device)) {
        bool* valid = L.valid.data_ptr<bool>();
        for (size_t i = 0; i < freedHead.size(); ++i) valid[freedHead[i] * L.valid.size(1) + freedCol[i]] = false;
    } else {
        auto opts = at::TensorOptions().dtype(at::kLong);
        L.valid.index_put_({at::tensor(freedHead, opts).to(m_device), at::tensor(freedCol, opts).to(m_device)}, false);
    }
    return true;
}

void KvCache::checkKeep(int64_t layer, const std::vector<std::vector<int64_t>>& keep) const {
    // The invariants every policy must meet; a violation is a bug in the
    // policy, reported instead of corrupting the cache.
    if (layer < 0 || layer >= layers()) throw Error("KvCache::apply: layer " + std::to_string(layer) + " out of range");
    if (static_cast<int64_t>(keep.size()) != m_kvHeads)
        throw Error("KvCache::apply: " + std::to_string(keep.size()) + " keep lists for " +
                    std::to_string(m_kvHeads) + " KV heads");
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        const int64_t len = length(layer, h);
        const std::vector<int64_t>& k = keep[h];
        // One branch-free pass (this runs on every eviction step); the
        // message comes from a second pass only when something is wrong.
        bool ok = k.empty() || (k.front() >= 0 && k.back() < len);
        for (size_t i = 1; i < k.size(); ++i) ok &= k[i] > k[i - 1];
        if (ok) continue;
        for (size_t i = 0; i < k.size(); ++i) {
            const int64_t idx = k[i];
            if (idx < 0 || idx >= len)
                throw Error("KvCache::apply: layer " + std::to_string(layer) + " head " + std::to_string(h) +
                            ": index " + std::to_string(idx) + " outside [0, " + std::to_string(len) + ")");
            if (i > 0 && idx <= k[i - 1])
                throw Error("KvCache::apply: layer " + std::to_string(layer) + " head " + std::to_string(h) +
                            ": keep indices must be sorted and unique");
        }
    }
}

void KvCache::apply(int64_t layer, const std::vector<int64_t>& keep) {
    apply(layer, std::vector<std::vector<int64_t>>(static_cast<size_t>(m_kvHeads), keep));
}

void KvCache::apply(int64_t layer, const std::vector<std::vector<int64_t>>& keep) {
    checkKeep(layer, keep);
    Layer& L = m_layers[layer];
    L.indexValid = false;
    bool unchanged = true, equalLengths = true;
    int64_t newMax = 0;
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        const int64_t kept = static_cast<int64_t>(keep[h].size());
        unchanged = unchanged && kept == length(layer, h);  // sorted+unique+in range => identity
        equalLengths = equalLengths && kept == static_cast<int64_t>(keep[0].size());
        newMax = std::max(newMax, kept);
    }
    // Under rerotate, untouched keys already sit at their cache index.
    if (unchanged) return;
    if (m_options.rerotate && !equalLengths)
        throw ArgumentError("rerotate needs the same kept count in every KV head");
    // A few evictions: free their columns, move nothing. Re-rotation moves
    // every key anyway, so it always compacts.
    if (!m_options.rerotate && evictInPlace(L, keep)) return;

    auto [k, v] = gatherKept(L, keep, newMax);
    storeCompacted(L, k, v, newMax);
    rebuildBookkeeping(L, keep, equalLengths);
}

std::pair<at::Tensor, at::Tensor> KvCache::gatherKept(const Layer& L, const std::vector<std::vector<int64_t>>& keep,
                                                      int64_t newMax) const {
    // Gather indices per head; padding rows point at column 0 and are masked.
    std::vector<int64_t> idx(static_cast<size_t>(m_kvHeads * newMax), 0), delta(idx.size(), 0);
    for (int64_t h = 0; h < m_kvHeads; ++h)
        for (size_t i = 0; i < keep[h].size(); ++i) {
            idx[h * newMax + i] = L.cols[h][keep[h][i]];
            if (m_options.rerotate) delta[h * newMax + i] = static_cast<int64_t>(i) - L.rot[h][keep[h][i]];
        }
    at::Tensor k, v;
    if (onHost(m_device)) {
        // Row copies: a gather with an index expanded over head_dim reads
        // eight bytes of index per element moved.
        k = at::empty({m_kvHeads, newMax, m_headDim}, L.k.options());
        v = at::empty({m_kvHeads, newMax, m_headDim}, L.v.options());
        const size_t row = static_cast<size_t>(m_headDim) * at::elementSize(m_dtype);
        const int64_t cap = L.k.size(1);
        const auto *ks = static_cast<const uint8_t*>(L.k.data_ptr()), *vs = static_cast<const uint8_t*>(L.v.data_ptr());
        auto *kd = static_cast<uint8_t*>(k.data_ptr()), *vd = static_cast<uint8_t*>(v.data_ptr());
        for (int64_t h = 0; h < m_kvHeads; ++h)
            for (int64_t i = 0; i < newMax; ++i) {
                const int64_t from = h * cap + idx[h * newMax + i], to = h * newMax + i;
                std::memcpy(kd + to * row, ks + from * row, row);
                std::memcpy(vd + to * row, vs + from * row, row);
            }
    } else {
        at::Tensor index =
            hostLongs(idx, m_kvHeads, newMax, m_device).unsqueeze(-1).expand({m_kvHeads, newMax, m_headDim});
        k = L.k.narrow(1, 0, L.used).gather(1, index);
        v = L.v.narrow(1, 0, L.used).gather(1, index);
    }
    if (m_options.rerotate) k = m_rerotate(k, hostLongs(delta, m_kvHeads, newMax, m_device));
    return {k, v};
}

void KvCache::storeCompacted(Layer& L, const at::Tensor& k, const at::Tensor& v, int64_t newMax) {
    // Shrink the allocation when it is far larger than what is kept, so that
    // eviction frees memory; otherwise compact in place.
    const int64_t cap = L.k.size(1);
    if (cap > 2 * newMax + 64) {
        L.k = at::Tensor();
        L.v = at::Tensor();
        L.valid = at::Tensor();
        L.used = 0;
        reserve(L, newMax + std::max<int64_t>(16, newMax / 4));
    }
    L.k.narrow(1, 0, newMax).copy_(k);
    L.v.narrow(1, 0, newMax).copy_(v);
    L.used = newMax;
}

void KvCache::rebuildBookkeeping(Layer& L, const std::vector<std::vector<int64_t>>& keep, bool equalLengths) {
    for (auto& h : L.holes) h.clear();
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        std::vector<int64_t> cols(keep[h].size()), pos(keep[h].size());
        std::iota(cols.begin(), cols.end(), int64_t{0});
        for (size_t i = 0; i < keep[h].size(); ++i) pos[i] = L.pos[h][keep[h][i]];
        L.cols[h] = std::move(cols);
        L.pos[h] = std::move(pos);
        if (m_options.rerotate) {  // re-rotated: every key now sits at its index
            L.rot[h].resize(keep[h].size());
            std::iota(L.rot[h].begin(), L.rot[h].end(), int64_t{0});
        }
    }
    L.dense = equalLengths;
    if (equalLengths) {
        L.valid = at::Tensor();
    } else {
        std::vector<int64_t> lens;
        for (int64_t h = 0; h < m_kvHeads; ++h) lens.push_back(static_cast<int64_t>(keep[h].size()));
        at::Tensor lengths = hostLongs(lens, m_kvHeads, 1, m_device);
        at::Tensor cols = at::arange(L.k.size(1), at::TensorOptions().dtype(at::kLong).device(m_device));
        L.valid = cols.unsqueeze(0) < lengths;
    }
}

KvCache::Entries KvCache::entryIndex(int64_t layer, bool* identity) const {
    const Layer& L = m_layers.at(layer);
    if (L.indexValid) {
        *identity = L.indexIdentity;
        return L.indexCache;
    }
    int64_t maxLen = 0;
    *identity = true;  // entry i sits in column i for every head
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        maxLen = std::max<int64_t>(maxLen, static_cast<int64_t>(L.cols[h].size()));
        for (size_t i = 0; i < L.cols[h].size() && *identity; ++i) *identity = L.cols[h][i] == static_cast<int64_t>(i);
    }
    std::vector<int64_t> idx(static_cast<size_t>(m_kvHeads * maxLen), 0), lens;
    bool equal = true;
    for (int64_t h = 0; h < m_kvHeads; ++h) {
        std::copy(L.cols[h].begin(), L.cols[h].end(), idx.begin() + h * maxLen);
        lens.push_back(static_cast<int64_t>(L.cols[h].size()));
        equal = equal && lens.back() == maxLen;
    }
    Entries e;
    e.index = hostLongs(idx, m_kvHeads, maxLen, m_device);
    if (!equal) {
        at::Tensor lengths = hostLongs(lens, m_kvHeads, 1, m_device);
        e.valid = at::arange(maxLen, at::TensorOptions().dtype(at::kLong).device(m_device)).unsqueeze(0) < lengths;
    }
    L.indexCache = e;
    L.indexIdentity = *identity;
    L.indexValid = true;
    return e;
}

KvCache::Entries KvCache::entries(int64_t layer) const {
    const Layer& L = m_layers.at(layer);
    bool identity = true;
    Entries e = entryIndex(layer, &identity);
    const int64_t maxLen = e.index.size(1);
    if (maxLen == 0) {
        auto opts = at::TensorOptions().dtype(m_dtype).device(m_device);
        e.k = at::empty({m_kvHeads, 0, m_headDim}, opts);
        e.v = at::empty({m_kvHeads, 0, m_headDim}, opts);
    } else if (identity) {
        e.k = L.k.narrow(1, 0, maxLen);
        e.v = L.v.narrow(1, 0, maxLen);
    } else {
        at::Tensor g = e.index.unsqueeze(-1).expand({m_kvHeads, maxLen, m_headDim});
        e.k = L.k.narrow(1, 0, L.used).gather(1, g);
        e.v = L.v.narrow(1, 0, L.used).gather(1, g);
    }
    return e;
}

at::Tensor KvCache::entryValid(int64_t layer) const {
    // Heads of one length (every policy but the per-head allocators) need
    // no mask, and so no index either.
    const Layer& L = m_layers.at(layer);
    bool equal = true;
    for (const auto& c : L.cols) equal = equal && c.size() == L.cols.front().size();
    if (equal) return at::Tensor();
    bool identity = true;
    return entryIndex(layer, &identity).valid;
}

at::Tensor KvCache::byEntry(int64_t layer, const at::Tensor& x) const {
    if (onHostF32(x)) {
        // Host loop: one pass over the entries instead of a chain of small
        // ATen ops (index build, repeat, gather, mask) on every step.
        const Layer& L = m_layers.at(layer);
        const int64_t H = x.size(0), n = x.size(1), S = x.size(2), G = H / m_kvHeads;
        // Entry i in column i of every head (a cache that never evicted, or
        // compacted): already in entry order. A prompt's attention is
        // [Hq, n, n]: the copy cost a replay's follower 2-3 ms a layer.
        bool identity = true;
        for (const auto& cols : L.cols) {
            identity = identity && static_cast<int64_t>(cols.size()) == S;
            for (size_t e = 0; identity && e < cols.size(); ++e) identity = cols[e] == static_cast<int64_t>(e);
        }
        if (identity) return x;
        int64_t Lmax = 0;
        for (const auto& c : L.cols) Lmax = std::max<int64_t>(Lmax, static_cast<int64_t>(c.size()));
        at::Tensor out = at::empty({H, n, Lmax}, x.options());
        const at::Tensor xc = x.contiguous();
        const float* src = xc.data_ptr<float>();
        float* dst = out.data_ptr<float>();
        for (int64_t h = 0; h < H; ++h) {
            const auto& cols = L.cols[h / G];
            for (int64_t i = 0; i < n; ++i) {
                const float* s = src + (h * n + i) * S;
                float* d = dst + (h * n + i) * Lmax;
                for (size_t e = 0; e < cols.size(); ++e) d[e] = s[cols[e]];
                std::fill(d + cols.size(), d + Lmax, 0.0f);  // a shorter head's padding
            }
        }
        return out;
    }
    bool identity = true;
    const Entries e = entryIndex(layer, &identity);
    const int64_t H = x.size(0), n = x.size(1), G = H / m_kvHeads, Lmax = e.index.size(1);
    at::Tensor out;
    if (identity) {
        out = x.narrow(2, 0, Lmax);
    } else {
        at::Tensor idx = e.index.to(x.device()).repeat_interleave(G, 0).unsqueeze(1).expand({H, n, Lmax});
        out = x.gather(2, idx);
    }
    if (e.valid.defined())
        out = out * e.valid.to(x.device()).repeat_interleave(G, 0).unsqueeze(1).to(out.scalar_type());
    return out;
}

uint64_t KvCache::bytesHeld(int64_t layer) const { return entriesOf(m_layers.at(layer)) * entryBytes(); }

uint64_t KvCache::bytesAllocated(int64_t layer) const {
    const Layer& L = m_layers.at(layer);
    return L.k.defined() ? static_cast<uint64_t>(L.k.nbytes() + L.v.nbytes()) : 0;
}

uint64_t KvCache::bytesHeld() const { return entries() * entryBytes(); }

uint64_t KvCache::bytesAllocated() const {
    uint64_t n = 0;
    for (int64_t l = 0; l < layers(); ++l) n += bytesAllocated(l);
    return n;
}

uint64_t KvCache::bytesInUse() const {
    uint64_t cols = 0;
    for (const auto& L : m_layers) cols += static_cast<uint64_t>(L.used * m_kvHeads);
    return cols * entryBytes();
}

}  // namespace kvlens
