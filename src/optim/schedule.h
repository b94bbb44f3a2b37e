/* Learning-rate schedule with Megatron's semantics (megatron/core/
 * optimizer_param_scheduler.py, OptimizerParamScheduler.get_lr).
 *
 * Steps are counted in SAMPLES: after each successful iteration the trainer
 * calls pl_lr_schedule_step(s, global_batch_size). The learning rate used by an
 * iteration is the one computed before its step, so with warmup the first
 * iteration runs at --lr-warmup-init (0 by default), exactly as Megatron. */
#ifndef PL_OPTIM_SCHEDULE_H
#define PL_OPTIM_SCHEDULE_H

#include <stdint.h>

typedef enum {
    PL_LR_CONSTANT,
    PL_LR_LINEAR,
    PL_LR_COSINE,
    PL_LR_INVERSE_SQRT,
    /* DeepSpeed's schedulers (deepspeed/runtime/lr_schedules.py), from a DeepSpeed
     * config: WarmupLR, WarmupDecayLR, WarmupCosineLR, each with log or linear warmup */
    PL_LR_DS_WARMUP_LOG,
    PL_LR_DS_WARMUP_LINEAR,
    PL_LR_DS_WARMUP_DECAY_LOG,
    PL_LR_DS_WARMUP_DECAY_LINEAR,
    PL_LR_DS_WARMUP_COSINE_LOG,
    PL_LR_DS_WARMUP_COSINE_LINEAR,
    PL_LR_DS_ONECYCLE,
    PL_LR_DS_LR_RANGE_TEST,
} pl_lr_style;

/* Megatron's styles read the fields as named. DeepSpeed's count optimizer steps:
 * k = num_steps / step_samples - 1 is DeepSpeed's last_batch_iteration (-1 before the
 * first step, which therefore runs at the start value), W = warmup_steps /
 * step_samples (DeepSpeed's max(2, warmup_num_steps)), T = decay_steps / step_samples
 * (total_num_steps). Warmup from init_lr to max_lr by gamma = log(k+1) / log(W) or
 * k / W while k < W; then WarmupLR stays at max_lr, WarmupDecayLR goes linearly back
 * to init_lr (gamma = max(0, (T - k) / max(1, T - W))), WarmupCosineLR to min_lr along
 * (1 + cos(pi (k - W + 1) / (T - W))) / 2. WarmupCosineLR's ratios are folded into
 * the rates: init_lr = lr x warmup_min_ratio, min_lr = lr x cos_min_ratio, and it
 * starts (k = -1) at 0.
 * OneCycle: min_lr = cycle_min_lr, max_lr = cycle_max_lr, warmup_steps = the cycle's
 * first half, decay_steps = the whole cycle (both halves); the lr rises from min to
 * max over the first half and falls back over the second (scale factor of
 * OneCycle._get_scale_factor at batch k + 1), then, with decay_step_size and
 * decay_lr_rate, min_lr / (1 + rate d / decay_step_size) after d steps past the
 * cycle. With cycle_momentum, Adam's betas follow (pl_lr_schedule_betas).
 * LRRangeTest: min_lr = lr_range_test_min_lr, warmup_steps = lr_range_test_step_size;
 * min_lr (1 + range_step_rate x (k + 1) / step_size), the quotient floored with
 * range_staircase; min_lr before the first step. */
typedef struct pl_lr_schedule {
    double max_lr, min_lr, init_lr;
    int64_t warmup_steps; /* samples */
    int64_t decay_steps;  /* samples */
    pl_lr_style style;
    int64_t num_steps;    /* samples consumed so far (checkpointed) */
    int64_t step_samples; /* DeepSpeed's styles: samples per optimizer step (not checkpointed) */
    /* OneCycle only (not checkpointed): decay after the cycle, momentum cycling */
    double decay_lr_rate, decay_mom_rate, min_mom, max_mom;
    int64_t decay_step_size; /* optimizer steps; 0: no decay */
    int cycle_momentum;
    /* LRRangeTest only (not checkpointed) */
    double range_step_rate;
    int range_staircase;
} pl_lr_schedule;

/* "constant|linear|cosine|inverse-square-root" or a DeepSpeed style's name
 * ("deepspeed-WarmupLR-log", ...) -> style; -1 if unknown. */
int pl_lr_style_parse(const char *name);
const char *pl_lr_style_name(pl_lr_style style);

/* The learning rate at the current num_steps. */
double pl_lr_schedule_lr(const pl_lr_schedule *s);

/* OneCycle with cycle_momentum: Adam's (beta1, beta2) for the current step, as
 * DeepSpeed sets the param group's betas (beta1 cycles inversely to the lr between
 * min_mom and max_mom; beta2 is 0.99, DeepSpeed's fixed value). Returns 0 and leaves
 * the betas alone for every other schedule. */
int pl_lr_schedule_betas(const pl_lr_schedule *s, double *beta1, double *beta2);
void pl_lr_schedule_step(pl_lr_schedule *s, int64_t increment);

#endif
