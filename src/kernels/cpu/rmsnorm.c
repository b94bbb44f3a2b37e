/* Fast twin: RMSNorm (OpenMP over rows; parameter gradients over columns).
 *
 * The structure of layernorm.c: forward and the input gradient parallelize
 * over rows with vectorized row reductions; dweight and dbias are sums over
 * rows, computed in a second phase split by 64-column blocks, each column
 * summed over n in order by one thread (xhat recomputed from rstd). So the
 * result does not depend on the thread count, and dweight and dbias are the
 * reference's sums, in the reference's order. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#include <math.h>

#define COL_BLOCK 64
#define PAR_MIN 32768

void pl_cpu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight,
                        const float *bias, int64_t N, int64_t C, float eps)
{
    PL_DISPATCH(rmsnorm_fwd, out, rstd, inp, weight, bias, N, C, eps);
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *restrict x = inp + n * C;
        float *restrict o = out + n * C;
        float ms = 0.0f;
#pragma omp simd reduction(+ : ms)
        for (int64_t c = 0; c < C; c++)
            ms += x[c] * x[c];
        ms /= (float)C;
        float s = 1.0f / sqrtf(ms + eps);
        if (bias) {
#pragma omp simd
            for (int64_t c = 0; c < C; c++)
                o[c] = x[c] * s * weight[c] + bias[c];
        } else {
#pragma omp simd
            for (int64_t c = 0; c < C; c++)
                o[c] = x[c] * s * weight[c];
        }
        rstd[n] = s;
    }
}

void pl_cpu_rmsnorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *rstd, int64_t N,
                        int64_t C)
{
    PL_DISPATCH(rmsnorm_bwd, dinp, dweight, dbias, dout, inp, weight, rstd, N, C);
    int64_t nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel if (N * C > PAR_MIN)
    {
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; n++) {
            const float *restrict x = inp + n * C, *restrict dy = dout + n * C;
            float *restrict dx = dinp + n * C;
            float s = rstd[n];
            float gx_sum = 0.0f;
#pragma omp simd reduction(+ : gx_sum)
            for (int64_t c = 0; c < C; c++)
                gx_sum += dy[c] * weight[c] * (x[c] * s);
            float gx_mean = gx_sum / (float)C;
#pragma omp simd
            for (int64_t c = 0; c < C; c++)
                dx[c] += (dy[c] * weight[c] - (x[c] * s) * gx_mean) * s;
        }
#pragma omp for schedule(static)
        for (int64_t blk = 0; blk < nblk; blk++) {
            int64_t c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
            float *restrict dw = dweight, *restrict db = dbias;
            for (int64_t n = 0; n < N; n++) {
                const float *restrict x = inp + n * C, *restrict dy = dout + n * C;
                float s = rstd[n];
#pragma omp simd
                for (int64_t c = c0; c < c1; c++)
                    dw[c] += dy[c] * (x[c] * s);
                if (db) {
#pragma omp simd
                    for (int64_t c = c0; c < c1; c++)
                        db[c] += dy[c];
                }
            }
        }
    }
}
