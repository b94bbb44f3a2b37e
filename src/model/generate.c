/* KV-cached single-token GPT forward and sampling. */
#include "model/generate.h"

#include "base/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pl_status pl_generator_init(pl_generator *g, const pl_model_config *cfg, const pl_registry *reg,
                            const float *params, pl_gemm *gemm)
{
    memset(g, 0, sizeof *g);
    if (reg->tp_size != 1)
        return pl_errorf(PL_ERR_UNSUPPORTED, "generation needs the whole model on one rank");
    g->cfg = *cfg;
    g->gemm = gemm;
    const int64_t L = cfg->num_layers, C = cfg->hidden, F = cfg->ffn_hidden;
    const int64_t P = cfg->max_positions, V = cfg->padded_vocab;
    g->w = pl_calloc((size_t)L, sizeof *g->w);
    int64_t floats = 2 * L * P * C + C + C + 3 * C + C + F + C + V + P;
    g->mem = pl_calloc((size_t)floats, sizeof(float));
    if (!g->w || !g->mem) {
        pl_generator_free(g);
        return pl_errorf(PL_ERR_NOMEM, "out of memory for the KV cache (%lld floats)",
                         (long long)floats);
    }
    float *p = g->mem;
    g->k_cache = p, p += L * P * C;
    g->v_cache = p, p += L * P * C;
    g->x = p, p += C;
    g->ln = p, p += C;
    g->qkv = p, p += 3 * C;
    g->att = p, p += C;
    g->h = p, p += F;
    g->tmp = p, p += C;
    g->logits = p, p += V;
    g->scores = p;
    for (int64_t l = 0; l < L; l++) {
        int64_t lo, hi;
        pl_status st = pl_model_layer_bind(reg, &cfg->block, params, l, &g->w[l], &lo, &hi);
        if (st) {
            pl_generator_free(g);
            return st;
        }
    }
    const char *top[4] = {"embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
                          "decoder.final_layernorm.weight", "decoder.final_layernorm.bias"};
    const float **dst[4] = {&g->wte, &g->wpe, &g->lnf_w, &g->lnf_b};
    for (int k = 0; k < 4; k++) {
        const pl_param *q = pl_registry_find(reg, top[k]);
        if (!q || q->offset < 0) {
            pl_generator_free(g);
            return pl_errorf(PL_ERR_INTERNAL, "parameter %s missing", top[k]);
        }
        *dst[k] = params + q->offset;
    }
    return PL_OK;
}

void pl_generator_free(pl_generator *g)
{
    pl_free(g->w);
    pl_free(g->mem);
    memset(g, 0, sizeof *g);
}

/* y (OC) = x (IC) . W^T + b through the GEMM context (a 1-row matrix product). */
static pl_status matvec(pl_generator *g, float *y, const float *x, const float *w, const float *b,
                        int64_t IC, int64_t OC)
{
    pl_status st = pl_gemm_run(g->gemm, 0, 1, 1, OC, IC, x, IC, w, IC, 0.0f, y, OC);
    if (!st && b)
        for (int64_t o = 0; o < OC; o++)
            y[o] += b[o];
    return st;
}

static void layernorm(pl_generator *g, float *out, const float *x, const float *w, const float *b)
{
    float mean, rstd;
    pl_cpu_layernorm_fwd(out, &mean, &rstd, x, w, b, 1, g->cfg.hidden, g->cfg.ln_eps);
}

