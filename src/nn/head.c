/* BERT's lm transform and pooled head, the token and span heads (nn/head.h):
 * linear layers, the exact GELU, LayerNorm, tanh and small softmaxes, forward
 * and backward. */
#include "nn/head.h"

#include "base/status.h"
#include "nn/linear.h"

#include <math.h>
#include <string.h>

void pl_head_take_acts(pl_plan *b, pl_head_acts *a, const pl_head_set *h, int64_t B, int64_t T,
                       int64_t C)
{
    const int64_t N = B * T;
    memset(a, 0, sizeof *a);
    if (h->lm) {
        a->dense = pl_plan_take(b, N * C);
        a->act = pl_plan_take(b, N * C);
        a->mean = pl_plan_take(b, N);
        a->rstd = pl_plan_take(b, N);
        a->out = pl_plan_take(b, N * C);
    }
    if (h->pooled) {
        a->pooled = pl_plan_take(b, B * C);
        a->pdrop = h->drop ? pl_plan_take(b, B * C) : NULL;
        a->logits = pl_plan_take(b, B * h->pooled);
    }
    if (h->token) {
        a->tlogits = pl_plan_take(b, N * h->token);
        a->tdrop = h->drop ? pl_plan_take(b, N * C) : NULL;
        a->lse = pl_plan_take(b, h->span ? 2 * B : N);
    }
}

int64_t pl_head_scratch(const pl_head_set *h, int64_t B, int64_t T, int64_t C)
{
    const int64_t N = B * T;
    int64_t need = h->lm ? N * C : 0;
    if (h->pooled && 3 * B * C + B * h->pooled > need)
        need = 3 * B * C + B * h->pooled;
    if (h->token && 3 * N > need) /* the token head's row statistics; the span head's dlogits */
        need = 3 * N;
    if (h->token && h->drop && 3 * N + N * C > need) /* and the dropped input's gradient */
        need = 3 * N + N * C;
    return need;
}

pl_status pl_head_prepare(pl_gemm *g, const pl_head_set *h, int64_t B, int64_t T, int64_t C)
{
    pl_status st = PL_OK;
    if (h->lm)
        st = pl_nn_linear_prepare(g, B * T, C, C);
    if (!st && h->pooled)
        st = pl_nn_linear_prepare(g, B, C, C);
    if (!st && h->pooled)
        st = pl_nn_linear_prepare(g, B, C, h->pooled);
    if (!st && h->token)
        st = h->span ? pl_nn_linear_prepare(g, B * T, C, 2)
                     : pl_lmhead_prepare(g, B * T, C, h->token, h->token);
    return st;
}

pl_status pl_head_lm_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a, const float *x,
                         int64_t N, int64_t C, float eps)
{
    pl_status st = pl_nn_linear_fwd(g, a->dense, x, w->dense_w, w->dense_b, N, C, C);
    if (st)
        return st;
    pl_cpu_gelu_erf_fwd(a->act, a->dense, N * C);
    pl_cpu_layernorm_fwd(a->out, a->mean, a->rstd, a->act, w->ln_w, w->ln_b, N, C, eps);
    return PL_OK;
}

pl_status pl_head_lm_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                         const pl_head_acts *a, const float *x, float *dout, float *dx,
                         float *scratch, int64_t N, int64_t C)
{
    float *dact = scratch; /* (N, C) */
    memset(dact, 0, (size_t)(N * C) * sizeof(float));
    pl_cpu_layernorm_bwd(dact, dw->ln_w, dw->ln_b, dout, a->act, w->ln_w, a->mean, a->rstd, N, C);
    float *ddense = dout; /* dout is spent: it becomes the dense layer's output gradient */
    memset(ddense, 0, (size_t)(N * C) * sizeof(float));
    pl_cpu_gelu_erf_bwd(ddense, a->dense, dact, N * C);
    return pl_nn_linear_bwd(g, dx, dw->dense_w, dw->dense_b, ddense, x, w->dense_w, N, C, C);
}

