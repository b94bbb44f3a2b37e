/* LAMB's two phases (optim/lamb.h), in DeepSpeed's fp32 arithmetic for the
 * moments and the update. The norms accumulate in double in element order, on
 * one thread, so that a tensor's sums split over ranks add up to (nearly always
 * exactly) one process's; the update, elementwise, runs on every thread. */
#include "optim/lamb.h"

#include <math.h>
#include <string.h>

/* The part of parameter p inside [lo, hi): [*a, *b), 0 when none. */
static int held_span(const pl_param *p, int64_t lo, int64_t hi, int64_t *a, int64_t *b)
{
    if (p->offset < 0)
        return 0;
    *a = p->offset > lo ? p->offset : lo;
    *b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
    return *a < *b;
}

/* The end of the part of p that this TP rank counts in a norm: all of it, none
 * (replicated, not TP rank 0), or (a shared k, v copy) only the query rows. A
 * tied copy counts: its sums are those of the original, on another stage. */
static int64_t counted_end(const pl_registry *reg, const pl_param *p)
{
    if (p->split == PL_TP_REPLICATED && reg->tp_rank != 0)
        return p->offset;
    if (p->split == PL_TP_QKV_SHARED_KV && p->kv_replica != 0)
        return p->offset + p->q_rows * p->local_shape[1];
    return p->offset + p->numel;
}

static float denom_of(float v, float eps, int inside)
{
    return inside ? sqrtf(v + eps) : sqrtf(v) + eps;
}

double pl_lamb_moments_range(const pl_registry *reg, int64_t lo, int64_t hi, const float *params,
                             const float *grads, float *exp_avg, float *exp_avg_sq,
                             const pl_lamb_hparams *hp, double grad_sumsq, double *sums)
{
    double norm = sqrt(grad_sumsq);
    float scale = 1.0f;
    if (hp->clip_grad > 0 && hp->clip_grad / (norm + 1e-6) < 1.0)
        scale = (float)(hp->clip_grad / (norm + 1e-6));
    const float b1 = (float)hp->beta1, b2 = (float)hp->beta2, eps = (float)hp->eps;
    memset(sums, 0, 2 * (size_t)reg->n * sizeof *sums);
    for (int i = 0; i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        int64_t a, b;
        if (!held_span(p, lo, hi, &a, &b))
            continue;
        const float wd = p->weight_decay ? (float)hp->weight_decay : 0.0f;
        const int64_t cend = counted_end(reg, p);
        double w2 = 0, u2 = 0;
        for (int64_t k = a - lo; k < b - lo; k++) {
            float g = grads[k] * scale, pj = params[k];
            exp_avg[k] = b1 * exp_avg[k] + (1 - b1) * g;
            exp_avg_sq[k] = b2 * exp_avg_sq[k] + (1 - b2) * g * g;
            float u = exp_avg[k] / denom_of(exp_avg_sq[k], eps, hp->eps_inside_sqrt) + wd * pj;
            if (k + lo < cend) {
                w2 += (double)pj * pj;
                u2 += (double)u * u;
            }
        }
        sums[2 * i] = w2;
        sums[2 * i + 1] = u2;
    }
    return norm;
}

double pl_lamb_coeff(const pl_lamb_hparams *hp, const double *sums, int i)
{
    /* the kernel's fp32 norms and ratio, clamped by the fp32 bounds */
    const float w = sqrtf((float)sums[2 * i]), u = sqrtf((float)sums[2 * i + 1]);
    if (w == 0 || u == 0)
        return 1.0;
    float c = w / u;
    if (c > (float)hp->max_coeff)
        c = (float)hp->max_coeff;
    if (c < (float)hp->min_coeff)
        c = (float)hp->min_coeff;
    return c;
}

void pl_lamb_update_range(const pl_registry *reg, int64_t lo, int64_t hi, float *params,
                          const float *exp_avg, const float *exp_avg_sq, const pl_lamb_hparams *hp,
                          double lr, int64_t t, const double *sums)
{
    /* as the kernel's host code: fp32 hyperparameters, pow in double, the step in fp32 */
    float step = (float)lr;
    if (hp->bias_correction) {
        const float bc1 = (float)(1.0 - pow((float)hp->beta1, (double)t));
        const float bc2 = (float)(1.0 - pow((float)hp->beta2, (double)t));
        step = (float)lr * sqrtf(bc2) / bc1;
    }
    const float eps = (float)hp->eps;
    for (int i = 0; i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        int64_t a, b;
        if (!held_span(p, lo, hi, &a, &b))
            continue;
        const float wd = p->weight_decay ? (float)hp->weight_decay : 0.0f;
        const float sc = step * (float)pl_lamb_coeff(hp, sums, i);
        /* elementwise: the same bits on any thread count */
#pragma omp parallel for schedule(static) if (b - a > 65536)
        for (int64_t k = a - lo; k < b - lo; k++) {
            float u = exp_avg[k] / denom_of(exp_avg_sq[k], eps, hp->eps_inside_sqrt) +
                      wd * params[k];
            params[k] -= sc * u;
        }
    }
}
