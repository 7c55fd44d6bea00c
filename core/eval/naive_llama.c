/* See naive_llama.h. Deliberately plain: no BLAS, no SIMD intrinsics, no
 * threads; what a careful C programmer writes in an afternoon. */
#include "core/eval/naive_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct naive_llama_state {
    const naive_llama_model *m;
    int pos;
    float *x, *h, *q, *k, *v, *att, *o, *g, *u, *logits, *inv_freq;
    float *key_cache, *value_cache; /* [layers, max_seq, Hkv*D] */
};

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; ++i) out[i] = w[i] * (x[i] * scale);
}

/* out[r] = sum_c w[r, c] x[c] */
static void matvec(float *out, const float *w, const float *x, int rows, int cols)
{
    for (int r = 0; r < rows; ++r) {
        const float *row = w + (size_t)r * cols;
        float acc = 0;
        for (int c = 0; c < cols; ++c) acc += row[c] * x[c];
        out[r] = acc;
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

naive_llama_state *naive_llama_new(const naive_llama_model *m)
{
    naive_llama_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    const size_t E = m->hidden, QD = (size_t)m->heads * m->head_dim, KD = (size_t)m->kv_heads * m->head_dim;
    s->m = m;
    s->x = calloc(E, sizeof(float));
    s->h = calloc(E, sizeof(float));
    s->q = calloc(QD, sizeof(float));
    s->k = calloc(KD, sizeof(float));
    s->v = calloc(KD, sizeof(float));
    s->o = calloc(QD, sizeof(float));
    s->att = calloc((size_t)m->max_seq, sizeof(float));
    s->g = calloc((size_t)m->intermediate, sizeof(float));
    s->u = calloc((size_t)m->intermediate, sizeof(float));
    s->logits = calloc((size_t)m->vocab, sizeof(float));
    s->inv_freq = calloc((size_t)m->head_dim / 2, sizeof(float));
    s->key_cache = calloc((size_t)m->layers * m->max_seq * KD, sizeof(float));
    s->value_cache = calloc((size_t)m->layers * m->max_seq * KD, sizeof(float));
    if (!s->x || !s->h || !s->q || !s->k || !s->v || !s->o || !s->att || !s->g || !s->u || !s->logits ||
        !s->inv_freq || !s->key_cache || !s->value_cache) {
        naive_llama_free(s);
        return NULL;
    }
    for (int i = 0; i < m->head_dim / 2; ++i)
        s->inv_freq[i] = 1.0f / powf(m->rope_theta, (float)(2 * i) / (float)m->head_dim);
    return s;
}

void naive_llama_free(naive_llama_state *s)
{
    if (!s) return;
    free(s->x); free(s->h); free(s->q); free(s->k); free(s->v); free(s->o); free(s->att);
    free(s->g); free(s->u); free(s->logits); free(s->inv_freq); free(s->key_cache); free(s->value_cache);
    free(s);
}

const float *naive_llama_step(naive_llama_state *s, int token)
{
    const naive_llama_model *m = s->m;
    if (s->pos >= m->max_seq || token < 0 || token >= m->vocab) return NULL;
    const int E = m->hidden, D = m->head_dim, H = m->heads, Hkv = m->kv_heads, F = m->intermediate;
    const int group = H / Hkv, pos = s->pos, KD = Hkv * D;
    memcpy(s->x, m->embed + (size_t)token * E, (size_t)E * sizeof(float));
    for (int l = 0; l < m->layers; ++l) {
        const naive_llama_layer *w = &m->layer[l];
        rmsnorm(s->h, s->x, w->attn_norm, E, m->norm_eps);
        matvec(s->q, w->wq, s->h, H * D, E);
        matvec(s->k, w->wk, s->h, KD, E);
        matvec(s->v, w->wv, s->h, KD, E);
        rope(s->q, H, D, pos, s->inv_freq);
        rope(s->k, Hkv, D, pos, s->inv_freq);
        float *kc = s->key_cache + (size_t)l * m->max_seq * KD, *vc = s->value_cache + (size_t)l * m->max_seq * KD;
        memcpy(kc + (size_t)pos * KD, s->k, (size_t)KD * sizeof(float));
        memcpy(vc + (size_t)pos * KD, s->v, (size_t)KD * sizeof(float));
        const float scale = 1.0f / sqrtf((float)D);
        for (int h = 0; h < H; ++h) {
            const float *q = s->q + (size_t)h * D;
            const int kvh = h / group;
            float mx = -INFINITY;
            for (int t = 0; t <= pos; ++t) {
                const float *k = kc + (size_t)t * KD + (size_t)kvh * D;
                float dot = 0;
                for (int i = 0; i < D; ++i) dot += q[i] * k[i];
                s->att[t] = dot * scale;
                if (s->att[t] > mx) mx = s->att[t];
            }
            float sum = 0;
            for (int t = 0; t <= pos; ++t) {
                s->att[t] = expf(s->att[t] - mx);
                sum += s->att[t];
            }
            float *o = s->o + (size_t)h * D;
            memset(o, 0, (size_t)D * sizeof(float));
            for (int t = 0; t <= pos; ++t) {
                const float a = s->att[t] / sum;
                const float *v = vc + (size_t)t * KD + (size_t)kvh * D;
                for (int i = 0; i < D; ++i) o[i] += a * v[i];
            }
        }
        matvec(s->h, w->wo, s->o, E, H * D);
        for (int i = 0; i < E; ++i) s->x[i] += s->h[i];
        rmsnorm(s->h, s->x, w->mlp_norm, E, m->norm_eps);
        matvec(s->g, w->w_gate, s->h, F, E);
        matvec(s->u, w->w_up, s->h, F, E);
        for (int i = 0; i < F; ++i) s->g[i] = s->g[i] / (1.0f + expf(-s->g[i])) * s->u[i];
        matvec(s->h, w->w_down, s->g, E, F);
        for (int i = 0; i < E; ++i) s->x[i] += s->h[i];
    }
    rmsnorm(s->h, s->x, m->final_norm, E, m->norm_eps);
    matvec(s->logits, m->lm_head, s->h, m->vocab, E);
    s->pos++;
    return s->logits;
}
