/* Reference twin: RMSNorm over the last dimension (Llama, Megatron's RMSNorm):
 * no mean subtraction, rstd = 1 / sqrt(mean(x^2) + eps). */
#include "kernels/kernels.h"

#include <math.h>

void pl_ref_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight,
                        const float *bias, int64_t N, int64_t C, float eps)
{
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        float ms = 0.0f;
        for (int64_t c = 0; c < C; c++)
            ms += x[c] * x[c];
        ms /= (float)C;
        float s = 1.0f / sqrtf(ms + eps);
        for (int64_t c = 0; c < C; c++) {
            float y = x[c] * s * weight[c];
            out[n * C + c] = bias ? y + bias[c] : y;
        }
        rstd[n] = s;
    }
}

/* With xhat = x rstd and g = dout * weight (the eps term is a constant):
 * dx = rstd (g - xhat mean(g xhat)). */
void pl_ref_rmsnorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *rstd, int64_t N,
                        int64_t C)
{
    for (int64_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *dy = dout + n * C;
        float gx_mean = 0.0f;
        for (int64_t c = 0; c < C; c++)
            gx_mean += dy[c] * weight[c] * (x[c] * rstd[n]);
        gx_mean /= (float)C;
        for (int64_t c = 0; c < C; c++) {
            float xhat = x[c] * rstd[n];
            dinp[n * C + c] += (dy[c] * weight[c] - xhat * gx_mean) * rstd[n];
            dweight[c] += dy[c] * xhat;
            if (dbias)
                dbias[c] += dy[c];
        }
    }
}
