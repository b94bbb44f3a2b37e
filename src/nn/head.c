/* BERT's lm transform and binary head (nn/head.h): linear layers, the exact
 * GELU, LayerNorm and tanh, forward and backward. */
#include "nn/head.h"

#include "nn/linear.h"

#include <math.h>
#include <string.h>

void pl_head_take_acts(pl_plan *b, pl_head_acts *a, int lm, int binary, int64_t B, int64_t T,
                       int64_t C)
{
    const int64_t N = B * T;
    memset(a, 0, sizeof *a);
    if (lm) {
        a->dense = pl_plan_take(b, N * C);
        a->act = pl_plan_take(b, N * C);
        a->mean = pl_plan_take(b, N);
        a->rstd = pl_plan_take(b, N);
        a->out = pl_plan_take(b, N * C);
    }
    if (binary) {
        a->pooled = pl_plan_take(b, B * C);
        a->logits = pl_plan_take(b, 2 * B);
    }
}

int64_t pl_head_scratch(int lm, int binary, int64_t B, int64_t T, int64_t C)
{
    const int64_t need_lm = lm ? B * T * C : 0, need_bin = binary ? 3 * B * C + 2 * B : 0;
    return need_lm > need_bin ? need_lm : need_bin;
}

pl_status pl_head_prepare(pl_gemm *g, int lm, int binary, int64_t B, int64_t T, int64_t C)
{
    pl_status st = PL_OK;
    if (lm)
        st = pl_nn_linear_prepare(g, B * T, C, C);
    if (!st && binary)
        st = pl_nn_linear_prepare(g, B, C, C);
    if (!st && binary)
        st = pl_nn_linear_prepare(g, B, C, 2);
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

/* The first position of each sample: cls (B, C) = x[b T]. */
static void first_positions(float *cls, const float *x, int64_t B, int64_t T, int64_t C)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(cls + b * C, x + b * T * C, (size_t)C * sizeof(float));
}

pl_status pl_head_binary_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                             const float *x, const int32_t *labels, float *loss, float *scratch,
                             int64_t B, int64_t T, int64_t C)
{
    float *cls = scratch;
    first_positions(cls, x, B, T, C);
    pl_status st = pl_nn_linear_fwd(g, a->pooled, cls, w->pool_w, w->pool_b, B, C, C);
    if (st)
        return st;
    for (int64_t i = 0; i < B * C; i++)
        a->pooled[i] = tanhf(a->pooled[i]);
    if ((st = pl_nn_linear_fwd(g, a->logits, a->pooled, w->bin_w, w->bin_b, B, C, 2)))
        return st;
    for (int64_t b = 0; b < B; b++) {
        const float *z = a->logits + 2 * b;
        const float mx = z[0] > z[1] ? z[0] : z[1];
        const float lse = mx + logf(expf(z[0] - mx) + expf(z[1] - mx));
        loss[b] = labels[b] == 0 || labels[b] == 1 ? lse - z[labels[b]] : 0.0f;
    }
    return PL_OK;
}

pl_status pl_head_binary_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                             const pl_head_acts *a, const float *x, const int32_t *labels,
                             const float *dloss, float *dx, float *scratch, int64_t B, int64_t T,
                             int64_t C)
{
    float *cls = scratch, *dpooled = scratch + B * C, *dcls = scratch + 2 * B * C;
    float *dlogits = scratch + 3 * B * C;
    for (int64_t b = 0; b < B; b++) {
        const float *z = a->logits + 2 * b;
        const float mx = z[0] > z[1] ? z[0] : z[1];
        const float lse = mx + logf(expf(z[0] - mx) + expf(z[1] - mx));
        const int ok = labels[b] == 0 || labels[b] == 1;
        for (int k = 0; k < 2; k++)
            dlogits[2 * b + k] = ok ? (expf(z[k] - lse) - (labels[b] == k)) * dloss[b] : 0.0f;
    }
    memset(dpooled, 0, (size_t)(B * C) * sizeof(float));
    pl_status st = pl_nn_linear_bwd(g, dpooled, dw->bin_w, dw->bin_b, dlogits, a->pooled,
                                    w->bin_w, B, C, 2);
    if (st)
        return st;
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
