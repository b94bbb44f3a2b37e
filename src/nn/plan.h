/* The activation plan's bump allocator: a model lays out every activation and
 * scratch buffer of a micro-batch by taking slices in a fixed order, first with
 * a NULL base (counting), then over the one block allocated for that count
 * (pointing). Slices are 64-byte aligned. Not an allocator: nothing is freed
 * alone, and buffers that share memory by lifetime are laid out by the caller. */
#ifndef PL_NN_PLAN_H
#define PL_NN_PLAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct pl_plan {
    float *base; /* NULL: only count */
    size_t used; /* floats taken so far */
} pl_plan;

/* n floats (NULL while counting). */
float *pl_plan_take(pl_plan *p, int64_t n);
/* n bf16 values. */
uint16_t *pl_plan_take16(pl_plan *p, int64_t n);

#endif
