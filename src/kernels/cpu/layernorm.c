/* Fast twin: LayerNorm (OpenMP over rows; parameter gradients over columns).
 *
 * Forward and the input gradient parallelize over rows with vectorized row
 * reductions. dweight and dbias are sums over rows: they are computed in a
 * second phase split by columns, each column summed over n in order by one
 * thread (xhat recomputed from mean and rstd), so no workspace is needed and
 * the result does not depend on the thread count. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#include <math.h>

#define COL_BLOCK 64
#define PAR_MIN 32768

void pl_cpu_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int64_t N, int64_t C, float eps)
{
    PL_DISPATCH(layernorm_fwd, out, mean, rstd, inp, weight, bias, N, C, eps);
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *restrict x = inp + n * C;
        float *restrict o = out + n * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < C; c++)
            sum += x[c];
        float m = sum / (float)C;
        float var = 0.0f;
#pragma omp simd reduction(+ : var)
        for (int64_t c = 0; c < C; c++)
            var += (x[c] - m) * (x[c] - m);
        var /= (float)C;
        float s = 1.0f / sqrtf(var + eps);
#pragma omp simd
        for (int64_t c = 0; c < C; c++)
            o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void pl_cpu_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean,
                          const float *rstd, int64_t N, int64_t C)
{
    PL_DISPATCH(layernorm_bwd, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    int64_t nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel if (N * C > PAR_MIN)
    {
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; n++) {
            const float *restrict x = inp + n * C, *restrict dy = dout + n * C;
            float *restrict dx = dinp + n * C;
            float m = mean[n], s = rstd[n];
            float g_sum = 0.0f, gx_sum = 0.0f;
#pragma omp simd reduction(+ : g_sum, gx_sum)
            for (int64_t c = 0; c < C; c++) {
                float g = dy[c] * weight[c];
                g_sum += g;
                gx_sum += g * ((x[c] - m) * s);
            }
            float g_mean = g_sum / (float)C, gx_mean = gx_sum / (float)C;
#pragma omp simd
            for (int64_t c = 0; c < C; c++) {
                float xhat = (x[c] - m) * s;
                dx[c] += (dy[c] * weight[c] - g_mean - xhat * gx_mean) * s;
            }
        }
#pragma omp for schedule(static)
        for (int64_t blk = 0; blk < nblk; blk++) {
            int64_t c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
            float *restrict dw = dweight, *restrict db = dbias;
            for (int64_t n = 0; n < N; n++) {
                const float *restrict x = inp + n * C, *restrict dy = dout + n * C;
                float m = mean[n], s = rstd[n];
#pragma omp simd
                for (int64_t c = c0; c < c1; c++) {
                    dw[c] += dy[c] * ((x[c] - m) * s);
                    db[c] += dy[c];
                }
            }
        }
    }
}
