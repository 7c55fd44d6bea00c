/* See runc_llama.h. The shape of llama2.c's run.c: plain loops the compiler
 * vectorises (-Ofast), matrix rows and attention heads split over OpenMP
 * threads, no BLAS and no intrinsics. The two leaf kernels are cloned per
 * x86-64 level and picked at load time, so they run the code -march=native
 * would give on this machine while the packaged binary still starts on any
 * x86-64 CPU. */
#include "core/eval/runc_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* aligned(64): each clone starts on a cache line, so a relink does not move
   its loops across a boundary (the engine's kernels do the same). */
#define RUNC_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), aligned(64)))
#else
#define RUNC_KERNEL
#endif

struct runc_llama_state {
    const runc_llama_model *m;
    int pos, threads;
    float *x, *h, *q, *k, *v, *att, *o, *g, *u, *logits, *inv_freq;
    float *key_cache, *value_cache; /* [layers, max_seq, Hkv*D] */
};

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    float ss = 0;
    for (int i = 0; i < n; ++i) ss += x[i] * x[i];
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; ++i) out[i] = w[i] * (x[i] * scale);
}

/* out[r] = sum_c w[r, c] x[c] for rows [begin, end) */
RUNC_KERNEL static void matvec_rows(float *out, const float *w, const float *x, int begin, int end, int cols)
{
    for (int r = begin; r < end; ++r) {
        const float *row = w + (size_t)r * cols;
        float acc = 0;
        for (int c = 0; c < cols; ++c) acc += row[c] * x[c];
        out[r] = acc;
    }
}

/* run.c's matmul: the rows split evenly over the threads. */
static void matvec(const runc_llama_state *s, float *out, const float *w, const float *x, int rows, int cols)
{
    const int threads = s->threads;
#pragma omp parallel for num_threads(threads)
    for (int t = 0; t < threads; ++t)
        matvec_rows(out, w, x, (int)((long)rows * t / threads), (int)((long)rows * (t + 1) / threads), cols);
}

/* One query head over positions [0, n): softmax(q·k / sqrt(D)) · v into o. */
RUNC_KERNEL static void attend_head(float *o, float *att, const float *q, const float *kc, const float *vc, int n,
                                    int stride, int dim)
{
    const float scale = 1.0f / sqrtf((float)dim);
    float mx = -INFINITY;
    for (int t = 0; t < n; ++t) {
        const float *k = kc + (size_t)t * stride;
        float dot = 0;
        for (int i = 0; i < dim; ++i) dot += q[i] * k[i];
        att[t] = dot * scale;
        if (att[t] > mx) mx = att[t];
    }
    float sum = 0;
    for (int t = 0; t < n; ++t) {
        att[t] = expf(att[t] - mx);
        sum += att[t];
    }
    memset(o, 0, (size_t)dim * sizeof(float));
    for (int t = 0; t < n; ++t) {
        const float a = att[t] / sum;
        const float *v = vc + (size_t)t * stride;
        for (int i = 0; i < dim; ++i) o[i] += a * v[i];
    }
}

/* HF rotate-half: dimension i pairs with i + D/2. */
static void rope(float *vec, int heads, int dim, int pos, const float *inv_freq)
{
    const int half = dim / 2;
    for (int h = 0; h < heads; ++h) {
        float *p = vec + (size_t)h * dim;
        for (int i = 0; i < half; ++i) {
            const float a = (float)pos * inv_freq[i];
            const float c = cosf(a), s = sinf(a);
            const float x0 = p[i], x1 = p[i + half];
            p[i] = x0 * c - x1 * s;
            p[i + half] = x1 * c + x0 * s;
        }
    }
}

