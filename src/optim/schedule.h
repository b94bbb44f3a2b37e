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
} pl_lr_style;

typedef struct pl_lr_schedule {
    double max_lr, min_lr, init_lr;
    int64_t warmup_steps; /* samples */
    int64_t decay_steps;  /* samples */
    pl_lr_style style;
    int64_t num_steps;    /* samples consumed so far (checkpointed) */
} pl_lr_schedule;

/* "constant|linear|cosine|inverse-square-root" -> style; -1 if unknown. */
int pl_lr_style_parse(const char *name);
const char *pl_lr_style_name(pl_lr_style style);

/* The learning rate at the current num_steps. */
double pl_lr_schedule_lr(const pl_lr_schedule *s);
void pl_lr_schedule_step(pl_lr_schedule *s, int64_t increment);

#endif
