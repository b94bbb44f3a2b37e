/* Megatron's OptimizerParamScheduler.get_lr, step by step. */
#include "optim/schedule.h"

#include <math.h>
#include <string.h>

static const char *const style_names[] = {
    "constant",          "linear",           "cosine",
    "inverse-square-root", "deepspeed-WarmupLR-log", "deepspeed-WarmupLR-linear",
    "deepspeed-WarmupDecayLR-log", "deepspeed-WarmupDecayLR-linear",
    "deepspeed-WarmupCosineLR-log", "deepspeed-WarmupCosineLR-linear", "deepspeed-OneCycle",
    "deepspeed-LRRangeTest"};

int pl_lr_style_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof style_names / sizeof *style_names); i++)
        if (strcmp(name, style_names[i]) == 0)
            return i;
    return -1;
}

const char *pl_lr_style_name(pl_lr_style style) { return style_names[style]; }

/* OneCycle._get_scale_factor at last_batch_iteration k. */
static double onecycle_scale(const pl_lr_schedule *s, int64_t k)
{
    const double total = (double)(s->decay_steps / s->step_samples);
    const double ratio = (double)(s->warmup_steps / s->step_samples) / total;
    const double bi = (double)(k + 1);
    const double cycle = floor(1.0 + bi / total);
    const double x = 1.0 + bi / total - cycle;
    return x <= ratio ? x / ratio : (x - 1.0) / (ratio - 1.0);
}

/* DeepSpeed's OneCycle (lr_schedules.py): before the first step the lr is
 * cycle_min_lr; within the cycle min + (max - min) x scale; after it, decayed. */
static double onecycle_lr(const pl_lr_schedule *s)
{
    const int64_t k = s->num_steps / s->step_samples - 1;
    const int64_t total = s->decay_steps / s->step_samples;
    if (k < 0)
        return s->min_lr;
    if (k < total)
        return s->min_lr + (s->max_lr - s->min_lr) * onecycle_scale(s, k);
    if (s->decay_step_size == 0 || s->decay_lr_rate == 0)
        return s->min_lr;
    const double d = (double)(k - total + 1) / (double)s->decay_step_size;
    return s->min_lr / (1.0 + s->decay_lr_rate * d);
}

int pl_lr_schedule_betas(const pl_lr_schedule *s, double *beta1, double *beta2)
{
    if (s->style != PL_LR_DS_ONECYCLE || !s->cycle_momentum)
        return 0;
    const int64_t k = s->num_steps / s->step_samples - 1;
    const int64_t total = s->decay_steps / s->step_samples;
    *beta2 = 0.99;
    if (k < 0) /* _initialize_momentum: the group starts at (cycle_min_mom, 0.99) */
        *beta1 = s->min_mom;
    else if (k < total)
        *beta1 = s->max_mom - (s->max_mom - s->min_mom) * onecycle_scale(s, k);
    else if (s->decay_step_size == 0 || s->decay_mom_rate == 0)
        *beta1 = s->max_mom;
    else
        *beta1 = s->max_mom * (1.0 + s->decay_mom_rate * (double)(k - total + 1) /
                                         (double)s->decay_step_size);
    return 1;
}

/* DeepSpeed's LRRangeTest (lr_schedules.py): min_lr x (1 + step_rate x interval), the
 * interval (last_batch_iteration + 1) / step_size, floored for a staircase; k = -1
 * (before the first step) gives min_lr, as its constructor sets. */
static double range_test_lr(const pl_lr_schedule *s)
{
    const int64_t k = s->num_steps / s->step_samples - 1;
    double interval = (double)(k + 1) / (double)(s->warmup_steps / s->step_samples);
    if (s->range_staircase)
        interval = floor(interval);
    return s->min_lr * (1.0 + s->range_step_rate * interval);
}

/* DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (lr_schedules.py). */
static double deepspeed_lr(const pl_lr_schedule *s)
{
    if (s->style == PL_LR_DS_ONECYCLE)
        return onecycle_lr(s);
    if (s->style == PL_LR_DS_LR_RANGE_TEST)
        return range_test_lr(s);
    const pl_lr_style st = s->style;
    const int cosine = st == PL_LR_DS_WARMUP_COSINE_LOG || st == PL_LR_DS_WARMUP_COSINE_LINEAR;
    const int log_warmup = st == PL_LR_DS_WARMUP_LOG || st == PL_LR_DS_WARMUP_DECAY_LOG ||
                           st == PL_LR_DS_WARMUP_COSINE_LOG;
    const int64_t k = s->num_steps / s->step_samples - 1;
    const double W = (double)(s->warmup_steps / s->step_samples);
    const double T = (double)(s->decay_steps / s->step_samples);
    if (k < 0) /* before the first step: get_lr() returns min_lrs ([0.0] for cosine) */
        return cosine ? 0.0 : s->init_lr;
    if ((double)k < W) {
        double gamma = log_warmup ? log((double)(k + 1)) / log(W) : (double)k / W;
        return s->init_lr + (s->max_lr - s->init_lr) * gamma;
    }
    if (st == PL_LR_DS_WARMUP_LOG || st == PL_LR_DS_WARMUP_LINEAR)
        return s->max_lr;
    if (!cosine) {
        double span = T - W > 1.0 ? T - W : 1.0;
        double gamma = (T - (double)k) / span;
        return s->init_lr + (s->max_lr - s->init_lr) * (gamma > 0 ? gamma : 0.0);
    }
    double c = (1.0 + cos(3.14159265358979323846 * ((double)k - W + 1.0) / (T - W))) / 2.0;
    double lr = s->min_lr + (s->max_lr - s->min_lr) * c;
    return lr > 0 ? lr : 0.0;
}

double pl_lr_schedule_lr(const pl_lr_schedule *s)
{
    if (s->style >= PL_LR_DS_WARMUP_LOG)
        return deepspeed_lr(s);
    if (s->warmup_steps > 0 && s->num_steps <= s->warmup_steps)
        return s->init_lr +
               (s->max_lr - s->init_lr) * (double)s->num_steps / (double)s->warmup_steps;
    if (s->style == PL_LR_CONSTANT)
        return s->max_lr;
    if (s->num_steps > s->decay_steps)
        return s->min_lr;
    if (s->style == PL_LR_INVERSE_SQRT) {
        double w = (double)(s->warmup_steps > 1 ? s->warmup_steps : 1);
        double n = (double)(s->num_steps > 1 ? s->num_steps : 1);
        double lr = s->max_lr * sqrt(w) / sqrt(n);
        return lr > s->min_lr ? lr : s->min_lr;
    }
    double ratio = (double)(s->num_steps - s->warmup_steps) /
                   (double)(s->decay_steps - s->warmup_steps);
    double coeff = s->style == PL_LR_LINEAR ? 1.0 - ratio : 0.5 * (cos(3.14159265358979323846 * ratio) + 1.0);
    return s->min_lr + coeff * (s->max_lr - s->min_lr);
}

void pl_lr_schedule_step(pl_lr_schedule *s, int64_t increment) { s->num_steps += increment; }
