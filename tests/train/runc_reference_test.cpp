// The C reference (core/eval/runc_llama.c) that `kvlens-cli bench` races
// computes the same logits as the engine, token by token, on a random GQA
// Llama model, on one thread and on several: the race compares like with like.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include "core/eval/runc_llama.h"
#include "core/model/model.h"
#include "core/run/policy_run.h"
#include "core/train/trainer.h"

namespace kvlens {
namespace {

class RuncReference : public ::testing::TestWithParam<int> {};

TEST_P(RuncReference, SameLogitsAsTheEngine) {
    TrainOptions o;
    o.layers = 2, o.hidden = 64, o.heads = 4, o.kvHeads = 2, o.intermediate = 96, o.maxPositions = 256;
    TrainableModel m = initModel(trainConfig(o), 21);
    {
        at::NoGradGuard noGrad;  // weights large enough for attention to be far from uniform
        for (auto& p : m.parameters)
            if (p.second.dim() == 2) p.second.mul_(8.0);
    }
    const ModelConfig& c = m.config;
    std::map<std::string, float*> w;
    for (auto& [name, t] : m.parameters) w[name] = t.data_ptr<float>();
    std::vector<runc_llama_layer> layers;
    for (int64_t l = 0; l < c.numLayers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        layers.push_back({w[p + "input_layernorm.weight"], w[p + "self_attn.q_proj.weight"],
                          w[p + "self_attn.k_proj.weight"], w[p + "self_attn.v_proj.weight"],
                          w[p + "self_attn.o_proj.weight"], w[p + "post_attention_layernorm.weight"],
                          w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"], w[p + "mlp.down_proj.weight"]});
    }
    const int64_t n = 40;
    runc_llama_model nm{int(c.vocabSize), int(c.hiddenSize), int(c.intermediateSize), int(c.numLayers),
                         int(c.numHeads), int(c.numKvHeads), int(c.headDim), int(n), float(c.normEps),
                         float(c.ropeTheta), w["model.embed_tokens.weight"], layers.data(), w["model.norm.weight"],
                         w["model.embed_tokens.weight"]};
    runc_llama_state* s = runc_llama_new(&nm, GetParam());
    ASSERT_NE(s, nullptr);
    at::NoGradGuard noGrad;
    PolicyRun full(*m.model, parsePolicySpec("full"), BudgetSpec{}, 1, CaptureTarget{});
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t token = (i * 37 + 5) % c.vocabSize;
        const float* reference = runc_llama_step(s, int(token));
        ASSERT_NE(reference, nullptr);
        if (i == 0) {
            full.readPrompt({token}, {});
        } else {
            full.readToken(token);
        }
        at::Tensor ref = at::from_blob(const_cast<float*>(reference), {c.vocabSize}, at::kFloat);
        const at::Tensor engine = full.logits();
        worst = std::max(worst, (engine - ref).abs().max().item<double>() / (ref.abs().max().item<double>() + 1e-6));
    }
    EXPECT_LT(worst, 1e-4) << "largest logit difference relative to the largest logit";
    EXPECT_EQ(runc_llama_step(s, 1), nullptr) << "the cache is full after max_seq tokens";
    runc_llama_free(s);
}

INSTANTIATE_TEST_SUITE_P(Threads, RuncReference, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace kvlens
