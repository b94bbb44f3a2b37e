/* Clipping coefficient (Megatron's clip_grad_norm_fp32: clip / (norm + 1e-6)
 * when below 1) and the per-parameter AdamW kernel calls. */
#include "optim/adamw.h"

#include "kernels/kernels.h"

#include <math.h>

double pl_adamw_step(const pl_registry *reg, float *params, const float *grads, float *exp_avg,
                     float *exp_avg_sq, const pl_adamw_hparams *hp, double lr, int64_t t,
                     double grad_sumsq)
{
    return pl_adamw_step_range(reg, 0, reg->numel, params, grads, exp_avg, exp_avg_sq, hp, lr, t,
                               grad_sumsq);
}

double pl_adamw_step_range(const pl_registry *reg, int64_t lo, int64_t hi, float *params,
                           const float *grads, float *exp_avg, float *exp_avg_sq,
                           const pl_adamw_hparams *hp, double lr, int64_t t, double grad_sumsq)
{
    double norm = sqrt(grad_sumsq);
    float scale = 1.0f;
    if (hp->clip_grad > 0 && hp->clip_grad / (norm + 1e-6) < 1.0)
        scale = (float)(hp->clip_grad / (norm + 1e-6));
    float bc1 = (float)(1.0 - pow(hp->beta1, (double)t));
    float bc2 = (float)(1.0 - pow(hp->beta2, (double)t));
    for (int i = 0; i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        if (p->offset < 0)
            continue;
        int64_t a = p->offset > lo ? p->offset : lo;
        int64_t b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a >= b)
            continue;
        float wd = p->weight_decay ? (float)hp->weight_decay : 0.0f;
        pl_cpu_adamw(params + (a - lo), grads + (a - lo), exp_avg + (a - lo),
                     exp_avg_sq + (a - lo), b - a, (float)lr, (float)hp->beta1,
                     (float)hp->beta2, (float)hp->eps, wd, bc1, bc2, scale);
    }
    return norm;
}

/* The part of parameter p inside [lo, hi) that this TP rank counts (see
 * pl_grad_sumsq_range): [*a, *b), or 0 when there is none. */
static int own_span(const pl_registry *reg, const pl_param *p, int64_t lo, int64_t hi, int64_t *a,
                    int64_t *b)
{
    if (p->offset < 0 || p->tied_copy || (p->split == PL_TP_REPLICATED && reg->tp_rank != 0))
        return 0;
    /* a shared k, v copy: only the query rows are this rank's own */
    int64_t end = p->split == PL_TP_QKV_SHARED_KV && p->kv_replica != 0
                      ? p->offset + p->q_rows * p->local_shape[1]
                      : p->offset + p->numel;
    *a = p->offset > lo ? p->offset : lo;
    *b = end < hi ? end : hi;
    return *a < *b;
}

double pl_grad_sumsq_range(const pl_registry *reg, int64_t lo, int64_t hi, const float *grads)
{
    double sum = 0;
    int64_t a, b;
    for (int i = 0; i < reg->n; i++)
        if (own_span(reg, &reg->params[i], lo, hi, &a, &b))
            sum += pl_cpu_sumsq(grads + (a - lo), b - a);
    return sum;
}

int64_t pl_grad_zeros_range(const pl_registry *reg, int64_t lo, int64_t hi, const float *grads)
{
    int64_t zeros = 0, a, b;
    for (int i = 0; i < reg->n; i++)
        if (own_span(reg, &reg->params[i], lo, hi, &a, &b))
            for (int64_t k = a; k < b; k++)
                zeros += grads[k - lo] == 0.0f;
    return zeros;
}