/* log-sum-exp of z[0], z[stride], ..., z[(n-1) stride] */
static float lse_of(const float *z, int64_t n, int64_t stride)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        mx = z[i * stride] > mx ? z[i * stride] : mx;
    for (int64_t i = 0; i < n; i++)
        sum += expf(z[i * stride] - mx);
    return mx + logf(sum);
}

static int dropping(const pl_head_drop *drop)
{
    return drop && drop->p > 0;
}

/* out (rows, C) = in with drop's mask, rows_per_sample rows a sample (in place
 * allowed); for forward and, on the gradient, backward. */
static void head_dropout(const pl_head_drop *drop, float *out, const float *in, int64_t rows,
                         int64_t rows_per_sample, int64_t C)
{
    pl_cpu_dropout(out, in, 0, rows, rows_per_sample, C, C, 0, drop->sample, drop->p, drop->seed,
                   drop->stream);
}

/* The input of a head's linear layer: in, or its dropped copy kept in kept (rows of
 * rows_per_sample a sample); NULL when dropout is on but nothing was planned. */
static const float *dropped_input(const pl_head_drop *drop, float *kept, const float *in,
                                  int64_t rows, int64_t rows_per_sample, int64_t C)
{
    if (!dropping(drop))
        return in;
    if (!kept)
        return NULL;
    head_dropout(drop, kept, in, rows, rows_per_sample, C);
    return kept;
}

/* The first position of each sample: cls (B, C) = x[b T]. */
static void first_positions(float *cls, const float *x, int64_t B, int64_t T, int64_t C)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(cls + b * C, x + b * T * C, (size_t)C * sizeof(float));
}

/* The pooler and the pooled head's linear layer: a->pooled, a->logits (B, K). */
static pl_status pool_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a, const float *x,
                          const pl_head_drop *drop, float *scratch, int64_t B, int64_t T,
                          int64_t C, int64_t K)
{
    float *cls = scratch;
    first_positions(cls, x, B, T, C);
    pl_status st = pl_nn_linear_fwd(g, a->pooled, cls, w->pool_w, w->pool_b, B, C, C);
    if (st)
        return st;
    for (int64_t i = 0; i < B * C; i++)
        a->pooled[i] = tanhf(a->pooled[i]);
    const float *in = dropped_input(drop, a->pdrop, a->pooled, B, 1, C);
    if (!in)
        return pl_errorf(PL_ERR_INTERNAL, "head dropout %g without its planned buffer "
                         "(pl_head_set.drop)", (double)drop->p);
    return pl_nn_linear_fwd(g, a->logits, in, w->bin_w, w->bin_b, B, C, K);
}

/* pool_fwd's backward from dlogits (B, K) at scratch + 3 B C. */
static pl_status pool_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                          const pl_head_acts *a, const float *x, const pl_head_drop *drop,
                          float *dx, float *scratch, int64_t B, int64_t T, int64_t C, int64_t K)
{
    float *cls = scratch, *dpooled = scratch + B * C, *dcls = scratch + 2 * B * C;
    const float *dlogits = scratch + 3 * B * C;
    memset(dpooled, 0, (size_t)(B * C) * sizeof(float));
    const float *in = dropping(drop) ? a->pdrop : a->pooled;
    pl_status st = pl_nn_linear_bwd(g, dpooled, dw->bin_w, dw->bin_b, dlogits, in, w->bin_w, B,
                                    C, K);
    if (st)
        return st;
    if (dropping(drop))
        head_dropout(drop, dpooled, dpooled, B, 1, C);
    for (int64_t i = 0; i < B * C; i++) /* tanh' = 1 - tanh^2 */
        dpooled[i] *= 1.0f - a->pooled[i] * a->pooled[i];
    first_positions(cls, x, B, T, C);
    memset(dcls, 0, (size_t)(B * C) * sizeof(float));
    if ((st = pl_nn_linear_bwd(g, dcls, dw->pool_w, dw->pool_b, dpooled, cls, w->pool_w, B, C, C)))
        return st;
    for (int64_t b = 0; b < B; b++)
        pl_cpu_add(dx + b * T * C, dx + b * T * C, dcls + b * C, C);
    return PL_OK;
}

