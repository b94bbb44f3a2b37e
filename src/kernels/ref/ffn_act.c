/* Reference twin: T5's feed-forward activations, ReLU and GEGLU (kernels.h). */
#include "kernels/kernels.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void pl_ref_relu_fwd(float *out, const float *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void pl_ref_relu_bwd(float *dinp, const float *inp, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

void pl_ref_geglu_fwd(float *out, const float *inp, int64_t N, int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const float g = inp[n * 2 * F + f], u = inp[n * 2 * F + F + f];
            out[n * F + f] = 0.5f * g * (1.0f + tanhf(GELU_K * (g + GELU_A * g * g * g))) * u;
        }
}

void pl_ref_geglu_bwd(float *dinp, const float *inp, const float *dout, int64_t N, int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const float g = inp[n * 2 * F + f], u = inp[n * 2 * F + F + f], dy = dout[n * F + f];
            const float th = tanhf(GELU_K * (g + GELU_A * g * g * g));
            const float gelu = 0.5f * g * (1.0f + th);
            const float dgelu = 0.5f * (1.0f + th) +
                                0.5f * g * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * g * g);
            dinp[n * 2 * F + f] += dgelu * u * dy;
            dinp[n * 2 * F + F + f] += gelu * dy;
        }
}

void pl_ref_relu_fwd_bf16(float *out, const uint16_t *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = pl_ref_bf16_to_f32(inp[i]);
        pl_ref_relu_fwd(&out[i], &x, 1);
    }
}

void pl_ref_relu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = pl_ref_bf16_to_f32(inp[i]);
        pl_ref_relu_bwd(&dinp[i], &x, &dout[i], 1);
    }
}

void pl_ref_geglu_fwd_bf16(float *out, const uint16_t *inp, int64_t N, int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const uint16_t *row = inp + n * 2 * F;
            const float gu[2] = {pl_ref_bf16_to_f32(row[f]), pl_ref_bf16_to_f32(row[F + f])};
            pl_ref_geglu_fwd(&out[n * F + f], gu, 1, 1);
        }
}

void pl_ref_geglu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t N,
                           int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const uint16_t *row = inp + n * 2 * F;
            const float gu[2] = {pl_ref_bf16_to_f32(row[f]), pl_ref_bf16_to_f32(row[F + f])};
            float d[2] = {dinp[n * 2 * F + f], dinp[n * 2 * F + F + f]};
            pl_ref_geglu_bwd(d, gu, &dout[n * F + f], 1, 1);
            dinp[n * 2 * F + f] = d[0];
            dinp[n * 2 * F + F + f] = d[1];
        }
}
