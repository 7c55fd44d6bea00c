#include "core/policy/select.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/host_paths.h"

namespace kvlens {

at::Tensor reduceGroups(const at::Tensor& x, int64_t numKvHeads, GqaReduce how) {
    const int64_t G = x.size(0) / numKvHeads;
    std::vector<int64_t> shape = {numKvHeads, G};
    for (int64_t d = 1; d < x.dim(); ++d) shape.push_back(x.size(d));
    const at::Tensor grouped = x.reshape(shape);
    switch (how) {
    case GqaReduce::Max: return grouped.amax(1);
    case GqaReduce::Sum: return grouped.sum(1);
    case GqaReduce::Mean: break;
    }
    return grouped.mean(1);
}

PoolKind poolKind(const std::string& name) {
    if (name == "max") return PoolKind::Max;
    if (name == "avg") return PoolKind::Avg;
    throw ArgumentError("pool=" + name + " is not one of max, avg");
}

namespace {

// The max over every window of k consecutive entries of b (size n >= k):
// out[j] = max b[j .. j+k-1] for j < n - k + 1. Maxima over doubling spans
// (1, 2, 4, ... P <= k), then two overlapping spans of P cover k: log2(k)
// vectorised passes instead of k.
void windowMax(std::vector<float>& b, int64_t k, float* out, int64_t count, std::vector<float>& tmp) {
    int64_t span = 1;  // b[j] = the max of the `span` entries from j, for every j < b.size()
    for (; 2 * span <= k; span *= 2) {
        const auto m = static_cast<int64_t>(b.size()) - span;
        tmp.resize(static_cast<size_t>(m));
        for (int64_t j = 0; j < m; ++j) tmp[j] = std::max(b[j], b[j + span]);
        b.swap(tmp);
    }
    const int64_t shift = k - span;  // 0 <= shift <= span
    for (int64_t j = 0; j < count; ++j) out[j] = std::max(b[j], b[j + shift]);
}

// pool1d on the CPU for fp32: max by doubling spans (windowMax), mean by
// `kernel` shifted passes over the masked row (each vectorises), instead of
// ATen's pad + unfold + reduce over windows of a few elements.
at::Tensor pool1dHost(const at::Tensor& x, const at::Tensor& mask, int64_t kernel, PoolKind kind) {
    const at::Tensor xc = x.contiguous();
    // The mask is read through its broadcast strides (a [Hkv, 1, 1, L] mask
    // over [Hkv, G, m, L] rows is not copied m·G times); rows with a
    // contiguous last dimension only.
    at::Tensor mc = mask.defined() ? mask.expand(x.sizes()) : at::Tensor();
    if (mc.defined() && mc.stride(-1) != 1) mc = mc.contiguous();
    at::Tensor out = at::empty(x.sizes(), x.options());
    const int64_t L = x.size(-1), rows = L ? x.numel() / L : 0, left = kernel / 2;
    const float* xs = xc.data_ptr<float>();
    const bool* ms = mc.defined() ? mc.data_ptr<bool>() : nullptr;
    auto maskRow = [&](int64_t r) {  // r in row-major order over every dimension but the last
        int64_t offset = 0;
        for (int64_t d = x.dim() - 2; d >= 0; --d) {
            offset += (r % x.size(d)) * mc.stride(d);
            r /= x.size(d);
        }
        return ms + offset;
    };
    float* os = out.data_ptr<float>();
    const float lowest = -std::numeric_limits<float>::infinity();
    // Rows in parallel (SnapKV pools [Hkv, G, L], AnDPro [Hkv, G, m, L]).
    at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(L, 1)), [&](int64_t begin, int64_t end) {
        std::vector<float> padded, tmp, value, count, acc, seen;  // max uses the first two, mean the rest
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = xs + r * L;
            const bool* mr = ms ? maskRow(r) : nullptr;
            float* o = os + r * L;
            if (kind == PoolKind::Max) {
                // Entries that do not exist or are masked read as -inf.
                padded.assign(static_cast<size_t>(L + kernel - 1), lowest);
                for (int64_t i = 0; i < L; ++i) padded[i + left] = !mr || mr[i] ? xr[i] : lowest;
                windowMax(padded, kernel, o, L, tmp);
                if (mr)
                    for (int64_t j = 0; j < L; ++j) o[j] = mr[j] ? o[j] : 0.0f;
                continue;
            }
            value.resize(static_cast<size_t>(L));
            count.resize(static_cast<size_t>(L));
            for (int64_t i = 0; i < L; ++i) {
                const bool in = !mr || mr[i];
                value[i] = in ? xr[i] : 0.0f;
                count[i] = in ? 1.0f : 0.0f;
            }
            acc.assign(static_cast<size_t>(L), 0.0f);
            seen.assign(static_cast<size_t>(L), 0.0f);
            for (int64_t t = 0; t < kernel; ++t) {
                // out[j] takes x[j + d], d = t - left, where 0 <= j + d < L.
                const int64_t d = t - left, from = std::max<int64_t>(0, -d), to = std::min(L, L - d);
                const float *v = value.data() + d, *c = count.data() + d;
                for (int64_t j = from; j < to; ++j) {
                    acc[j] += v[j];
                    seen[j] += c[j];
                }
            }
            for (int64_t j = 0; j < L; ++j) o[j] = !mr || mr[j] ? acc[j] / std::max(seen[j], 1.0f) : 0.0f;
        }
    });
    return out;
}

}  // namespace