pl_status pl_head_pooled_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                             const float *x, const int32_t *labels, const pl_head_drop *drop,
                             float *loss, float *scratch, int64_t B, int64_t T, int64_t C,
                             int64_t K)
{
    pl_status st = pool_fwd(g, w, a, x, drop, scratch, B, T, C, K);
    if (st)
        return st;
    for (int64_t b = 0; b < B; b++) {
        const float *z = a->logits + K * b;
        loss[b] = labels[b] >= 0 && labels[b] < K ? lse_of(z, K, 1) - z[labels[b]] : 0.0f;
    }
    return PL_OK;
}

pl_status pl_head_pooled_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                             const pl_head_acts *a, const float *x, const int32_t *labels,
                             const pl_head_drop *drop, const float *dloss, float *dx,
                             float *scratch, int64_t B, int64_t T, int64_t C, int64_t K)
{
    float *dlogits = scratch + 3 * B * C;
    for (int64_t b = 0; b < B; b++) {
        const float *z = a->logits + K * b;
        const int ok = labels[b] >= 0 && labels[b] < K;
        const float lse = lse_of(z, K, 1);
        for (int64_t k = 0; k < K; k++)
            dlogits[K * b + k] = ok ? (expf(z[k] - lse) - (labels[b] == k)) * dloss[b] : 0.0f;
    }
    return pool_bwd(g, w, dw, a, x, drop, dx, scratch, B, T, C, K);
}

void pl_head_set_target(int32_t *label, float target)
{
    memcpy(label, &target, sizeof target);
}

float pl_head_target(const int32_t *label)
{
    float v;
    memcpy(&v, label, sizeof v);
    return v;
}

pl_status pl_head_regress_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                              const float *x, const int32_t *labels, const pl_head_drop *drop,
                              float *loss, float *scratch, int64_t B, int64_t T, int64_t C)
{
    pl_status st = pool_fwd(g, w, a, x, drop, scratch, B, T, C, 1);
    if (st)
        return st;
    for (int64_t b = 0; b < B; b++) {
        const float d = a->logits[b] - pl_head_target(labels + b);
        loss[b] = isnan(d) ? 0.0f : d * d;
    }
    return PL_OK;
}

pl_status pl_head_regress_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                              const pl_head_acts *a, const float *x, const int32_t *labels,
                              const pl_head_drop *drop, const float *dloss, float *dx,
                              float *scratch, int64_t B, int64_t T, int64_t C)
{
    float *dy = scratch + 3 * B * C;
    for (int64_t b = 0; b < B; b++) {
        const float d = a->logits[b] - pl_head_target(labels + b);
        dy[b] = isnan(d) ? 0.0f : 2.0f * d * dloss[b];
    }
    return pool_bwd(g, w, dw, a, x, drop, dx, scratch, B, T, C, 1);
}

/* The token and span heads' input: x, or x dropped into a->tdrop. */
static const float *token_input(const pl_head_drop *drop, pl_head_acts *a, const float *x,
                                int64_t N, int64_t C)
{
    return dropped_input(drop, a->tdrop, x, N, dropping(drop) ? drop->T : 1, C);
}

/* With dropout, the token and span heads' linear backward writes the gradient of
 * their dropped input into dtmp (N, C); masked, it is added into dx. */
static void token_dropout_bwd(const pl_head_drop *drop, float *dx, float *dtmp, int64_t N,
                              int64_t C)
{
    head_dropout(drop, dtmp, dtmp, N, drop->T, C);
    pl_cpu_add(dx, dx, dtmp, N * C);
}

/* The token head is the fused LM head's cross-entropy over K classes, whole on
 * every rank: its logits stay in a->tlogits (one chunk) from forward to backward. */