runc_llama_state *runc_llama_new(const runc_llama_model *m, int threads)
{
    runc_llama_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    const size_t E = m->hidden, QD = (size_t)m->heads * m->head_dim, KD = (size_t)m->kv_heads * m->head_dim;
    s->m = m;
    s->threads = threads < 1 ? 1 : threads;
    s->x = calloc(E, sizeof(float));
    s->h = calloc(E, sizeof(float));
    s->q = calloc(QD, sizeof(float));
    s->k = calloc(KD, sizeof(float));
    s->v = calloc(KD, sizeof(float));
    s->o = calloc(QD, sizeof(float));
    s->att = calloc((size_t)m->heads * m->max_seq, sizeof(float)); /* a row per head: heads run in parallel */
    s->g = calloc((size_t)m->intermediate, sizeof(float));
    s->u = calloc((size_t)m->intermediate, sizeof(float));
    s->logits = calloc((size_t)m->vocab, sizeof(float));
    s->inv_freq = calloc((size_t)m->head_dim / 2, sizeof(float));
    s->key_cache = calloc((size_t)m->layers * m->max_seq * KD, sizeof(float));
    s->value_cache = calloc((size_t)m->layers * m->max_seq * KD, sizeof(float));
    if (!s->x || !s->h || !s->q || !s->k || !s->v || !s->o || !s->att || !s->g || !s->u || !s->logits ||
        !s->inv_freq || !s->key_cache || !s->value_cache) {
        runc_llama_free(s);
        return NULL;
    }
    for (int i = 0; i < m->head_dim / 2; ++i)
        s->inv_freq[i] = 1.0f / powf(m->rope_theta, (float)(2 * i) / (float)m->head_dim);
    return s;
}

void runc_llama_free(runc_llama_state *s)
{
    if (!s) return;
    free(s->x); free(s->h); free(s->q); free(s->k); free(s->v); free(s->o); free(s->att);
    free(s->g); free(s->u); free(s->logits); free(s->inv_freq); free(s->key_cache); free(s->value_cache);
    free(s);
}

const float *runc_llama_step(runc_llama_state *s, int token)
{
    const runc_llama_model *m = s->m;
    if (s->pos >= m->max_seq || token < 0 || token >= m->vocab) return NULL;
    const int E = m->hidden, D = m->head_dim, H = m->heads, Hkv = m->kv_heads, F = m->intermediate;
    const int group = H / Hkv, pos = s->pos, KD = Hkv * D, threads = s->threads;
    memcpy(s->x, m->embed + (size_t)token * E, (size_t)E * sizeof(float));
    for (int l = 0; l < m->layers; ++l) {
        const runc_llama_layer *w = &m->layer[l];
        rmsnorm(s->h, s->x, w->attn_norm, E, m->norm_eps);
        matvec(s, s->q, w->wq, s->h, H * D, E);
        matvec(s, s->k, w->wk, s->h, KD, E);
        matvec(s, s->v, w->wv, s->h, KD, E);
        rope(s->q, H, D, pos, s->inv_freq);
        rope(s->k, Hkv, D, pos, s->inv_freq);
        float *kc = s->key_cache + (size_t)l * m->max_seq * KD, *vc = s->value_cache + (size_t)l * m->max_seq * KD;
        memcpy(kc + (size_t)pos * KD, s->k, (size_t)KD * sizeof(float));
        memcpy(vc + (size_t)pos * KD, s->v, (size_t)KD * sizeof(float));
#pragma omp parallel for num_threads(threads)
        for (int h = 0; h < H; ++h) {
            const size_t kv = (size_t)(h / group) * D;
            attend_head(s->o + (size_t)h * D, s->att + (size_t)h * m->max_seq, s->q + (size_t)h * D, kc + kv, vc + kv,
                        pos + 1, KD, D);
        }
        matvec(s, s->h, w->wo, s->o, E, H * D);
        for (int i = 0; i < E; ++i) s->x[i] += s->h[i];
        rmsnorm(s->h, s->x, w->mlp_norm, E, m->norm_eps);
        matvec(s, s->g, w->w_gate, s->h, F, E);
        matvec(s, s->u, w->w_up, s->h, F, E);
        for (int i = 0; i < F; ++i) s->g[i] = s->g[i] / (1.0f + expf(-s->g[i])) * s->u[i];
        matvec(s, s->h, w->w_down, s->g, E, F);
        for (int i = 0; i < E; ++i) s->x[i] += s->h[i];
    }
    rmsnorm(s->h, s->x, m->final_norm, E, m->norm_eps);
    matvec(s, s->logits, m->lm_head, s->h, m->vocab, E);
    s->pos++;
    return s->logits;
}
