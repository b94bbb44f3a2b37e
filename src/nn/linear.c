/* Linear layer forward and backward as three GEMMs and a bias kernel. */
#include "nn/linear.h"

pl_status pl_nn_linear_fwd(pl_gemm *g, float *y, const float *x, const float *w, const float *b,
                           int64_t N, int64_t IC, int64_t OC)
{
    /* y (N,OC) = x (N,IC) . W^T, W (OC,IC) */
    pl_status st = pl_gemm_run(g, 0, 1, N, OC, IC, x, IC, w, IC, 0.0f, y, OC);
    if (st == PL_OK && b)
        pl_cpu_bias_fwd(y, b, N, OC);
    return st;
}

pl_status pl_nn_linear_bwd(pl_gemm *g, float *dx, float *dw, float *db, const float *dy,
                           const float *x, const float *w, int64_t N, int64_t IC, int64_t OC)
{
    pl_status st = PL_OK;
    if (dx) /* dx (N,IC) += dy (N,OC) . W (OC,IC) */
        st = pl_gemm_run(g, 0, 0, N, IC, OC, dy, OC, w, IC, 1.0f, dx, IC);
    if (st == PL_OK && dw) /* dW (OC,IC) += dy^T (OC,N) . x (N,IC) */
        st = pl_gemm_run(g, 1, 0, OC, IC, N, dy, OC, x, IC, 1.0f, dw, IC);
    if (st == PL_OK && db)
        pl_cpu_bias_bwd(db, dy, N, OC);
    return st;
}

pl_status pl_nn_linear_prepare(pl_gemm *g, int64_t N, int64_t IC, int64_t OC)
{
    pl_status st = pl_gemm_prepare(g, 0, 1, N, OC, IC, IC, IC, OC, 0.0f);
    if (st == PL_OK)
        st = pl_gemm_prepare(g, 0, 0, N, IC, OC, OC, IC, IC, 1.0f);
    if (st == PL_OK)
        st = pl_gemm_prepare(g, 1, 0, OC, IC, N, OC, IC, IC, 1.0f);
    return st;
}
