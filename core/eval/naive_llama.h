/* A naive single-file C reference of the Llama forward pass (in the spirit
 * of llama2.c's run.c): float32, one thread, plain loops, one token at a
 * time over a plain KV cache. `kvlens-cli bench` times the real engine's
 * decode against it (SPEC "Performance": the engine must beat it) and
 * checks that both give the same logits. Llama layout only: no biases, no
 * q/k norms, RMSNorm, SwiGLU, RoPE with HF's rotate-half pairing. */
#ifndef KVLENS_NAIVE_LLAMA_H
#define KVLENS_NAIVE_LLAMA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const float *attn_norm, *wq, *wk, *wv, *wo; /* wq [H*D, E], wk/wv [Hkv*D, E], wo [E, H*D] */
    const float *mlp_norm, *w_gate, *w_up, *w_down; /* gate/up [F, E], down [E, F] */
} naive_llama_layer;

typedef struct {
    int vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_seq;
    float norm_eps, rope_theta;
    const float *embed;      /* [vocab, hidden] */
    const naive_llama_layer *layer; /* [layers] */
    const float *final_norm; /* [hidden] */
    const float *lm_head;    /* [vocab, hidden] (the embedding when tied) */
} naive_llama_model;

typedef struct naive_llama_state naive_llama_state;

/* NULL when out of memory. */
naive_llama_state *naive_llama_new(const naive_llama_model *m);
void naive_llama_free(naive_llama_state *s);
/* Reads `token` at the next position; returns the logits [vocab] (owned by
 * the state, valid until the next call), or NULL when the cache is full. */
const float *naive_llama_step(naive_llama_state *s, int token);

#ifdef __cplusplus
}
#endif

#endif
