// CUR (kvpress CURPress): an entry's share of its head's key and value
// energy as an attention-free importance ("leverage") score. Per KV head,
// the squared L2 norms of each entry's key and value, each divided by the
// sum over its block of `local_window` consecutive entries (local
// approximation; 0 turns it off), combined (`leverage`: kv_product, key,
// value or kv_avg) and normalised over the head. The first `sinks` entries
// are always kept. kvpress's optional random projection is not offered.
#include <ATen/ATen.h>

#include "core/policy/factory.h"
#include "core/policy/scorer.h"

namespace kvlens {
namespace {

// x / sum, and 0 where the sum is 0 (kvpress divides without a guard: NaN).
at::Tensor share(const at::Tensor& x, const at::Tensor& sum) {
    return at::where(sum > 0, x / sum.clamp_min(1e-30), at::zeros_like(x));
}

// x [H, L] divided by the sum of its block of w entries (blocks from entry 0,
// the last one partial).
at::Tensor blockShares(const at::Tensor& x, int64_t w) {
    const int64_t H = x.size(0), L = x.size(1), pad = (w - L % w) % w;
    const at::Tensor blocks = at::constant_pad_nd(x, {0, pad}).view({H, -1, w});
    return share(blocks, blocks.sum(-1, /*keepdim=*/true)).reshape({H, -1}).narrow(1, 0, L);
}

class CurPolicy : public ScorerPolicy {
public:
    CurPolicy(const PolicyInfo& info, PolicyConfig config)
        : ScorerPolicy(info, std::move(config)),
          m_sinks(this->config().getInt("sinks")),
          m_local(this->config().getInt("local_window")),
          m_leverage(this->config().text("leverage")) {}

protected:
    int64_t sinks(const LayerState&) const override { return m_sinks; }

    at::Tensor score(const LayerState& state) override {
        const at::Tensor keys = state.keys.to(at::kFloat), values = state.values.to(at::kFloat);
        // Squared norms of the entries a head holds (a freed slot counts 0).
        at::Tensor k2 = keys.pow(2).sum(-1), v2 = values.pow(2).sum(-1);  // [Hkv, L]
        if (state.valid.defined()) {
            const at::Tensor held = state.valid.to(at::kFloat);
            k2 = k2 * held;
            v2 = v2 * held;
        }
        if (m_local > 0) {
            k2 = blockShares(k2, m_local);
            v2 = blockShares(v2, m_local);
        }
        at::Tensor s = m_leverage == "key" ? k2 : m_leverage == "value" ? v2 : m_leverage == "kv_avg" ? (k2 + v2) / 2 : k2 * v2;
        return share(s, s.sum(-1, /*keepdim=*/true));
    }

private:
    int64_t m_sinks, m_local;
    std::string m_leverage;
};

const BuiltinMaker kMaker{"cur", construct<CurPolicy>};

}  // namespace

}  // namespace kvlens
