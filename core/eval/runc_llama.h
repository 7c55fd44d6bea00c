/* A single-file C reference of the Llama forward pass, written and built the
 * way llama2.c's run.c is raced as its Makefile's `runomp` target: float32,
 * one token at a time over a plain KV cache, matrix rows and attention heads
 * split over OpenMP threads, compiled with -Ofast -fopenmp and its kernels
 * vectorised for the machine it runs on (core/eval/CMakeLists.txt says how).
 * `kvlens-cli bench --quick` races the engine's decode against it at 1 and 2
 * threads (SPEC "Performance") and checks that both give the same logits.
 * Llama layout only: no biases, no q/k norms, RMSNorm, SwiGLU, RoPE with
 * HF's rotate-half pairing. */
#ifndef KVLENS_RUNC_LLAMA_H
#define KVLENS_RUNC_LLAMA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const float *attn_norm, *wq, *wk, *wv, *wo; /* wq [H*D, E], wk/wv [Hkv*D, E], wo [E, H*D] */
    const float *mlp_norm, *w_gate, *w_up, *w_down; /* gate/up [F, E], down [E, F] */
} runc_llama_layer;

typedef struct {
    int vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_seq;
    float norm_eps, rope_theta;
    const float *embed;      /* [vocab, hidden] */
    const runc_llama_layer *layer; /* [layers] */
    const float *final_norm; /* [hidden] */
    const float *lm_head;    /* [vocab, hidden] (the embedding when tied) */
} runc_llama_model;

typedef struct runc_llama_state runc_llama_state;

/* A state whose steps run on `threads` OpenMP threads (≥ 1); NULL when out
 * of memory. */
runc_llama_state *runc_llama_new(const runc_llama_model *m, int threads);
void runc_llama_free(runc_llama_state *s);
/* Reads `token` at the next position; returns the logits [vocab] (owned by
 * the state, valid until the next call), or NULL when the cache is full. */
const float *runc_llama_step(runc_llama_state *s, int token);

#ifdef __cplusplus
}
#endif

#endif
