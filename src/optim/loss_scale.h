/* fp16 loss scaling, Megatron-LM's optimizer/grad_scaler.py.
 *
 * The loss is multiplied by `scale` before backward and the gradients by
 * 1/scale after it. Dynamic scaling (DynamicGradScaler) updates the scale once
 * per iteration from whether any rank's gradients held an Inf or NaN:
 *   overflow:  growth_tracker = 0; hysteresis_tracker -= 1;
 *              if hysteresis_tracker <= 0: scale = max(scale * 0.5, min_scale)
 *   otherwise: growth_tracker += 1;
 *              if growth_tracker == window: growth_tracker = 0,
 *                  hysteresis_tracker = hysteresis, scale *= 2
 * (the hysteresis tracker is refilled only when the scale grows, as in
 * Megatron). A static scaler (--loss-scale) never changes. The step of an
 * overflowing iteration is skipped by the caller. */
#ifndef PL_OPTIM_LOSS_SCALE_H
#define PL_OPTIM_LOSS_SCALE_H

#include <stdint.h>

typedef struct pl_loss_scaler {
    int dynamic;
    double scale, min_scale;
    int64_t window, hysteresis;        /* growth interval, overflows tolerated */
    int64_t growth_tracker, hysteresis_tracker;
} pl_loss_scaler;

/* A dynamic scaler starting at initial_scale. */
void pl_loss_scaler_init_dynamic(pl_loss_scaler *s, double initial_scale, double min_scale,
                                 int64_t window, int64_t hysteresis);
/* A static scaler (scale 1 with fp32 or bf16). */
void pl_loss_scaler_init_static(pl_loss_scaler *s, double scale);
/* One iteration's outcome: found_inf says whether any gradient was not finite. */
void pl_loss_scaler_update(pl_loss_scaler *s, int found_inf);

#endif
