/* Megatron's OptimizerParamScheduler.get_lr, step by step. */
#include "optim/schedule.h"

#include <math.h>
#include <string.h>

static const char *const style_names[] = {"constant", "linear", "cosine", "inverse-square-root"};

int pl_lr_style_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, style_names[i]) == 0)
            return i;
    return -1;
}

const char *pl_lr_style_name(pl_lr_style style) { return style_names[style]; }

double pl_lr_schedule_lr(const pl_lr_schedule *s)
{
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
