// Attending over a compacted KvCache equals attending over the full cache
// with the evicted positions masked: Model::forward after KvCache::apply
// against the naive reference with a visibility predicate. Also the cache's
// bookkeeping (positions, columns, bytes), its validation of keep lists, and
// StreamingLLM's re-rotation against keys computed fresh at their new
// positions.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>

#include "core/cache/kv_cache.h"
#include "core/error.h"
#include "core/model/model.h"
#include "tests/support/naive_forward.h"
#include "tests/support/test_models.h"

namespace kvlens::test {
namespace {

constexpr double kProbTol = 1e-5;
constexpr int64_t kPrompt = 20;

using Keep = std::vector<std::vector<int64_t>>;  // per KV head

using Built = BuiltVariant;
const Built& built(const std::string& name) { return builtVariant(name); }

ErrorTable& errors = ErrorTable::add("decode over compacted caches vs masked reference");

// What the cache should hold, tracked independently of KvCache: per layer
// and KV head the true positions in cache order, and for every query the
// entries it attends over (its own key included).
class Mirror {
public:
    Mirror(int64_t layers, int64_t heads) : m_entries(layers, std::vector<std::vector<int64_t>>(heads)) {}

    // n new tokens (a prefill chunk or one decode token).
    void append(int64_t n) {
        for (auto& layer : m_entries)
            for (auto& head : layer)
                for (int64_t i = 0; i < n; ++i) head.push_back(m_seq + i);
        for (int64_t i = 0; i < n; ++i) m_snapshots[m_seq + i] = m_entries;  // causality is the reference's job
        m_seq += n;
    }
    void apply(int64_t layer, const Keep& keep) {
        for (size_t h = 0; h < keep.size(); ++h) {
            std::vector<int64_t> kept;
            for (int64_t i : keep[h]) kept.push_back(m_entries[layer][h].at(i));
            m_entries[layer][h] = kept;
        }
    }
    const std::vector<int64_t>& entries(int64_t l, int64_t h) const { return m_entries[l][h]; }
    int64_t length(int64_t l, int64_t h) const { return static_cast<int64_t>(m_entries[l][h].size()); }
    int64_t seq() const { return m_seq; }

