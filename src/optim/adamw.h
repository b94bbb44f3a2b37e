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

#endif
