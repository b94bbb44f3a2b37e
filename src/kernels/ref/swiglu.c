/* Reference twin: SwiGLU (Megatron's --swiglu), out = silu(gate) * up on rows
 * [gate (F) | up (F)], with libm's expf. */
#include "kernels/kernels.h"

#include <math.h>

static float silu_of(float g) { return g / (1.0f + expf(-g)); }

/* d silu / dg = s + g s (1 - s), s = sigmoid(g). */
static float silu_grad_of(float g)
{
    float s = 1.0f / (1.0f + expf(-g));
    return s + g * s * (1.0f - s);
}

void pl_ref_swiglu_fwd(float *out, const float *inp, int64_t N, int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const float *row = inp + n * 2 * F;
            out[n * F + f] = silu_of(row[f]) * row[F + f];
        }
}

void pl_ref_swiglu_bwd(float *dinp, const float *inp, const float *dout, int64_t N, int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const float *row = inp + n * 2 * F;
            float g = row[f], u = row[F + f], dy = dout[n * F + f];
            dinp[n * 2 * F + f] += silu_grad_of(g) * u * dy;
            dinp[n * 2 * F + F + f] += silu_of(g) * dy;
        }
}

void pl_ref_swiglu_fwd_bf16(float *out, const uint16_t *inp, int64_t N, int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const uint16_t *row = inp + n * 2 * F;
            float gu[2] = {pl_ref_bf16_to_f32(row[f]), pl_ref_bf16_to_f32(row[F + f])};
            pl_ref_swiglu_fwd(&out[n * F + f], gu, 1, 1);
        }
}

void pl_ref_swiglu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t N,
                            int64_t F)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t f = 0; f < F; f++) {
            const uint16_t *row = inp + n * 2 * F;
            float gu[2] = {pl_ref_bf16_to_f32(row[f]), pl_ref_bf16_to_f32(row[F + f])};
            float d[2] = {dinp[n * 2 * F + f], dinp[n * 2 * F + F + f]};
            pl_ref_swiglu_bwd(d, gu, &dout[n * F + f], 1, 1);
            dinp[n * 2 * F + f] = d[0];
            dinp[n * 2 * F + F + f] = d[1];
        }
}
