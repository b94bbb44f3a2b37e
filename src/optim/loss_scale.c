/* fp16 loss scaling: Megatron-LM's ConstantGradScaler and DynamicGradScaler. */
#include "optim/loss_scale.h"

#include <string.h>

void pl_loss_scaler_init_dynamic(pl_loss_scaler *s, double initial_scale, double min_scale,
                                 int64_t window, int64_t hysteresis)
{
    memset(s, 0, sizeof *s);
    s->dynamic = 1;
    s->scale = initial_scale;
    s->min_scale = min_scale;
    s->window = window;
    s->hysteresis = hysteresis;
    s->hysteresis_tracker = hysteresis;
}

void pl_loss_scaler_init_static(pl_loss_scaler *s, double scale)
{
    memset(s, 0, sizeof *s);
    s->scale = scale;
    s->min_scale = scale;
}

void pl_loss_scaler_update(pl_loss_scaler *s, int found_inf)
{
    if (!s->dynamic)
        return;
    if (found_inf) {
        s->growth_tracker = 0;
        s->hysteresis_tracker--;
        if (s->hysteresis_tracker <= 0) {
            double next = s->scale * 0.5;
            s->scale = next > s->min_scale ? next : s->min_scale;
        }
    } else {
        s->growth_tracker++;
        if (s->growth_tracker == s->window) {
            s->growth_tracker = 0;
            s->hysteresis_tracker = s->hysteresis;
            s->scale *= 2.0;
        }
    }
}
