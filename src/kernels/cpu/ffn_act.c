/* Fast twin: T5's feed-forward activations, ReLU and GEGLU (kernels.h):
 * OpenMP over rows, the reference's formulas (libm's tanhf, so the same
 * bits as the reference). Portable build only: these are memory-bound. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#include <math.h>

#define PAR_MIN 32768
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void pl_cpu_relu_fwd(float *out, const float *inp, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void pl_cpu_relu_bwd(float *dinp, const float *inp, const float *dout, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

static inline float geglu_of(float g, float u)
{
    return 0.5f * g * (1.0f + tanhf(GELU_K * (g + GELU_A * g * g * g))) * u;
}

/* dgate, dup += the gradient of gelu(g) u from dy. */
static inline void geglu_grad(float g, float u, float dy, float *dgate, float *dup)
{
    const float th = tanhf(GELU_K * (g + GELU_A * g * g * g));
    const float gelu = 0.5f * g * (1.0f + th);
    const float dgelu = 0.5f * (1.0f + th) +
                        0.5f * g * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * g * g);
    *dgate += dgelu * u * dy;
    *dup += gelu * dy;
}

void pl_cpu_geglu_fwd(float *out, const float *inp, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        float *restrict o = out + n * F;
        for (int64_t f = 0; f < F; f++)
            o[f] = geglu_of(gate[f], up[f]);
    }
}

void pl_cpu_geglu_bwd(float *dinp, const float *inp, const float *dout, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        const float *restrict dy = dout + n * F;
        float *restrict dgate = dinp + n * 2 * F, *restrict dup = dgate + F;
        for (int64_t f = 0; f < F; f++)
            geglu_grad(gate[f], up[f], dy[f], &dgate[f], &dup[f]);
    }
}

void pl_cpu_relu_fwd_bf16(float *out, const uint16_t *inp, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float x = pl_bf16_value(inp[i]);
        out[i] = x > 0.0f ? x : 0.0f;
    }
}

void pl_cpu_relu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        dinp[i] += pl_bf16_value(inp[i]) > 0.0f ? dout[i] : 0.0f;
}

void pl_cpu_geglu_fwd_bf16(float *out, const uint16_t *inp, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const uint16_t *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        float *restrict o = out + n * F;
        for (int64_t f = 0; f < F; f++)
            o[f] = geglu_of(pl_bf16_value(gate[f]), pl_bf16_value(up[f]));
    }
}

void pl_cpu_geglu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t N,
                           int64_t F)
{
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const uint16_t *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        const float *restrict dy = dout + n * F;
        float *restrict dgate = dinp + n * 2 * F, *restrict dup = dgate + F;
        for (int64_t f = 0; f < F; f++)
            geglu_grad(pl_bf16_value(gate[f]), pl_bf16_value(up[f]), dy[f], &dgate[f], &dup[f]);
    }
}