    // Reference hooks: a key is visible to query q iff it was in the cache
    // when q attended. Under rerotate, every key sits at its index in that
    // cache and the query at its own index (StreamingLLM's position shift).
    NaiveHooks hooks(bool rerotate) const {
        NaiveHooks h;
        h.visible = [this](int64_t l, int64_t kv, int64_t q, int64_t k) {
            const auto& e = m_snapshots.at(q)[l][kv];
            return std::binary_search(e.begin(), e.end(), k);
        };
        if (rerotate) {
            h.queryRotary = [this](int64_t l, int64_t q) { return indexOf(m_snapshots.at(q)[l][0], q); };
            h.keyRotary = [this](int64_t l, int64_t kv, int64_t q, int64_t k) {
                return indexOf(m_snapshots.at(q)[l][kv], k);
            };
        }
        return h;
    }

private:
    static int64_t indexOf(const std::vector<int64_t>& v, int64_t x) {
        auto it = std::lower_bound(v.begin(), v.end(), x);
        if (it == v.end() || *it != x) throw std::logic_error("mirror: position not in the cache");
        return it - v.begin();
    }
    std::vector<std::vector<std::vector<int64_t>>> m_entries;
    std::map<int64_t, std::vector<std::vector<std::vector<int64_t>>>> m_snapshots;
    int64_t m_seq = 0;
};

// Sorted unique random subset of 0..n-1 of the given size.
std::vector<int64_t> randomSubset(int64_t n, int64_t size, std::mt19937_64& rng) {
    std::vector<int64_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(size);
    std::sort(all.begin(), all.end());
    return all;
}

// Ragged keep lists: every head a different, random size in [lo, hi].
Keep raggedKeep(const Mirror& m, int64_t layer, int64_t heads, std::mt19937_64& rng, int64_t lo, int64_t hi) {
    Keep keep(heads);
    std::vector<int64_t> sizes;
    for (int64_t h = 0; h < heads; ++h) {
        const int64_t len = m.length(layer, h);
        const int64_t top = std::min(hi, len);
        int64_t size;
        do {
            size = std::uniform_int_distribution<int64_t>(std::min(lo, top), top)(rng);
        } while (heads > 1 && h > 0 && top - std::min(lo, top) >= heads &&
                 std::find(sizes.begin(), sizes.end(), size) != sizes.end());
        sizes.push_back(size);
        keep[h] = randomSubset(len, size, rng);
    }
    return keep;
}

uint64_t expectedBytes(const Mirror& m, int64_t layers, int64_t heads, int64_t headDim, size_t elem) {
    uint64_t entries = 0;
    for (int64_t l = 0; l < layers; ++l)
        for (int64_t h = 0; h < heads; ++h) entries += static_cast<uint64_t>(m.length(l, h));
    return entries * 2u * static_cast<uint64_t>(headDim) * elem;
}

// The cache reports what the mirror says it holds.
void expectCacheState(const KvCache& cache, const Mirror& m, const std::string& where) {
    for (int64_t l = 0; l < cache.layers(); ++l)
        for (int64_t h = 0; h < cache.kvHeads(); ++h) {
            EXPECT_EQ(cache.length(l, h), m.length(l, h)) << where << " layer " << l << " head " << h;
            EXPECT_EQ(cache.positions(l, h), m.entries(l, h)) << where << " layer " << l << " head " << h;
            EXPECT_EQ(cache.columns(l, h).size(), m.entries(l, h).size()) << where;
        }
    EXPECT_EQ(cache.seqLen(), m.seq()) << where;
    EXPECT_EQ(cache.bytesHeld(), expectedBytes(m, cache.layers(), cache.kvHeads(), cache.headDim(), sizeof(float)))
        << where;
    EXPECT_LE(cache.bytesHeld(), cache.bytesInUse()) << where;
    EXPECT_LE(cache.bytesInUse(), cache.bytesAllocated()) << where;
}

// Runs the model and the mirror in lock step and compares all the logits
// produced against the reference at the end.
class Scenario {
public:
    Scenario(const Built& b, CacheOptions opts, uint64_t tokenSeed, int64_t maxTokens = 32)
        : m_b(b),
          m_cache(b.model->newCache(opts)),
          m_mirror(b.tm.naive.layers, b.tm.naive.kvHeads),
          m_rerotate(opts.rerotate),
          m_tokens(randomTokens(maxTokens, b.tm.naive.vocab, tokenSeed)) {}

    // Feeds the next n tokens in one forward call; returns its logits rows.
    Rows feed(int64_t n, const ForwardOptions& o = {}, ForwardResult* out = nullptr) {
        const int64_t at = m_mirror.seq();
        std::vector<int64_t> chunk(m_tokens.begin() + at, m_tokens.begin() + at + n);
        ForwardResult r = m_b.model->forward(chunk, m_cache, o);
        m_mirror.append(n);
        Rows rows = tensorRows(r.logits);
        for (int64_t i = 0; i < n; ++i) m_ours[at + i] = rows[i];
        if (out) *out = std::move(r);
        return rows;
    }
    void apply(int64_t layer, const Keep& keep) {
        m_cache.apply(layer, keep);
        m_mirror.apply(layer, keep);
    }
    void applyShared(int64_t layer, const std::vector<int64_t>& keep) {
        m_cache.apply(layer, keep);
        m_mirror.apply(layer, Keep(static_cast<size_t>(m_cache.kvHeads()), keep));
    }
    NaiveResult reference(std::vector<int64_t> captureLayers = {}) const {
        NaiveHooks h = m_mirror.hooks(m_rerotate);
        h.captureLayers = std::move(captureLayers);
        return naiveForward(m_b.tm.naive, m_b.tm.weights,
                            std::vector<int64_t>(m_tokens.begin(), m_tokens.begin() + m_mirror.seq()), h);
    }
    // Every logits row produced from position `from` on equals the reference.
    void expectMatchesReference(int64_t from, const std::string& what) {
        const NaiveResult ref = reference();
        Rows ours, want;
        for (int64_t p = from; p < m_mirror.seq(); ++p) {
            ASSERT_TRUE(m_ours.count(p)) << "no logits for position " << p;
            ours.push_back(m_ours.at(p));
            want.push_back(ref.logits[p]);
        }
        const double diff = maxAbsDiff(ours, want);
        EXPECT_LE(diff, tolFor(want)) << what << " (max |ref| " << maxAbs(want) << ")";
        errors.note(m_b.tm.dir.filename().string(), diff / std::max(1.0, maxAbs(want)));
        // Eviction must matter, or the comparison proves nothing: the
        // unmasked reference differs.
        const NaiveResult full = naiveForward(m_b.tm.naive, m_b.tm.weights,
                                              std::vector<int64_t>(m_tokens.begin(), m_tokens.begin() + m_mirror.seq()));
        if (m_expectEvictionMatters) {
            const double fullDiff = maxAbsDiff(ours, rowsOf(full.logits, from, ours.size()));
            EXPECT_GT(fullDiff, 100 * tolFor(want)) << what << ": eviction did not change the logits";
        }
    }
    void expectState(const std::string& where) const { expectCacheState(m_cache, m_mirror, where); }