pl_status pl_head_token_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                            const float *x, const int32_t *labels, const pl_head_drop *drop,
                            float *loss, float *scratch, int64_t N, int64_t C, int64_t K)
{
    float *mx = scratch, *se = scratch + N, *tl = scratch + 2 * N;
    if (!(x = token_input(drop, a, x, N, C)))
        return pl_errorf(PL_ERR_INTERNAL, "head dropout %g without its planned buffer "
                         "(pl_head_set.drop)", (double)drop->p);
    pl_status st = pl_cpu_lmhead_stats(mx, se, tl, x, w->tok_w, w->tok_b, labels, N, C, 0, K, K,
                                       a->tlogits, g);
    if (st)
        return st;
    for (int64_t n = 0; n < N; n++) {
        a->lse[n] = mx[n] + logf(se[n]);
        loss[n] = labels[n] >= 0 ? a->lse[n] - tl[n] : 0.0f;
    }
    return PL_OK;
}

pl_status pl_head_token_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                            const pl_head_acts *a, const float *x, const int32_t *labels,
                            const pl_head_drop *drop, const float *dloss, float *dx,
                            float *scratch, int64_t N, int64_t C, int64_t K)
{
    if (!dropping(drop))
        return pl_cpu_lmhead_bwd(dx, dw->tok_w, dw->tok_b, x, w->tok_w, w->tok_b, labels, a->lse,
                                 dloss, N, C, 0, K, K, a->tlogits, 1, g);
    float *dtmp = scratch + 3 * N; /* (N, C) */
    memset(dtmp, 0, (size_t)(N * C) * sizeof(float));
    pl_status st = pl_cpu_lmhead_bwd(dtmp, dw->tok_w, dw->tok_b, a->tdrop, w->tok_w, w->tok_b,
                                     labels, a->lse, dloss, N, C, 0, K, K, a->tlogits, 1, g);
    if (!st)
        token_dropout_bwd(drop, dx, dtmp, N, C);
    return st;
}

pl_status pl_head_span_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                           const float *x, const int32_t *spans, const pl_head_drop *drop,
                           float *loss, int64_t B, int64_t T, int64_t C)
{
    if (!(x = token_input(drop, a, x, B * T, C)))
        return pl_errorf(PL_ERR_INTERNAL, "head dropout %g without its planned buffer "
                         "(pl_head_set.drop)", (double)drop->p);
    pl_status st = pl_nn_linear_fwd(g, a->tlogits, x, w->tok_w, w->tok_b, B * T, C, 2);
    if (st)
        return st;
    for (int64_t b = 0; b < B; b++) {
        float sum = 0.0f;
        for (int e = 0; e < 2; e++) { /* start, end */
            const float *z = a->tlogits + b * T * 2 + e;
            const int32_t pos = spans[e * B + b];
            a->lse[e * B + b] = lse_of(z, T, 2);
            if (pos >= 0 && pos < T)
                sum += a->lse[e * B + b] - z[2 * pos];
        }
        loss[b] = 0.5f * sum;
    }
    return PL_OK;
}

pl_status pl_head_span_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                           const pl_head_acts *a, const float *x, const int32_t *spans,
                           const pl_head_drop *drop, const float *dloss, float *dx,
                           float *scratch, int64_t B, int64_t T, int64_t C)
{
    float *dlogits = scratch; /* (N, 2) */
    for (int64_t b = 0; b < B; b++)
        for (int e = 0; e < 2; e++) {
            const float *z = a->tlogits + b * T * 2 + e;
            const int32_t pos = spans[e * B + b];
            const int ok = pos >= 0 && pos < T;
            const float lse = a->lse[e * B + b], d = 0.5f * dloss[b];
            for (int64_t t = 0; t < T; t++)
                dlogits[(b * T + t) * 2 + e] = ok ? (expf(z[2 * t] - lse) - (t == pos)) * d : 0.0f;
        }
    if (!dropping(drop))
        return pl_nn_linear_bwd(g, dx, dw->tok_w, dw->tok_b, dlogits, x, w->tok_w, B * T, C, 2);
    float *dtmp = scratch + 3 * B * T; /* (N, C) */
    memset(dtmp, 0, (size_t)(B * T * C) * sizeof(float));
    pl_status st = pl_nn_linear_bwd(g, dtmp, dw->tok_w, dw->tok_b, dlogits, a->tdrop, w->tok_w,
                                    B * T, C, 2);
    if (!st)
        token_dropout_bwd(drop, dx, dtmp, B * T, C);
    return st;
}
