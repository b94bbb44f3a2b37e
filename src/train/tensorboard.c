/* --tensorboard-dir: Megatron's TensorBoard scalars (megatron/training/training.py
 * training_log and evaluate_and_print_results), written through base/tfevents.h by the
 * last rank (world size - 1), as Megatron's _set_tensorboard_writer chooses it.
 *
 * Every --tensorboard-log-interval iterations (default 1): learning-rate, batch-size,
 * lm loss, loss-scale (unless --no-log-loss-scale-to-tensorboard; 1 without --fp16, as
 * Megatron's optimizers report), world-size (--log-world-size-to-tensorboard), grad-norm
 * and num-zeros (--log-num-zeros-in-grad; neither on a skipped iteration, where
 * Megatron's are None), params-norm (--log-params-norm) and the four memory tags
 * (--log-memory-to-tensorboard), each also as "TAG vs samples"
 * against the consumed samples where Megatron writes one. Every --log-interval:
 * iteration-time (--log-timers-to-tensorboard) and a flush. Every evaluation: lm loss
 * validation (and vs samples), and with --log-validation-ppl-to-tensorboard its ppl,
 * exp(min(20, loss)). What is not written: optimizer states, throughput, MoE and MTP
 * scalars. */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "optim/adamw.h"

#include <math.h>
#include <string.h>

static int tb_writer(const pl_trainer *t) { return t->tb.f != NULL; }

pl_status pl_train_tb_open(pl_trainer *t)
{
    const char *dir = t->a->legacy.tensorboard_dir;
    if (!dir || t->grid.rank != t->grid.layout.world - 1)
        return PL_OK;
    pl_status st = pl_tfevents_open(&t->tb, dir);
    if (!st) /* as Megatron's "> setting tensorboard ...", from the rank that writes */
        pl_log_info("tensorboard: rank %d of %d writes %s", t->grid.rank, t->grid.layout.world,
                    t->tb.path);
    return st;
}

/* "TAG" at the iteration and "TAG vs samples" at the consumed samples. */
static pl_status both(pl_trainer *t, const char *tag, double v)
{
    char vs[128];
    snprintf(vs, sizeof vs, "%s vs samples", tag);
    pl_status st = pl_tfevents_scalar(&t->tb, tag, t->iteration, v);
    if (!st)
        st = pl_tfevents_scalar(&t->tb, vs, t->consumed_train, v);
    return st;
}

/* The L2 norm of every parameter after the step (collective over the world): each
 * model-parallel slice once, replicated tensors once (as the gradient norm), the ZeRO
 * shards summed over DP. */
static pl_status params_norm(pl_trainer *t, double *out)
{
    pl_status st = PL_OK;
    double sumsq;
    if (t->zero_stage == 0) {
        PL_TRY(pl_train_grad_sumsq(t, t->params, 0, t->reg.numel, &sumsq));
    } else {
        const pl_zero *z = &t->zero;
        const float *p = t->zero_stage == 3 ? t->pshard : t->params + z->lo;
        PL_TRY(pl_train_grad_sumsq(t, p, z->lo, z->shard, &sumsq));
        PL_TRY(pl_comm_allreduce_f64(z->comm, &sumsq, 1, PL_COMM_SUM));
    }
    *out = sqrt(sumsq);
fail:
    return st;
}

pl_status pl_train_count_zeros(pl_trainer *t, const float *g, int64_t lo, int64_t n, int64_t *out)
{
    pl_status st = PL_OK;
    pl_comm *mp = pl_grid_comm(&t->grid, t->grid.layout.pp > 1 ? PL_GRID_MP : PL_GRID_TP);
    int64_t zeros = pl_grad_zeros_range(&t->reg, lo, lo + n, g);
    if (mp->size > 1)
        PL_TRY(pl_comm_allreduce_i64(mp, &zeros, 1, PL_COMM_SUM));
    if (t->zero_stage)
        PL_TRY(pl_comm_allreduce_i64(t->zero.comm, &zeros, 1, PL_COMM_SUM));
    *out = zeros;
fail:
    return st;
}