    KvCache& cache() { return m_cache; }
    const Mirror& mirror() const { return m_mirror; }
    const TestModel& tm() const { return m_b.tm; }
    void setExpectEvictionMatters(bool v) { m_expectEvictionMatters = v; }

private:
    const Built& m_b;
    KvCache m_cache;
    Mirror m_mirror;
    bool m_rerotate;
    std::vector<int64_t> m_tokens;
    std::map<int64_t, std::vector<double>> m_ours;
    bool m_expectEvictionMatters = true;
};

// ---------------------------------------------------------------- per family

class Compaction : public ::testing::TestWithParam<std::string> {
protected:
    void RaggedKeepEqualsMaskedReference();
    void SharedKeepEqualsMaskedReference();
    void RepeatedApplyEqualsMaskedReference();
    void ChunkAfterCompactionEqualsMaskedReference();
    void KeepAllIsIdentity();
    const Built& b() const { return built(GetParam()); }
    int64_t layers() const { return b().tm.naive.layers; }
    int64_t kvHeads() const { return b().tm.naive.kvHeads; }
};

// Ragged per-KV-head keep sets in every layer, then decode: equals the full
// model with each (layer, KV head)'s evicted keys masked for the decode queries.
void Compaction::RaggedKeepEqualsMaskedReference() {
    Scenario s(b(), {}, 101);
    s.feed(kPrompt);
    s.expectState("after prefill");
    std::mt19937_64 rng(7);
    for (int64_t l = 0; l < layers(); ++l) s.apply(l, raggedKeep(s.mirror(), l, kvHeads(), rng, 3, kPrompt - 3));
    s.expectState("after ragged apply");

    // First decode step: captured attention of every layer equals the masked
    // reference, padding columns get no probability.
    ForwardOptions o;
    o.captureAttention = true;
    ForwardResult r;
    s.feed(1, o, &r);
    s.expectState("after first decode");
    std::vector<int64_t> all(static_cast<size_t>(layers()));
    std::iota(all.begin(), all.end(), 0);
    const NaiveResult ref = s.reference(all);
    for (int64_t l = 0; l < layers(); ++l) {
        ASSERT_TRUE(r.attention[l].defined());
        EXPECT_LE(rowSumMaxDeviation(r.attention[l]), kProbTol) << "layer " << l;
        EXPECT_LE(attentionMaxDiff(r.attention[l], s.cache(), l, ref.attention[l], kPrompt), kProbTol)
            << "layer " << l;
    }
    for (int i = 0; i < 4; ++i) s.feed(1);
    s.expectState("after decode");
    s.expectMatchesReference(kPrompt, "ragged keep, 5 decode steps");
}

// One keep list shared by every KV head (different per layer).
void Compaction::SharedKeepEqualsMaskedReference() {
    Scenario s(b(), {}, 202);
    s.feed(kPrompt);
    std::mt19937_64 rng(8);
    for (int64_t l = 0; l < layers(); ++l) s.applyShared(l, randomSubset(kPrompt, 6 + 3 * l, rng));
    s.expectState("after shared apply");
    for (int i = 0; i < 4; ++i) s.feed(1);
    s.expectState("after decode");
    s.expectMatchesReference(kPrompt, "shared keep, 4 decode steps");
}

// apply twice in a row, decode, apply again (decoded entries included), decode.
void Compaction::RepeatedApplyEqualsMaskedReference() {
    Scenario s(b(), {}, 303);
    s.feed(kPrompt);
    std::mt19937_64 rng(9);
    for (int64_t l = 0; l < layers(); ++l) s.apply(l, raggedKeep(s.mirror(), l, kvHeads(), rng, 8, kPrompt - 2));
    for (int64_t l = 0; l < layers(); ++l) s.apply(l, raggedKeep(s.mirror(), l, kvHeads(), rng, 4, 100));
    s.expectState("after two applies");
    s.feed(1);
    s.feed(1);
    for (int64_t l = 0; l < layers(); ++l) s.apply(l, raggedKeep(s.mirror(), l, kvHeads(), rng, 2, 100));
    s.expectState("after third apply");
    for (int i = 0; i < 3; ++i) s.feed(1);
    s.expectState("after decode");
    s.expectMatchesReference(kPrompt, "apply, apply, decode 2, apply, decode 3");
}

// After compaction a multi-token chunk sees the compacted cache plus its own
// tokens causally.
void Compaction::ChunkAfterCompactionEqualsMaskedReference() {
    Scenario s(b(), {}, 404);
    s.feed(kPrompt);
    std::mt19937_64 rng(10);
    for (int64_t l = 0; l < layers(); ++l) s.apply(l, raggedKeep(s.mirror(), l, kvHeads(), rng, 3, kPrompt - 3));
    s.feed(4);
    s.expectState("after chunk");
    s.feed(1);
    s.expectMatchesReference(kPrompt, "4-token chunk + 1 decode after ragged apply");
}

// Keeping everything is a no-op; so is keeping everything in some layers only.
void Compaction::KeepAllIsIdentity() {
    Scenario s(b(), {}, 505);
    s.setExpectEvictionMatters(false);
    s.feed(kPrompt);
    std::vector<int64_t> everything(kPrompt);
    std::iota(everything.begin(), everything.end(), 0);
    for (int64_t l = 0; l < layers(); ++l) s.applyShared(l, everything);
    s.feed(1);
    s.feed(1);
    s.expectState("after keep-all");
    s.expectMatchesReference(0, "keep-all");
}

// One ctest entry per family variant (each test process pays LibTorch's
// start-up): every scenario above, each under its own trace label.
TEST_P(Compaction, EqualsMaskedReference) {
    {
        SCOPED_TRACE("RaggedKeepEqualsMaskedReference");
        RaggedKeepEqualsMaskedReference();
    }
    {
        SCOPED_TRACE("SharedKeepEqualsMaskedReference");
        SharedKeepEqualsMaskedReference();
    }
    {
        SCOPED_TRACE("RepeatedApplyEqualsMaskedReference");
        RepeatedApplyEqualsMaskedReference();
    }
    {
        SCOPED_TRACE("ChunkAfterCompactionEqualsMaskedReference");
        ChunkAfterCompactionEqualsMaskedReference();
    }
    {
        SCOPED_TRACE("KeepAllIsIdentity");
        KeepAllIsIdentity();
    }
}

INSTANTIATE_TEST_SUITE_P(Families, Compaction,
                         ::testing::Values("llama_gqa", "llama_mha_bias", "mistral_window", "qwen2_bias",
                                           "qwen3_qknorm", "gpt2", "llama_f16"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---------------------------------------------------------------- bookkeeping

TEST(CompactionEdge, AHeadMayKeepNothing) {
    Scenario s(built("llama_gqa"), {}, 606);
    s.feed(kPrompt);
    s.apply(0, Keep{{}, {0, 5, 19}});
    s.apply(1, Keep{{1, 2}, {}});
    s.expectState("after emptying heads");
    for (int i = 0; i < 3; ++i) s.feed(1);
    s.expectState("after decode");
    s.expectMatchesReference(kPrompt, "heads with no kept entries");
}

TEST(CompactionEdge, EveryHeadMayKeepNothing) {
    Scenario s(built("llama_gqa"), {}, 616);
    s.feed(kPrompt);
    s.apply(1, Keep{{}, {}});
    s.applyShared(0, {});
    s.expectState("after emptying a layer");
    EXPECT_EQ(s.cache().bytesHeld(), 0u);
    for (int i = 0; i < 3; ++i) s.feed(1);
    s.expectState("after decode");
    s.expectMatchesReference(kPrompt, "layers with no kept entries");
}

TEST(CompactionEdge, MqaSharedKeep) {
    Scenario s(built("llama_mqa_tied"), {}, 707);
    s.feed(kPrompt);
    s.applyShared(0, {0, 1, 2, 15, 16, 17, 18, 19});
    s.applyShared(1, {3, 9, 12, 19});
    s.feed(1);
    s.feed(1);
    s.expectState("mqa");
    s.expectMatchesReference(kPrompt, "MQA shared keep");
}

// bytesHeld = Σ kept entries × 2 × head_dim × element size; a big eviction
// really frees the K/V storage.
TEST(CompactionMemory, BytesHeldAndAllocationShrink) {
    const Built& b = built("llama_gqa");
    const int64_t T = 100, L = b.tm.naive.layers, D = b.tm.naive.headDim, Hkv = b.tm.naive.kvHeads;
    Scenario s(b, {}, 808, 110);
    s.feed(T);
    s.expectState("after 100-token prefill");
    EXPECT_EQ(s.cache().bytesHeld(), static_cast<uint64_t>(L * Hkv * T * 2 * D * 4));
    const uint64_t before = s.cache().bytesAllocated();
    EXPECT_GE(before, s.cache().bytesHeld());

    for (int64_t l = 0; l < L; ++l) s.apply(l, Keep{{0, 1, 50, 95, 96, 97, 98, 99}, {0, 60, 97, 98, 99}});
    s.expectState("after big eviction");
    EXPECT_EQ(s.cache().bytesHeld(), static_cast<uint64_t>(L * (8 + 5) * 2 * D * 4));
    // Ragged heads are padded to the longest: storage in use counts 8 columns per head.
    EXPECT_EQ(s.cache().bytesInUse(), static_cast<uint64_t>(L * Hkv * 8 * 2 * D * 4));
    const uint64_t after = s.cache().bytesAllocated();
    EXPECT_LT(after, before / 2) << "a 100 -> 8 eviction must free storage";
    for (int i = 0; i < 3; ++i) s.feed(1);
    s.expectState("after decode");
    EXPECT_EQ(s.cache().bytesHeld(), static_cast<uint64_t>(L * (8 + 5 + 2 * 3) * 2 * D * 4));
    s.expectMatchesReference(T, "decode after a 100 -> 8/5 eviction");
}

// Bad keep lists are a kvlens::Error and leave the cache untouched.
TEST(CompactionErrors, RejectsBadKeepLists) {
    Scenario s(built("llama_gqa"), {}, 909);
    s.setExpectEvictionMatters(false);
    s.feed(kPrompt);
    const int64_t L = s.tm().naive.layers;
    KvCache& c = s.cache();
    const uint64_t held = c.bytesHeld();
    const std::vector<Keep> bad = {
        Keep{{3, 1}, {0}},            // unsorted
        Keep{{2, 2}, {0}},            // duplicate
        Keep{{0, 1, 1, 2}, {0, 1}},   // duplicate inside
        Keep{{-1, 0}, {0}},           // negative
        Keep{{0, kPrompt}, {0}},      // one past the end
        Keep{{0}, {0, 1000}},         // far out of range
        Keep{{0}},                    // too few head lists
        Keep{{0}, {0}, {0}},          // too many head lists
        Keep{},                       // none
    };
    for (size_t i = 0; i < bad.size(); ++i)
        for (int64_t l = 0; l < L; ++l) EXPECT_THROW(c.apply(l, bad[i]), Error) << "case " << i << " layer " << l;
    EXPECT_THROW(c.apply(0, std::vector<int64_t>{5, 3}), Error);
    EXPECT_THROW(c.apply(0, std::vector<int64_t>{5, 5}), Error);
    EXPECT_THROW(c.apply(0, std::vector<int64_t>{0, kPrompt}), Error);
    EXPECT_THROW(c.apply(0, std::vector<int64_t>{-3}), Error);
    EXPECT_THROW(c.apply(-1, std::vector<int64_t>{0}), Error);
    EXPECT_THROW(c.apply(L, std::vector<int64_t>{0}), Error);
    EXPECT_THROW(c.apply(L, Keep{{0}, {0}}), Error);
    EXPECT_EQ(c.bytesHeld(), held);
    s.expectState("after rejected applies");
    // Still a working, full cache.
    s.feed(1);
    s.feed(1);
    s.expectMatchesReference(0, "full cache after rejected applies");
}

// ---------------------------------------------------------------- KvCache on its own

at::Tensor hostTensor(const std::vector<std::vector<std::vector<double>>>& x) {  // [H][n][D]
    const int64_t H = x.size(), n = x[0].size(), D = x[0][0].size();
    std::vector<float> flat;
    for (const auto& h : x)
        for (const auto& r : h)
            for (double v : r) flat.push_back(static_cast<float>(v));
    return at::tensor(flat, at::TensorOptions().dtype(at::kFloat)).view({H, n, D});
}

std::vector<std::vector<std::vector<double>>> randomHeads(int64_t H, int64_t n, int64_t D, std::mt19937_64& rng) {
    std::normal_distribution<double> dist(0.0, 1.0);
    std::vector<std::vector<std::vector<double>>> x(H, std::vector<std::vector<double>>(n, std::vector<double>(D)));
    for (auto& h : x)
        for (auto& r : h)
            for (double& v : r) v = dist(rng);
    return x;
}

double maxDiffRow(const at::Tensor& row, const std::vector<double>& want) {
    at::Tensor r = row.to(at::kDouble).contiguous();
    double m = 0;
    for (size_t i = 0; i < want.size(); ++i) m = std::max(m, std::abs(r[i].item<double>() - want[i]));
    return m;
}

// Ragged gather: each head's kept keys and values land in its first columns,
// in order; the rest of the storage is padding marked invalid.
TEST(KvCacheGather, RaggedApplyMovesTheRightRows) {
    const Built& b = built("llama_gqa");
    // T = 40: evicting 35+ entries per head exceeds the freed-column bound,
    // so apply() gathers into contiguous storage.
    const int64_t D = b.tm.naive.headDim, H = b.tm.naive.kvHeads, T = 40;
    std::mt19937_64 rng(11);
    auto k = randomHeads(H, T, D, rng), v = randomHeads(H, T, D, rng);
    KvCache c = b.model->newCache();
    c.append(0, hostTensor(k), hostTensor(v));
    c.advance(T);
    const Keep keep{{0, 3, 7}, {1, 2, 4, 5, 9}};
    c.apply(0, keep);
    auto kn = randomHeads(H, 1, D, rng), vn = randomHeads(H, 1, D, rng);
    KvCache::LayerView view = c.append(0, hostTensor(kn), hostTensor(vn));
    c.advance(1);
    ASSERT_TRUE(view.valid.defined()) << "ragged heads need a validity mask";
    EXPECT_EQ(view.newCount, 1);
    const int64_t S = view.k.size(1);
    EXPECT_EQ(S, 6);  // 5 kept (the longest head) + 1 new
    for (int64_t h = 0; h < H; ++h) {
        const auto& cols = c.columns(0, h);
        const auto& pos = c.positions(0, h);
        ASSERT_EQ(cols.size(), keep[h].size() + 1);
        std::vector<bool> used(S, false);
        for (size_t i = 0; i < cols.size(); ++i) {
            const bool isNew = i == keep[h].size();
            const auto& wantK = isNew ? kn[h][0] : k[h][keep[h][i]];
            const auto& wantV = isNew ? vn[h][0] : v[h][keep[h][i]];
            EXPECT_EQ(pos[i], isNew ? T : keep[h][i]);
            EXPECT_LE(maxDiffRow(view.k[h][cols[i]], wantK), 1e-6) << "head " << h << " entry " << i;
            EXPECT_LE(maxDiffRow(view.v[h][cols[i]], wantV), 1e-6) << "head " << h << " entry " << i;
            used[cols[i]] = true;
        }
        EXPECT_EQ(cols.back(), S - 1) << "new tokens share the last column";
        for (int64_t col = 0; col < S; ++col)
            EXPECT_EQ(view.valid[h][col].item<bool>(), bool(used[col])) << "head " << h << " column " << col;
    }
}

// Re-rotation: after apply, each kept key equals the raw key rotated fresh at
// its new index; new keys are rotated at the cache length.
TEST(KvCacheGather, RerotateEqualsFreshRotationAtNewIndex) {
    const Built& b = built("llama3_rope");
    const int64_t D = b.tm.naive.headDim, H = b.tm.naive.kvHeads, T = 12;
    const auto inv = naiveInverseFrequencies(b.tm.naive);
    std::mt19937_64 rng(12);
    auto raw = randomHeads(H, T, D, rng), v = randomHeads(H, T, D, rng);
    auto rotated = raw;
    for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) rotated[h][t] = naiveRope(raw[h][t], double(t), inv);
    CacheOptions opts;
    opts.rerotate = true;
    KvCache c = b.model->newCache(opts);
    EXPECT_TRUE(c.rerotate());
    c.append(0, hostTensor(rotated), hostTensor(v));
    c.advance(T);
    // Same count per head, different entries (per-head deltas).
    const Keep keep{{0, 1, 6, 11}, {0, 4, 5, 9}};
    c.apply(0, keep);
    EXPECT_EQ(c.rotaryPosition(0), 4);
    EXPECT_EQ(c.positions(0, 0), (std::vector<int64_t>{0, 1, 6, 11}));
    auto rawNew = randomHeads(H, 1, D, rng), vNew = randomHeads(H, 1, D, rng);
    auto rotNew = rawNew;
    for (int64_t h = 0; h < H; ++h) rotNew[h][0] = naiveRope(rawNew[h][0], 4.0, inv);
    KvCache::LayerView view = c.append(0, hostTensor(rotNew), hostTensor(vNew));
    c.advance(1);
    for (int64_t h = 0; h < H; ++h)
        for (size_t i = 0; i < keep[h].size(); ++i) {
            const int64_t col = c.columns(0, h)[i];
            EXPECT_LE(maxDiffRow(view.k[h][col], naiveRope(raw[h][keep[h][i]], double(i), inv)), 1e-5)
                << "head " << h << " entry " << i << " (position " << keep[h][i] << ")";
            EXPECT_LE(maxDiffRow(view.v[h][col], v[h][keep[h][i]]), 1e-6);
        }
    // Twice: keep entries 1, 3, 4 (the new token included) -> indices 0, 1, 2.
    c.apply(0, Keep{{1, 3, 4}, {0, 2, 4}});
    EXPECT_EQ(c.rotaryPosition(0), 3);
    view = c.append(0, hostTensor(rotNew), hostTensor(vNew));
    const std::vector<std::vector<std::vector<double>>> source = {
        {raw[0][1], raw[0][11], rawNew[0][0]}, {raw[1][0], raw[1][5], rawNew[1][0]}};
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < 3; ++i)
            EXPECT_LE(maxDiffRow(view.k[h][c.columns(0, h)[i]], naiveRope(source[h][i], double(i), inv)), 1e-5)
                << "second apply, head " << h << " entry " << i;
}

// ---------------------------------------------------------------- re-rotation through the model

class Rerotate : public ::testing::TestWithParam<std::string> {
protected:
    void DecodeEqualsReferenceAtShiftedPositions();
    void StreamingLlmEveryStep();
    void NoEvictionMatchesPlainCache();
    const Built& b() const { return built(GetParam()); }
};

// Per-head keep lists of equal size: decoding over the re-rotated cache
// equals the reference with every kept key at its cache index and each
// query at the cache length (StreamingLLM's position shift), twice over.
void Rerotate::DecodeEqualsReferenceAtShiftedPositions() {
    CacheOptions opts;
    opts.rerotate = true;
    Scenario s(b(), opts, 1111);
    s.feed(kPrompt);
    const int64_t L = s.tm().naive.layers, H = s.tm().naive.kvHeads;
    std::mt19937_64 rng(13);
    for (int64_t l = 0; l < L; ++l) {
        // Layers keep different counts, so their rotary positions differ.
        Keep keep(H);
        for (int64_t h = 0; h < H; ++h) {
            auto rest = randomSubset(kPrompt - 2, 6 - l, rng);  // sinks 0, 1 + others
            keep[h] = {0, 1};
            for (int64_t r : rest) keep[h].push_back(r + 2);
        }
        s.apply(l, keep);
        EXPECT_EQ(s.cache().rotaryPosition(l), 8 - l);
    }
    s.expectState("after rerotate apply");
    for (int i = 0; i < 3; ++i) s.feed(1);
    for (int64_t l = 0; l < L; ++l) {
        Keep keep(H);
        for (int64_t h = 0; h < H; ++h) keep[h] = randomSubset(s.mirror().length(l, h), 5, rng);
        s.apply(l, keep);
    }
    s.feed(3);  // a chunk over the shifted cache: rotated at 5, 6, 7
    s.feed(1);
    s.expectState("after second rerotate apply");
    s.expectMatchesReference(kPrompt, "rerotated decode");
}

// StreamingLLM as the paper runs it: sinks + a recent window, trimmed back
// to the budget after every decode step, positions shifted.
void Rerotate::StreamingLlmEveryStep() {
    CacheOptions opts;
    opts.rerotate = true;
    Scenario s(b(), opts, 1212);
    s.feed(kPrompt);
    const int64_t L = s.tm().naive.layers, sinks = 2, window = 5;
    // Under mistral's sliding window of 6 the sinks are out of reach anyway and
    // the recent keys shift uniformly (RoPE is relative): nothing changes.
    const auto& sw = s.tm().naive.slidingWindow;
    s.setExpectEvictionMatters(!(sw && *sw <= window + 1));
    auto trim = [&] {
        for (int64_t l = 0; l < L; ++l) {
            const int64_t len = s.mirror().length(l, 0);
            std::vector<int64_t> keep;
            for (int64_t i = 0; i < sinks; ++i) keep.push_back(i);
            for (int64_t i = len - window; i < len; ++i) keep.push_back(i);
            s.applyShared(l, keep);
        }
    };
    trim();
    for (int i = 0; i < 5; ++i) {
        s.feed(1);
        trim();
        for (int64_t l = 0; l < L; ++l) EXPECT_EQ(s.cache().rotaryPosition(l), sinks + window);
    }
    s.expectState("streaming");
    s.expectMatchesReference(kPrompt, "StreamingLLM every step with position shift");
}

// Until something is evicted a rerotate cache is an ordinary cache.
void Rerotate::NoEvictionMatchesPlainCache() {
    CacheOptions opts;
    opts.rerotate = true;
    Scenario s(b(), opts, 1313);
    s.setExpectEvictionMatters(false);
    s.feed(kPrompt);
    std::vector<int64_t> everything(kPrompt);
    std::iota(everything.begin(), everything.end(), 0);
    for (int64_t l = 0; l < s.tm().naive.layers; ++l) s.applyShared(l, everything);
    s.feed(1);
    s.feed(2);
    s.expectMatchesReference(0, "rerotate cache without eviction");
}

// One ctest entry per family variant: every scenario above.
TEST_P(Rerotate, EqualsReferenceAtShiftedPositions) {
    {
        SCOPED_TRACE("DecodeEqualsReferenceAtShiftedPositions");
        DecodeEqualsReferenceAtShiftedPositions();
    }
    {
        SCOPED_TRACE("StreamingLlmEveryStep");
        StreamingLlmEveryStep();
    }
    {
        SCOPED_TRACE("NoEvictionMatchesPlainCache");
        NoEvictionMatchesPlainCache();
    }
}

INSTANTIATE_TEST_SUITE_P(RopeFamilies, Rerotate,
                         ::testing::Values("llama_gqa", "llama3_rope", "qwen3_qknorm", "mistral_window"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(RerotateErrors, UnequalKeptCountsAndGpt2AreRefused) {
    CacheOptions opts;
    opts.rerotate = true;
    Scenario s(built("llama_gqa"), opts, 1414);
    s.setExpectEvictionMatters(false);
    s.feed(kPrompt);
    EXPECT_THROW(s.cache().apply(0, Keep{{0, 1, 2}, {0, 1}}), ArgumentError);
    s.expectState("after refused ragged rerotate");
    s.feed(1);
    s.expectMatchesReference(0, "cache usable after the refusal");
    EXPECT_THROW(built("gpt2").model->newCache(opts), ArgumentError);
}

}  // namespace
}  // namespace kvlens::test
