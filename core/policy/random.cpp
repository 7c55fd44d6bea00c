// Random eviction: a seeded uniform sample of the entries outside the
// optional window. Each entry draws an independent uniform score and the top
// ones stay, which is a uniform sample without replacement. The draw depends
// only on (seed, layer, seqLen, head) so that a run is reproducible and
// every policy column of a comparison sees the same randomness.
#include <ATen/ATen.h>

#include <cstdint>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

class RandomPolicy : public ScorerPolicy {
public:
    RandomPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_seed(static_cast<uint64_t>(this->config().getInt("seed"))),
          m_window(this->config().getInt("window")) {}

protected:
    at::Tensor score(const LayerState& state) override {
        const int64_t H = state.numKvHeads, L = state.maxLength();
        at::Tensor s = at::empty({H, L}, at::kFloat);  // padding (i >= length) is never read
        float* p = s.data_ptr<float>();
        for (int64_t h = 0; h < H; ++h) {
            // SplitMix64 over (seed, layer, seqLen, head, entry): fully
            // specified, so the sample is the same on every platform, and it
            // needs no generator seeding (a seed_seq per head was this
            // policy's largest per-step cost).
            const uint64_t key = mix(mix(mix(mix(m_seed) ^ static_cast<uint64_t>(state.layer)) ^
                                         static_cast<uint64_t>(state.seqLen)) ^
                                     static_cast<uint64_t>(h));
            // 24 random bits: exact in fp32, so the shown score is the one ranked.
            for (int64_t i = 0; i < state.length(h); ++i)
                p[h * L + i] = static_cast<float>(mix(key + static_cast<uint64_t>(i)) >> 40) / 16777216.0f;
        }
        return s;
    }
    int64_t window(const LayerState&) const override { return m_window; }

private:
    static uint64_t mix(uint64_t x) {  // SplitMix64's finaliser
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    }

    uint64_t m_seed;
    int64_t m_window;
};

const BuiltinMaker kMaker{"random", construct<RandomPolicy>};

}  // namespace

}  // namespace kvlens