/* Kibibytes of a /proc/self/status field (VmRSS, VmHWM), -1 if absent. */
static int64_t proc_kib(const char *field)
{
    int64_t kib = -1;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kib = strtoll(line + n + 1, NULL, 10);
    fclose(f);
    return kib;
}

pl_status pl_train_tb_iteration(pl_trainer *t, const step_result *r)
{
    pl_status st = PL_OK;
    const pl_train_args *a = t->a;
    if (!a->legacy.tensorboard_dir || t->iteration % a->tensorboard_log_interval != 0)
        return PL_OK;
    double pnorm = 0;
    if (a->log_params_norm) /* every rank takes part */
        PL_TRY(params_norm(t, &pnorm));
    if (!tb_writer(t))
        return PL_OK;
    PL_TRY(both(t, "learning-rate", r->lr));
    PL_TRY(both(t, "batch-size", (double)t->gbs));
    PL_TRY(both(t, "lm loss", r->loss));
    /* Megatron reads the scale after the step (optimizer.get_loss_scale()): the one the
     * next iteration runs with */
    if (!a->no_log_loss_scale_tb)
        PL_TRY(both(t, "loss-scale", t->scaler.scale));
    if (a->log_world_size_tb)
        PL_TRY(both(t, "world-size", (double)t->grid.layout.world));
    if (!r->skipped)
        PL_TRY(both(t, "grad-norm", r->grad_norm));
    if (a->log_num_zeros_in_grad && !r->skipped)
        PL_TRY(both(t, "num-zeros", (double)r->num_zeros));
    if (a->log_params_norm)
        PL_TRY(both(t, "params-norm", pnorm));
    if (a->log_memory_tb) {
        /* CPU stand-ins for torch.cuda.memory_stats(), of the writing rank: reserved =
         * resident (VmRSS), max allocated = peak resident (VmHWM), allocated = plait's
         * planned buffers (model state, ZeRO working buffers, activations), count = blocks
         * allocated through plait's allocator and not freed */
        size_t planned = t->state_bytes[0] + t->state_bytes[1] + t->state_bytes[2] +
                         t->work_bytes + pl_train_act_bytes(t, 0);
        PL_TRY(pl_tfevents_scalar(&t->tb, "mem-reserved-bytes", t->iteration,
                                  1024.0 * (double)proc_kib("VmRSS")));
        PL_TRY(pl_tfevents_scalar(&t->tb, "mem-allocated-bytes", t->iteration, (double)planned));
        PL_TRY(pl_tfevents_scalar(&t->tb, "mem-max-allocated-bytes", t->iteration,
                                  1024.0 * (double)proc_kib("VmHWM")));
        PL_TRY(pl_tfevents_scalar(&t->tb, "mem-allocated-count", t->iteration,
                                  (double)pl_alloc_live()));
    }
fail:
    return st;
}

pl_status pl_train_tb_window(pl_trainer *t, double seconds_per_iter)
{
    if (!tb_writer(t))
        return PL_OK;
    if (t->a->legacy.log_timers_tb) {
        pl_status st = pl_tfevents_scalar(&t->tb, "iteration-time", t->iteration, seconds_per_iter);
        if (st)
            return st;
    }
    return pl_tfevents_flush(&t->tb);
}

pl_status pl_train_tb_eval(pl_trainer *t, double loss)
{
    pl_status st = PL_OK;
    if (!tb_writer(t))
        return PL_OK;
    double ppl = exp(loss < 20 ? loss : 20);
    PL_TRY(pl_tfevents_scalar(&t->tb, "lm loss validation", t->iteration, loss));
    PL_TRY(pl_tfevents_scalar(&t->tb, "lm loss validation vs samples", t->consumed_train, loss));
    if (t->a->legacy.log_validation_ppl_tb) {
        PL_TRY(pl_tfevents_scalar(&t->tb, "lm loss validation ppl", t->iteration, ppl));
        PL_TRY(pl_tfevents_scalar(&t->tb, "lm loss validation ppl vs samples", t->consumed_train,
                                  ppl));
    }
    PL_TRY(pl_tfevents_flush(&t->tb));
fail:
    return st;
}

pl_status pl_train_tb_close(pl_trainer *t) { return pl_tfevents_close(&t->tb); }
