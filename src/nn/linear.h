/* Linear layer y = x W^T + b over one rank's slice of W.
 *   x (N, IC), W (OC, IC) row-major as Megatron stores it, b (OC) or NULL, y (N, OC).
 * Backward adds into dx (N, IC), dW (OC, IC), db (OC); dx may be NULL when the
 * input needs no gradient, dW and db when only the input's is wanted (the
 * input-gradient half of a split backward). The tensor-parallel wrappers (column- and
 * row-parallel) in src/parallel/tp/ add the communication around these. */
#ifndef PL_NN_LINEAR_H
#define PL_NN_LINEAR_H

#include "kernels/kernels.h"

pl_status pl_nn_linear_fwd(pl_gemm *g, float *y, const float *x, const float *w, const float *b,
                           int64_t N, int64_t IC, int64_t OC);
pl_status pl_nn_linear_bwd(pl_gemm *g, float *dx, float *dw, float *db, const float *dy,
                           const float *x, const float *w, int64_t N, int64_t IC, int64_t OC);
/* Creates the GEMM primitives of both directions ahead of the step loop. */
pl_status pl_nn_linear_prepare(pl_gemm *g, int64_t N, int64_t IC, int64_t OC);

#endif
