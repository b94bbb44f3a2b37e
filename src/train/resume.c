/* What a resumed run takes from its checkpoint (trainer_internal.h,
 * pl_train_apply_loaded): Megatron's load_checkpoint and
 * OptimizerParamScheduler._check_and_set. */
#include "train/trainer_internal.h"

#include "base/log.h"
#include "ckpt/checkpoint.h"

#include <stdio.h>
#include <string.h>

enum { N_SCHED = 6 };

/* The scheduler fields Megatron checks on load, in this run (run) and the
 * checkpoint (ck), with the flag that sets each. */
typedef struct sched_field {
    const char *flag;
    double run, ck;
} sched_field;

static void sched_fields(const pl_lr_schedule *run, const pl_lr_schedule *ck, sched_field f[N_SCHED])
{
    const sched_field all[N_SCHED] = {
        {"--lr", run->max_lr, ck->max_lr},
        {"--min-lr", run->min_lr, ck->min_lr},
        {"--lr-warmup-init", run->init_lr, ck->init_lr},
        {"the warmup length (samples)", (double)run->warmup_steps, (double)ck->warmup_steps},
        {"the decay length (samples: --lr-decay-iters, else --train-iters, x the global batch)",
         (double)run->decay_steps, (double)ck->decay_steps},
        {"--lr-decay-style", run->style, ck->style}};
    memcpy(f, all, sizeof all);
}

static void value_str(double v, int style, char *out, size_t n)
{
    if (style)
        snprintf(out, n, "%s", pl_lr_style_name((pl_lr_style)v));
    else
        snprintf(out, n, "%.9g", v);
}

/* "what the schedule does next", from its current step. */
static void describe_next(const pl_trainer *t, char *out, size_t n)
{
    const pl_lr_schedule *s = &t->sched;
    const double lr = pl_lr_schedule_lr(s);
    const long long gbs = (long long)(t->gbs > 0 ? t->gbs : 1);
    if (s->num_steps < s->warmup_steps)
        snprintf(out, n, "lr %.6g now, warming up to %.6g until sample %lld (iteration %lld)", lr,
                 s->max_lr, (long long)s->warmup_steps, (long long)s->warmup_steps / gbs);
    else if (s->style == PL_LR_CONSTANT)
        snprintf(out, n, "lr constant at %.6g", lr);
    else if (s->num_steps < s->decay_steps)
        snprintf(out, n, "lr %.6g now, decaying (%s) to --min-lr %.6g at sample %lld (iteration "
                 "%lld)", lr, pl_lr_style_name(s->style), s->min_lr, (long long)s->decay_steps,
                 (long long)s->decay_steps / gbs);
    else
        snprintf(out, n, "lr %.6g: the decay ended at sample %lld (iteration %lld)", lr,
                 (long long)s->decay_steps, (long long)s->decay_steps / gbs);
}

static pl_status check_schedule(pl_trainer *t, const pl_lr_schedule *ck)
{
    const pl_train_args *a = t->a;
    if (a->override_sched && a->use_ckpt_sched)
        return pl_errorf(PL_ERR_ARG, "--override-opt_param-scheduler and "
                         "--use-checkpoint-opt_param-scheduler are both set (Megatron refuses "
                         "this too): choose this run's schedule or the checkpoint's");
    sched_field f[N_SCHED];
    sched_fields(&t->sched, ck, f);
    char changed[1024] = "";
    size_t len = 0;
    for (int i = 0; i < N_SCHED; i++) {
        if (f[i].run == f[i].ck)
            continue;
        const int style = i == N_SCHED - 1;
        char vr[64], vc[64];
        value_str(f[i].run, style, vr, sizeof vr);
        value_str(f[i].ck, style, vc, sizeof vc);
        if (!a->override_sched && !a->use_ckpt_sched)
            return pl_errorf(PL_ERR_ARG, "--load %s: %s is %s in this run and %s in the "
                             "checkpoint: the schedule must match to resume (Megatron's rule); "
                             "--override-opt_param-scheduler keeps this run's, "
                             "--use-checkpoint-opt_param-scheduler the checkpoint's", a->load,
                             f[i].flag, vr, vc);
        if (len < sizeof changed)
            len += (size_t)snprintf(changed + len, sizeof changed - len, "%s%s %s -> %s",
                                    len ? "; " : "", f[i].flag, a->override_sched ? vc : vr,
                                    a->override_sched ? vr : vc);
    }
    if (a->use_ckpt_sched) {
        t->sched.max_lr = ck->max_lr;
        t->sched.min_lr = ck->min_lr;
        t->sched.init_lr = ck->init_lr;
        t->sched.warmup_steps = ck->warmup_steps;
        t->sched.decay_steps = ck->decay_steps;
        t->sched.style = ck->style;
    }
    if (len && pl_train_is_root(t)) {
        char next[256];
        describe_next(t, next, sizeof next);
        pl_log_info("LR schedule: %s (%s); from sample %lld: %s", changed,
                    a->override_sched ? "--override-opt_param-scheduler: this run's flags"
                                      : "--use-checkpoint-opt_param-scheduler: the checkpoint's",
                    (long long)t->sched.num_steps, next);
    }
    return PL_OK;
}

pl_status pl_train_apply_loaded(pl_trainer *t, const pl_ckpt_meta *meta)
{
    const pl_train_args *a = t->a;
    const int root = pl_train_is_root(t);
    if (a->finetune) {
        if (root)
            pl_log_info("--finetune: weights of iteration %lld loaded; starting at iteration 0 "
                        "with a new optimizer, LR schedule and data position",
                        (long long)meta->iteration);
        return PL_OK;
    }
    pl_status st = pl_train_mmb_loaded(t, meta);
    if (st)
        return st;
    t->iteration = meta->iteration;
    t->consumed_train = meta->consumed_train_samples;
    t->consumed_valid = meta->consumed_valid_samples;
    if (a->no_load_optim) {
        if (root)
            pl_log_info("--no-load-optim: iteration %lld and %lld consumed samples loaded; Adam's "
                        "moments and step, the loss scaler and the LR scheduler start afresh "
                        "(the schedule at step 0, as Megatron's)", (long long)meta->iteration,
                        (long long)meta->consumed_train_samples);
        return PL_OK;
    }
    t->sched.num_steps = meta->schedule.num_steps;
    t->opt_steps = meta->optimizer_steps;
    if (meta->has_loss_scaler && t->scaler.dynamic) {
        t->scaler.scale = meta->loss_scale; /* Megatron's grad_scaler state */
        t->scaler.growth_tracker = meta->growth_tracker;
        t->scaler.hysteresis_tracker = meta->hysteresis_tracker;
    }
    return check_schedule(t, &meta->schedule);
}