at::Tensor pool1d(const at::Tensor& x, const at::Tensor& mask, int64_t kernel, PoolKind kind) {
    if (x.size(-1) == 0 || kernel <= 1) return mask.defined() ? x.masked_fill(~mask, 0) : x.clone();
    if (onHostF32(x) && (!mask.defined() || mask.is_cpu()))
        return pool1dHost(x, mask, kernel, kind);
    const at::Tensor m = mask.defined() ? mask.expand(x.sizes()) : at::ones(x.sizes(), x.options().dtype(at::kBool));
    const int64_t left = kernel / 2, right = kernel - 1 - left;
    // windows[..., j, t] = x[j - left + t]: the pad value stands for entries
    // that do not exist, and is chosen so that they never count.
    auto windows = [&](const at::Tensor& t, double padValue) {
        return at::constant_pad_nd(t, {left, right}, padValue).unfold(-1, kernel, 1);
    };
    at::Tensor out;
    if (kind == PoolKind::Max) {
        const double lowest = -std::numeric_limits<double>::infinity();
        out = windows(x.masked_fill(~m, lowest), lowest).amax(-1);
    } else {
        const at::Tensor sums = windows(x.masked_fill(~m, 0), 0).sum(-1);
        const at::Tensor counts = windows(m.to(x.scalar_type()), 0).sum(-1);
        out = sums / counts.clamp_min(1);
    }
    return out.masked_fill(~m, 0);
}

Protected protectedSet(int64_t length, int64_t sinks, int64_t window, int64_t budget) {
    Protected p;
    p.sinks = std::max<int64_t>(0, std::min({sinks, budget, length}));
    p.window = std::max<int64_t>(0, std::min({window, budget - p.sinks, length - p.sinks}));
    return p;
}

std::vector<Candidate> topK(std::vector<Candidate> candidates, int64_t k) {
    const auto n = static_cast<int64_t>(candidates.size());
    k = std::max<int64_t>(0, std::min(k, n));
    std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(),
                      [](const Candidate& a, const Candidate& b) { return ranksBefore(a, b); });
    candidates.resize(static_cast<size_t>(k));
    return candidates;
}

