/* Reference twin: LayerNorm over the last dimension, biased variance (PyTorch). */
#include "kernels/kernels.h"

#include <math.h>

void pl_ref_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int64_t N, int64_t C, float eps)
{
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        float m = 0.0f;
        for (int64_t c = 0; c < C; c++)
            m += x[c];
        m /= (float)C;
        float var = 0.0f;
        for (int64_t c = 0; c < C; c++)
            var += (x[c] - m) * (x[c] - m);
        var /= (float)C;
        float s = 1.0f / sqrtf(var + eps);
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* With xhat = (x - mean) rstd and g = dout * weight:
 * dx = rstd (g - mean(g) - xhat mean(g xhat)). */
void pl_ref_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean,
                          const float *rstd, int64_t N, int64_t C)
{
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *dy = dout + n * C;
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            float xhat = (x[c] - mean[n]) * rstd[n];
            float g = dy[c] * weight[c];
            g_mean += g;
            gx_mean += g * xhat;
        }
        g_mean /= (float)C;
        gx_mean /= (float)C;
        for (int64_t c = 0; c < C; c++) {
            float xhat = (x[c] - mean[n]) * rstd[n];
            float g = dy[c] * weight[c];
            dinp[n * C + c] += (g - g_mean - xhat * gx_mean) * rstd[n];
            dweight[c] += dy[c] * xhat;
            dbias[c] += dy[c];
        }
    }
}
