/* LayerNorm / RMSNorm dispatch to the kernels. */
#include "nn/norm.h"

void pl_nn_norm_fwd(pl_norm_kind kind, float *y, float *mean, float *rstd, const float *x,
                    const float *weight, const float *bias, int64_t N, int64_t C, float eps)
{
    if (kind == PL_NORM_RMSNORM)
        pl_cpu_rmsnorm_fwd(y, rstd, x, weight, bias, N, C, eps);
    else
        pl_cpu_layernorm_fwd(y, mean, rstd, x, weight, bias, N, C, eps);
}

void pl_nn_norm_bwd(pl_norm_kind kind, float *dx, float *dweight, float *dbias, const float *dy,
                    const float *x, const float *weight, const float *mean, const float *rstd,
                    int64_t N, int64_t C)
{
    if (kind == PL_NORM_RMSNORM)
        pl_cpu_rmsnorm_bwd(dx, dweight, dbias, dy, x, weight, rstd, N, C);
    else
        pl_cpu_layernorm_bwd(dx, dweight, dbias, dy, x, weight, mean, rstd, N, C);
}
