/* Normalisation layers: LayerNorm or RMSNorm, with or without a bias.
 *   x, y (N, C); weight, bias (C), bias NULL when the layer has none;
 *   mean (N) saved by LayerNorm only (NULL for RMSNorm), rstd (N) by both.
 * Backward adds into dx (N, C), dweight, dbias (C). Under sequence
 * parallelism N is this rank's rows; the caller sums the weight gradients over
 * the tensor-parallel group. */
#ifndef PL_NN_NORM_H
#define PL_NN_NORM_H

#include "kernels/kernels.h"

typedef enum pl_norm_kind { PL_NORM_LAYERNORM = 0, PL_NORM_RMSNORM = 1 } pl_norm_kind;

void pl_nn_norm_fwd(pl_norm_kind kind, float *y, float *mean, float *rstd, const float *x,
                    const float *weight, const float *bias, int64_t N, int64_t C, float eps);
void pl_nn_norm_bwd(pl_norm_kind kind, float *dx, float *dweight, float *dbias, const float *dy,
                    const float *x, const float *weight, const float *mean, const float *rstd,
                    int64_t N, int64_t C);

#endif
