/* Bump allocation over the activation block. */
#include "nn/plan.h"

float *pl_plan_take(pl_plan *p, int64_t n)
{
    float *s = p->base ? p->base + p->used : NULL;
    p->used += (size_t)(n + 15) / 16 * 16;
    return s;
}

uint16_t *pl_plan_take16(pl_plan *p, int64_t n) { return (uint16_t *)pl_plan_take(p, (n + 1) / 2); }