pl_status pl_generator_step(pl_generator *g, int32_t token, int64_t pos)
{
    const pl_model_config *c = &g->cfg;
    const int64_t C = c->hidden, F = c->ffn_hidden, NH = c->heads, HS = C / NH, P = c->max_positions;
    if (pos < 0 || pos >= P)
        return pl_errorf(PL_ERR_ARG, "position %lld is beyond --max-position-embeddings %lld",
                         (long long)pos, (long long)P);
    if (token < 0 || token >= c->vocab_size)
        return pl_errorf(PL_ERR_ARG, "token id %d is outside the vocabulary (%lld)", token,
                         (long long)c->vocab_size);
    pl_status st = PL_OK;
    for (int64_t i = 0; i < C; i++)
        g->x[i] = g->wte[(int64_t)token * C + i] + g->wpe[pos * C + i];
    const float scale = 1.0f / sqrtf((float)HS);
    for (int64_t l = 0; l < c->num_layers; l++) {
        const pl_block_weights *w = &g->w[l];
        float *kc = g->k_cache + l * P * C, *vc = g->v_cache + l * P * C;
        layernorm(g, g->ln, g->x, w->norm1_w, w->norm1_b);
        if ((st = matvec(g, g->qkv, g->ln, w->qkv_w, w->qkv_b, C, 3 * C)))
            return st;
        for (int64_t h = 0; h < NH; h++) { /* per head [q, k, v] rows */
            memcpy(kc + pos * C + h * HS, g->qkv + h * 3 * HS + HS, (size_t)HS * sizeof(float));
            memcpy(vc + pos * C + h * HS, g->qkv + h * 3 * HS + 2 * HS, (size_t)HS * sizeof(float));
        }
        for (int64_t h = 0; h < NH; h++) {
            const float *q = g->qkv + h * 3 * HS;
            float mx = -INFINITY;
            for (int64_t t = 0; t <= pos; t++) {
                float s = 0;
                for (int64_t d = 0; d < HS; d++)
                    s += q[d] * kc[t * C + h * HS + d];
                g->scores[t] = s * scale;
                mx = g->scores[t] > mx ? g->scores[t] : mx;
            }
            float sum = 0;
            for (int64_t t = 0; t <= pos; t++)
                sum += g->scores[t] = expf(g->scores[t] - mx);
            float *o = g->att + h * HS;
            memset(o, 0, (size_t)HS * sizeof(float));
            for (int64_t t = 0; t <= pos; t++)
                for (int64_t d = 0; d < HS; d++)
                    o[d] += g->scores[t] / sum * vc[t * C + h * HS + d];
        }
        if ((st = matvec(g, g->tmp, g->att, w->proj_w, w->proj_b, C, C)))
            return st;
        for (int64_t i = 0; i < C; i++)
            g->x[i] += g->tmp[i];
        layernorm(g, g->ln, g->x, w->norm2_w, w->norm2_b);
        if ((st = matvec(g, g->h, g->ln, w->fc1_w, w->fc1_b, C, F)))
            return st;
        pl_cpu_gelu_fwd(g->h, g->h, F);
        if ((st = matvec(g, g->tmp, g->h, w->fc2_w, w->fc2_b, F, C)))
            return st;
        for (int64_t i = 0; i < C; i++)
            g->x[i] += g->tmp[i];
    }
    layernorm(g, g->ln, g->x, g->lnf_w, g->lnf_b);
    return matvec(g, g->logits, g->ln, g->wte, NULL, C, c->vocab_size);
}

static int desc_by_value(const void *a, const void *b)
{
    const float *x = a, *y = b;
    return (x[0] < y[0]) - (x[0] > y[0]);
}

int32_t pl_sample_logits(const float *logits, int64_t V, double temperature, int64_t top_k,
                         double top_p, double u, float *scratch)
{
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best])
            best = i;
    if (temperature <= 0)
        return (int32_t)best;
    /* (value, id) pairs sorted by value, descending. */
    float *pairs = scratch;
    for (int64_t i = 0; i < V; i++) {
        pairs[2 * i] = (float)((logits[i] - logits[best]) / temperature);
        pairs[2 * i + 1] = (float)i;
    }
    qsort(pairs, (size_t)V, 2 * sizeof(float), desc_by_value);
    int64_t keep = top_k > 0 && top_k < V ? top_k : V;
    double total = 0;
    for (int64_t i = 0; i < keep; i++)
        total += exp(pairs[2 * i]);
    if (top_p < 1.0) { /* smallest prefix whose probability reaches top_p */
        double acc = 0;
        for (int64_t i = 0; i < keep; i++) {
            acc += exp(pairs[2 * i]) / total;
            if (acc >= top_p) {
                keep = i + 1;
                break;
            }
        }
        total = 0;
        for (int64_t i = 0; i < keep; i++)
            total += exp(pairs[2 * i]);
    }
    double r = u * total, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += exp(pairs[2 * i]);
        if (r <= acc)
            return (int32_t)pairs[2 * i + 1];
    }
    return (int32_t)pairs[2 * (keep - 1) + 1];
}
