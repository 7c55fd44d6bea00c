// AnDPro (Geng et al., NeurIPS 2025, MIRALab-USTC/LLM-AnDPro): a token's value
// matters by how much its contribution to the window's attention output
// points along that output. Per query head h and window query i: Ã = the
// row's attention on the keys before the window, pooled (kernel, as SnapKV);
// u_ij = Ã_ij v_j; the anchor y_i = Σ_{j evictable} u_ij; s_j = Σ_i <u_ij, y_i>
// = Σ_i Ã_ij <v_j, y_i>. Group-reduced; `chunk` > 1 gives every token its
// chunk's summed score, chunks counted from the first evictable entry of a
// head. heads=adaptive with alpha=0 (the default) is the global top-k over
// all KV heads that the reference uses.
#include <ATen/ATen.h>

#include <algorithm>

#include "core/policy/factory.h"
#include "core/policy/snapkv.h"

namespace kvlens {
namespace {

class AnDProPolicy : public WindowScorer {
public:
    AnDProPolicy(const PolicyInfo& info, PolicyConfig config)
        : WindowScorer(info, std::move(config)),
          m_sinks(this->config().getInt("sinks")),
          m_chunk(this->config().getInt("chunk")) {}

protected:
    int64_t sinks(const LayerState&) const override { return m_sinks; }

    at::Tensor score(const LayerState& state) override {
        const at::Tensor attn = windowAttention(state);  // [Hkv, G, m, L]
        if (!attn.defined()) return {};
        const int64_t Hkv = attn.size(0), G = attn.size(1), m = attn.size(2), L = attn.size(3);
        const at::Tensor before = beforeWindow(state);
        const at::Tensor pooled = pool1d(attn, before.view({Hkv, 1, 1, L}), kernel(), pool()).reshape({Hkv, G * m, L});
        // The anchor sums over the evictable entries: the pooled weights
        // with each head's sinks zeroed (pool1d already zeroed the window
        // and the padding, where `before` is false).
        at::Tensor evictable = pooled.clone();
        for (int64_t h = 0; h < Hkv; ++h)
            if (const int64_t s = std::min(m_sinks, state.length(h)); s > 0) evictable[h].narrow(-1, 0, s).zero_();
        const at::Tensor v = state.values.to(at::kFloat);               // [Hkv, L, D]
        const at::Tensor anchor = at::matmul(evictable, v);              // [Hkv, G*m, D]
        at::Tensor along = at::matmul(anchor, v.transpose(1, 2));        // <y_i, v_j>: [Hkv, G*m, L]
        const at::Tensor perHead = along.mul_(pooled).view({Hkv, G, m, L}).sum(2).reshape({Hkv * G, L});
        const at::Tensor s = reduceGroups(perHead, Hkv, config().gqa);
        return m_chunk > 1 ? chunkSums(s, state) : s;
    }

private:
    at::Tensor chunkSums(const at::Tensor& scores, const LayerState& state) const {
        at::Tensor s = scores.to(at::kCPU).contiguous().clone();
        const int64_t L = s.size(1);
        float* p = s.data_ptr<float>();
        for (int64_t h = 0; h < state.numKvHeads; ++h) {
            const int64_t len = state.length(h);
            const int64_t first = std::min(m_sinks, len), end = std::max(first, len - window(state));
            for (int64_t start = first; start < end; start += m_chunk) {
                const int64_t stop = std::min(start + m_chunk, end);
                float sum = 0;
                for (int64_t i = start; i < stop; ++i) sum += p[h * L + i];
                std::fill(p + h * L + start, p + h * L + stop, sum);
            }
        }
        return s;
    }

    int64_t m_sinks, m_chunk;
};

const BuiltinMaker kMaker{"andpro", construct<AnDProPolicy>};

}  // namespace

}  // namespace kvlens
