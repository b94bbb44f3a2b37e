/* Reference twins: bias, add, GELU (exact, and the tanh approximation). */
#include "kernels/kernels.h"

#include <math.h>

void pl_ref_bias_fwd(float *out, const float *bias, int64_t N, int64_t OC)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < OC; o++)
            out[n * OC + o] += bias[o];
}

void pl_ref_bias_bwd(float *dbias, const float *dout, int64_t N, int64_t OC)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < OC; o++)
            dbias[o] += dout[n * OC + o];
}

void pl_ref_add(float *out, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void pl_ref_gelu_erf_fwd(float *out, const float *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = 0.5f * inp[i] * (1.0f + erff(inp[i] * 0.70710678118654752f));
}

void pl_ref_gelu_erf_bwd(float *dinp, const float *inp, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
        dinp[i] += (cdf + x * pdf) * dout[i];
    }
}

void pl_ref_gelu_erf_fwd_bf16(float *out, const uint16_t *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = pl_ref_bf16_to_f32(inp[i]);
        pl_ref_gelu_erf_fwd(&out[i], &x, 1);
    }
}

void pl_ref_gelu_erf_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = pl_ref_bf16_to_f32(inp[i]);
        pl_ref_gelu_erf_bwd(&dinp[i], &x, &dout[i], 1);
    }
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void pl_ref_gelu_fwd(float *out, const float *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_A * x * x * x)));
    }
}

void pl_ref_gelu_bwd(float *dinp, const float *inp, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        dinp[i] += grad * dout[i];
    }
}

void pl_ref_gelu_fwd_bf16(float *out, const uint16_t *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = pl_ref_bf16_to_f32(inp[i]);
        pl_ref_gelu_fwd(&out[i], &x, 1);
    }
}

void pl_ref_gelu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = pl_ref_bf16_to_f32(inp[i]);
        pl_ref_gelu_bwd(&dinp[i], &x, &dout[i], 1);
    }
}
