/* Fast twin: SwiGLU (OpenMP over rows, vectorized over the row).
 *
 * The reference's formulas with the vectorizable pl_vexpf of simd.h in place
 * of libm's expf (both builds): a few ulp from the reference. The bf16-input
 * kernels run the same inline functions on the widened values, so each is bit
 * for bit its fp32 kernel on the widened input, in either build. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#define PAR_MIN 32768

static inline float silu_of(float g) { return g / (1.0f + pl_vexpf(-g)); }

/* d silu / dg = s + g s (1 - s), s = sigmoid(g). */
static inline float silu_grad_of(float g)
{
    float s = 1.0f / (1.0f + pl_vexpf(-g));
    return s + g * s * (1.0f - s);
}

void pl_cpu_swiglu_fwd(float *out, const float *inp, int64_t N, int64_t F)
{
    PL_DISPATCH(swiglu_fwd, out, inp, N, F);
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        float *restrict o = out + n * F;
#pragma omp simd
        for (int64_t f = 0; f < F; f++)
            o[f] = silu_of(gate[f]) * up[f];
    }
}

void pl_cpu_swiglu_bwd(float *dinp, const float *inp, const float *dout, int64_t N, int64_t F)
{
    PL_DISPATCH(swiglu_bwd, dinp, inp, dout, N, F);
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        const float *restrict dy = dout + n * F;
        float *restrict dgate = dinp + n * 2 * F, *restrict dup = dgate + F;
#pragma omp simd
        for (int64_t f = 0; f < F; f++) {
            dgate[f] += silu_grad_of(gate[f]) * up[f] * dy[f];
            dup[f] += silu_of(gate[f]) * dy[f];
        }
    }
}

void pl_cpu_swiglu_fwd_bf16(float *out, const uint16_t *inp, int64_t N, int64_t F)
{
    PL_DISPATCH(swiglu_fwd_bf16, out, inp, N, F);
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const uint16_t *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        float *restrict o = out + n * F;
#pragma omp simd
        for (int64_t f = 0; f < F; f++)
            o[f] = silu_of(pl_bf16_value(gate[f])) * pl_bf16_value(up[f]);
    }
}

void pl_cpu_swiglu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t N,
                            int64_t F)
{
    PL_DISPATCH(swiglu_bwd_bf16, dinp, inp, dout, N, F);
#pragma omp parallel for schedule(static) if (N * F > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        const uint16_t *restrict gate = inp + n * 2 * F, *restrict up = gate + F;
        const float *restrict dy = dout + n * F;
        float *restrict dgate = dinp + n * 2 * F, *restrict dup = dgate + F;
#pragma omp simd
        for (int64_t f = 0; f < F; f++) {
            float g = pl_bf16_value(gate[f]);
            dgate[f] += silu_grad_of(g) * pl_bf16_value(up[f]) * dy[f];
            dup[f] += silu_of(g) * dy[f];
        }
    }
}
