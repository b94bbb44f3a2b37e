/* The optimizer step over the flat buffers: global gradient-norm clipping and
 * AdamW, with weight decay only on parameters the registry marks (not biases
 * or norm gains), as Megatron's param groups do. */
#ifndef PL_OPTIM_ADAMW_H
#define PL_OPTIM_ADAMW_H

#include "model/registry.h"

typedef struct pl_adamw_hparams {
    double beta1, beta2, eps, weight_decay, clip_grad; /* clip_grad 0: no clipping */
} pl_adamw_hparams;

/* One step t (1-based) at learning rate lr over this rank's parameters.
 * grad_sumsq is the squared global gradient norm (already summed over the
 * ranks that hold distinct gradients). Returns the norm before clipping. */
double pl_adamw_step(const pl_registry *reg, float *params, const float *grads, float *exp_avg,
                     float *exp_avg_sq, const pl_adamw_hparams *hp, double lr, int64_t t,
                     double grad_sumsq);

/* The same step over the flat range [lo, hi) only (a ZeRO shard): params, grads,
 * exp_avg and exp_avg_sq hold that range, element lo at index 0. Each parameter's
 * part inside the range is updated with that parameter's weight decay (a parameter
 * may straddle two shards). grad_sumsq is the global squared norm, as above. */
double pl_adamw_step_range(const pl_registry *reg, int64_t lo, int64_t hi, float *params,
                           const float *grads, float *exp_avg, float *exp_avg_sq,
                           const pl_adamw_hparams *hp, double lr, int64_t t, double grad_sumsq);

/* Sum of squares of the gradients of the flat range [lo, hi) (grads holds that
 * range, element lo at index 0) that this TP rank counts: everything except
 * the copies other ranks count too — tensors every TP rank holds whole
 * (PL_TP_REPLICATED) count on TP rank 0 only, shared key/value rows
 * (PL_TP_QKV_SHARED_KV) on the first rank of their group only, a tied copy
 * (the last pipeline stage's output layer) not at all. Summed over the
 * TP group, each value then counts once (Megatron's
 * param_is_not_tensor_parallel_duplicate). */
double pl_grad_sumsq_range(const pl_registry *reg, int64_t lo, int64_t hi, const float *grads);
/* The gradients equal to zero among the same values (Megatron's count_zeros_fp32, for
 * --log-num-zeros-in-grad); summed over the TP group, each counts once. */
int64_t pl_grad_zeros_range(const pl_registry *reg, int64_t lo, int64_t hi, const float *grads);

#endif