void addGroupRow(const float* probs, int64_t numKvHeads, int64_t Hq, int64_t n, int64_t L, int64_t h, int64_t i,
                 int64_t len, GqaReduce how, float* acc, std::vector<float>& scratch) {
    const int64_t G = Hq / numKvHeads;
    const float* first = probs + ((h * G) * n + i) * L;
    if (G == 1) {
        for (int64_t e = 0; e < len; ++e) acc[e] += first[e];
        return;
    }
    if (G == 2) {  // one pass (the common GQA layout of small models)
        const float* second = first + n * L;
        if (how == GqaReduce::Max)
            for (int64_t e = 0; e < len; ++e) acc[e] += std::max(first[e], second[e]);
        else if (how == GqaReduce::Sum)
            for (int64_t e = 0; e < len; ++e) acc[e] += first[e] + second[e];
        else
            for (int64_t e = 0; e < len; ++e) acc[e] += (first[e] + second[e]) / 2.0f;
        return;
    }
    scratch.resize(static_cast<size_t>(len));
    reduceGroupRow(probs, numKvHeads, Hq, n, L, h, i, len, how, scratch.data());
    for (int64_t e = 0; e < len; ++e) acc[e] += scratch[static_cast<size_t>(e)];
}

void reduceGroupRow(const float* probs, int64_t numKvHeads, int64_t Hq, int64_t n, int64_t L, int64_t h,
                    int64_t i, int64_t len, GqaReduce how, float* out) {
    const int64_t G = Hq / numKvHeads;
    // Row by row over the group (contiguous, vectorisable), not head by head per entry.
    const float* first = probs + ((h * G) * n + i) * L;
    std::copy(first, first + len, out);
    for (int64_t g = 1; g < G; ++g) {
        const float* row = first + g * n * L;
        if (how == GqaReduce::Max)
            for (int64_t e = 0; e < len; ++e) out[e] = std::max(out[e], row[e]);
        else
            for (int64_t e = 0; e < len; ++e) out[e] += row[e];
    }
    if (how == GqaReduce::Mean)
        for (int64_t e = 0; e < len; ++e) out[e] /= static_cast<float>(G);
}

std::vector<Candidate> bestUnordered(std::vector<Candidate> candidates, int64_t k) {
    const auto n = static_cast<int64_t>(candidates.size());
    k = std::max<int64_t>(0, std::min(k, n));
    const int64_t drop = n - k;
    if (drop > 0 && drop <= 16) {
        // An every_step policy drops one entry per head per step: move the
        // few worst to the back with linear scans instead of a selection.
        for (int64_t d = 0; d < drop; ++d) {
            const int64_t end = n - d;
            int64_t worst = 0;
            for (int64_t i = 1; i < end; ++i)
                if (ranksBefore(candidates[static_cast<size_t>(worst)], candidates[static_cast<size_t>(i)])) worst = i;
            std::swap(candidates[static_cast<size_t>(worst)], candidates[static_cast<size_t>(end - 1)]);
        }
    } else if (drop > 0) {
        std::nth_element(candidates.begin(), candidates.begin() + k, candidates.end(),
                         [](const Candidate& a, const Candidate& b) { return ranksBefore(a, b); });
    }
    candidates.resize(static_cast<size_t>(k));
    return candidates;
}

std::vector<std::vector<Candidate>> allocateAdaptive(const std::vector<std::vector<Candidate>>& candidates,
                                                     int64_t floorPerHead, int64_t slots) {
    std::vector<std::vector<Candidate>> chosen(candidates.size());
    std::vector<Candidate> rest;
    int64_t taken = 0;
    // Sets, not orders, are chosen: linear-time selections (ranksBefore is a
    // strict total order, so they pick exactly what sorting would).
    const auto better = [](const Candidate& a, const Candidate& b) { return ranksBefore(a, b); };
    for (size_t h = 0; h < candidates.size(); ++h) {
        std::vector<Candidate> ranked = candidates[h];
        const auto own = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(0, floorPerHead)), ranked.size());
        if (own > 0 && own < ranked.size())
            std::nth_element(ranked.begin(), ranked.begin() + static_cast<int64_t>(own), ranked.end(), better);
        chosen[h].assign(ranked.begin(), ranked.begin() + own);
        rest.insert(rest.end(), ranked.begin() + own, ranked.end());
        taken += static_cast<int64_t>(own);
    }
    for (const Candidate& c : bestUnordered(std::move(rest), slots - taken)) chosen[c.head].push_back(c);
    return chosen;
}

}  // namespace kvlens
