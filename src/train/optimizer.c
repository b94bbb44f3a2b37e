/* The optimizer step of `plait train`: AdamW (optim/adamw.h) or, with a
 * DeepSpeed config's "type": "Lamb", LAMB (optim/lamb.h), over this rank's
 * parameters or its ZeRO shard. Lamb's per-tensor norms are summed over the TP
 * group and (ZeRO) the DP group between its two phases, so every layout takes
 * the step one process takes. */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "optim/lamb.h"

#include <string.h>

pl_status pl_train_optimizer_init(pl_trainer *t)
{
    if (!t->a->lamb.on)
        return PL_OK;
    t->lamb_sums = pl_malloc(2 * (size_t)(t->reg.n > 0 ? t->reg.n : 1) * sizeof *t->lamb_sums);
    if (!t->lamb_sums)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for Lamb's per-tensor norms");
    return PL_OK;
}

void pl_train_optimizer_free(pl_trainer *t)
{
    pl_free(t->lamb_sums);
    t->lamb_sums = NULL;
}

/* Lamb over [lo, hi): the moments, the per-tensor sums made whole over the ranks
 * holding parts of a tensor (TP slices; ZeRO shards over zc, or NULL), the update. */
static pl_status lamb_step(pl_trainer *t, const pl_adamw_hparams *hp, double lr, double sumsq,
                           int64_t lo, int64_t hi, float *p, const float *g, pl_comm *zc,
                           double *norm)
{
    const pl_train_args *a = t->a;
    pl_lamb_hparams lh = {hp->beta1, hp->beta2, hp->eps, hp->weight_decay, hp->clip_grad,
                          a->lamb.max_coeff, a->lamb.min_coeff, a->lamb.eps_inside_sqrt,
                          a->lamb.bias_correction};
    *norm = pl_lamb_moments_range(&t->reg, lo, hi, p, g, t->exp_avg, t->exp_avg_sq, &lh, sumsq,
                                  t->lamb_sums);
    pl_comm *tp = pl_grid_comm(&t->grid, PL_GRID_TP);
    const int64_t n = 2 * (int64_t)t->reg.n;
    pl_status st = PL_OK;
    if (tp->size > 1)
        PL_TRY(pl_comm_allreduce_f64(tp, t->lamb_sums, n, PL_COMM_SUM));
    if (zc && zc->size > 1)
        PL_TRY(pl_comm_allreduce_f64(zc, t->lamb_sums, n, PL_COMM_SUM));
    pl_lamb_update_range(&t->reg, lo, hi, p, t->exp_avg, t->exp_avg_sq, &lh, lr, t->opt_steps,
                         t->lamb_sums);
fail:
    return st;
}

/* The step over this rank's shard (ZeRO): average the reduced gradients over DP,
 * clip by the global norm (sums of squares of every shard, all-reduced), the
 * optimizer on the shard, then (stages 1-2) all-gather the updated parameters. */
static pl_status zero_step(pl_trainer *t, const pl_adamw_hparams *hp, double lr, double *norm)
{
    pl_status st = PL_OK;
    pl_zero *z = &t->zero;
    float *g = t->zero_stage == 1 ? t->grads : t->gshard; /* stage 1: in-place result at [0, S) */
    const float scale = (float)(1.0 / (double)t->dp);
    for (int64_t i = 0; i < z->shard; i++)
        g[i] *= scale;
    double sumsq;
    PL_TRY(pl_train_grad_sumsq(t, g, z->lo, z->shard, &sumsq));
    PL_TRY(pl_comm_allreduce_f64(z->comm, &sumsq, 1, PL_COMM_SUM));
    float *p = t->zero_stage == 3 ? t->pshard : t->params + z->lo;
    if (t->lamb_sums)
        PL_TRY(lamb_step(t, hp, lr, sumsq, z->lo, z->hi, p, g, z->comm, norm));
    else
        *norm = pl_adamw_step_range(&t->reg, z->lo, z->hi, p, g, t->exp_avg, t->exp_avg_sq, hp,
                                    lr, t->opt_steps, sumsq);
    if (t->zero_stage <= 2)
        PL_TRY(pl_zero_allgather_all(z, t->params));
fail:
    return st;
}

pl_status pl_train_optimizer_step(pl_trainer *t, const pl_adamw_hparams *hp, double lr,
                                  double sumsq, double *norm)
{
    if (t->zero_stage > 0)
        return zero_step(t, hp, lr, norm);
    if (t->lamb_sums)
        return lamb_step(t, hp, lr, sumsq, 0, t->reg.numel, t->params, t->grads, NULL, norm);
    *norm = pl_adamw_step(&t->reg, t->params, t->grads, t->exp_avg, t->exp_avg_sq, hp, lr,
                          t->opt_steps, sumsq);
    return PL_OK;
}
