#pragma once
// Pieces every scoring policy shares (POLICIES.md "Notation and shared
// conventions"): GQA reduction, 1-D pooling along the keys, the protected
// sets, top-k with ties toward the more recent entry, and Ada-KV's per-head
// allocation. Internal to core (uses ATen).
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/policy/policy_info.h"

namespace kvlens {

// [Hq, ...] per query head -> [Hkv, ...]: query head h belongs to KV head
// h / G, G = Hq / numKvHeads, and the G heads of a group combine by `how`.
at::Tensor reduceGroups(const at::Tensor& perQueryHead, int64_t numKvHeads, GqaReduce how);

enum class PoolKind { Max, Avg };
PoolKind poolKind(const std::string& name);  // "max" | "avg"

// 1-D pooling along the last dimension: kernel k, stride 1, padding k/2
// (PyTorch's max_pool1d/avg_pool1d layout, output cut to the input length),
// with padding ignored: out[j] is the max / mean of the entries x[i],
// i in [j - k/2, j - k/2 + k), that exist and where `mask` is true. Where
// mask is false the output is 0. mask: bool, broadcastable to x; undefined =
// every entry takes part.
at::Tensor pool1d(const at::Tensor& x, const at::Tensor& mask, int64_t kernel, PoolKind kind);

// What the rules keep in a head of `length` entries under budget B: the
// first `sinks` and the last `window` entry indices. When B < S + W the
// sinks come first (earliest first), then the most recent entries.
struct Protected {
    int64_t sinks = 0;
    int64_t window = 0;
    bool contains(int64_t index, int64_t length) const { return index < sinks || index >= length - window; }
    int64_t count() const { return sinks + window; }
};
Protected protectedSet(int64_t length, int64_t sinks, int64_t window, int64_t budget);

// An entry competing for a slot by score.
struct Candidate {
    float score = 0;       // NaN reads as -inf: an entry without a score loses
    int64_t position = 0;  // true token position (ties: the higher wins)
    int64_t head = 0;      // KV head (last resort tie-break: the lower wins)
    int64_t index = 0;     // entry index within the head
};
// Strict order, best first: higher score (NaN lowest), then more recent,
// then lower head. Inline: selections call it millions of times per second.
inline bool ranksBefore(const Candidate& a, const Candidate& b) {
    const float sa = std::isnan(a.score) ? -std::numeric_limits<float>::infinity() : a.score;
    const float sb = std::isnan(b.score) ? -std::numeric_limits<float>::infinity() : b.score;
    if (sa != sb) return sa > sb;
    if (a.position != b.position) return a.position > b.position;
    if (a.head != b.head) return a.head < b.head;
    return a.index < b.index;
}
// The k best candidates (all of them if k >= size), best first.
std::vector<Candidate> topK(std::vector<Candidate> candidates, int64_t k);
// The same k candidates in no particular order, in linear time: what a plan
// needs, since keep lists are rebuilt in entry order (the hot path of every
// every_step policy, where k is nearly all of them).
std::vector<Candidate> bestUnordered(std::vector<Candidate> candidates, int64_t k);

// Host version of reduceGroups for one query row: probs is a contiguous
// [Hq, n, L] fp32 buffer; out[e] (e < len) = the group of KV head h's
// reduced attention on entry e for query row i.
void reduceGroupRow(const float* probs, int64_t numKvHeads, int64_t Hq, int64_t n, int64_t L, int64_t h,
                    int64_t i, int64_t len, GqaReduce how, float* out);

// acc[e] += the same reduced value (e < len), in one pass where G <= 2;
// scratch is reused for larger groups.
void addGroupRow(const float* probs, int64_t numKvHeads, int64_t Hq, int64_t n, int64_t L, int64_t h, int64_t i,
                 int64_t len, GqaReduce how, float* acc, std::vector<float>& scratch);

// Ada-KV (FFY0/AdaKV, kvpress AdaKVPress): each head first takes its own best
// min(floor, |its candidates|) (the safeguard), then what is left of the
// layer's `slots` goes to the globally best remaining candidates, whatever
// their head. candidates[h] are head h's; the result lists each head's
// winners, in no particular order.
std::vector<std::vector<Candidate>> allocateAdaptive(const std::vector<std::vector<Candidate>>& candidates,
                                                     int64_t floorPerHead, int64_t slots);

}  // namespace kvlens
