/* LAMB as DeepSpeed defines it (deepspeed/ops/lamb/fused_lamb.py with
 * csrc/lamb/fused_lamb_cuda_kernel.cu, the optimizer of a DeepSpeed config's
 * "type": "Lamb"), per parameter tensor:
 *
 *   m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
 *   denom  = sqrt(v) + eps           (eps_inside_sqrt: sqrt(v + eps))
 *   update = m / denom + wd p        (m and v themselves not bias-corrected)
 *   step   = lr sqrt(1 - b2^t) / (1 - b1^t)   (bias_correction off: lr)
 *   coeff  = clamp(|p| / |update|, min_coeff, max_coeff), 1 when either norm is 0
 *   p     -= step coeff update
 *
 * g is the gradient after global-norm clipping (Megatron's clip_grad_norm_fp32,
 * as for AdamW: DeepSpeed refuses the optimizer's own max_grad_norm and clips by
 * gradient_clipping). Weight decay only on the parameters the registry marks, as
 * Megatron-DeepSpeed's param groups give it.
 *
 * The norms are of the whole logical tensor: a step is two phases so that the
 * caller can sum the partial norms of a tensor split over ranks (ZeRO shards over
 * DP, TP slices over TP) between them. The result is the same under every layout,
 * one process included. (DeepSpeed itself computes them per local tensor: per TP
 * slice, and under ZeRO -- which it allows for Lamb only with
 * zero_allow_untested_optimizer -- over the rank's whole flat partition.) */
#ifndef PL_OPTIM_LAMB_H
#define PL_OPTIM_LAMB_H

#include "model/registry.h"

typedef struct pl_lamb_hparams {
    double beta1, beta2, eps, weight_decay;
    double clip_grad;            /* 0: no clipping */
    double max_coeff, min_coeff; /* DeepSpeed's defaults 10.0 and 0.01 */
    int eps_inside_sqrt, bias_correction;
} pl_lamb_hparams;

/* Phase 1 over the flat range [lo, hi) (params, grads, exp_avg, exp_avg_sq hold
 * that range, element lo at index 0; the whole buffer is [0, reg->numel)):
 * clips the gradients by the global norm sqrt(grad_sumsq), updates the moments
 * and writes into sums[2 i], sums[2 i + 1] (2 reg->n doubles, all overwritten)
 * the squared norms of parameter i and of its update over the part this rank
 * counts: tensors replicated over TP on TP rank 0 only, shared key/value rows on
 * their first sharer only (as the gradient norm counts them). Summed over the TP
 * group and over the ranks sharing the flat range (ZeRO's DP group), each
 * tensor's sums are then whole. Returns the gradient norm before clipping. */
double pl_lamb_moments_range(const pl_registry *reg, int64_t lo, int64_t hi, const float *params,
                             const float *grads, float *exp_avg, float *exp_avg_sq,
                             const pl_lamb_hparams *hp, double grad_sumsq, double *sums);

/* Phase 2: p -= step * coeff * update over [lo, hi), from the summed sums, at
 * learning rate lr and step t (1-based). */
void pl_lamb_update_range(const pl_registry *reg, int64_t lo, int64_t hi, float *params,
                          const float *exp_avg, const float *exp_avg_sq, const pl_lamb_hparams *hp,
                          double lr, int64_t t, const double *sums);

/* The trust ratio (coefficient) of parameter i from the summed sums. */
double pl_lamb_coeff(const pl_lamb_hparams *hp, const double *sums, int i);

#endif
