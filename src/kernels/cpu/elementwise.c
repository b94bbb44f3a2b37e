/* Fast twins: bias, add, GELU (OpenMP over rows or elements, vectorized).
 *
 * bias_bwd splits by columns so each sum runs over n in the reference's
 * order: bit-equal to the reference for any thread count. GELU evaluates
 * 0.5 x (1 + tanh(u)) as x * sigmoid(2u) = x / (1 + exp(-2u)) with the
 * vectorizable exp of vmath.h: no cancellation for large negative x, and
 * within a few ulp of the tanhf form. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#define COL_BLOCK 64
#define PAR_MIN 32768
/* Elements per work item of flat loops: fixed, so the split never depends on threads. */
#define FLAT_BLOCK 16384

void pl_cpu_bias_fwd(float *out, const float *bias, int64_t N, int64_t OC)
{
    PL_DISPATCH(bias_fwd, out, bias, N, OC);
#pragma omp parallel for schedule(static) if (N * OC > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        float *restrict o = out + n * OC;
#pragma omp simd
        for (int64_t c = 0; c < OC; c++)
            o[c] += bias[c];
    }
}

void pl_cpu_bias_bwd(float *dbias, const float *dout, int64_t N, int64_t OC)
{
    PL_DISPATCH(bias_bwd, dbias, dout, N, OC);
    int64_t nblk = (OC + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (N * OC > PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < OC ? c0 + COL_BLOCK : OC;
        float *restrict d = dbias;
        for (int64_t n = 0; n < N; n++) {
            const float *restrict s = dout + n * OC;
#pragma omp simd
            for (int64_t c = c0; c < c1; c++)
                d[c] += s[c];
        }
    }
}

void pl_cpu_add(float *out, const float *a, const float *b, int64_t n)
{
    PL_DISPATCH(add, out, a, b, n);
    /* out may alias a or b element for element, so no restrict here; omp simd
     * asserts the absence of loop-carried dependences, which holds. */
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            out[i] = a[i] + b[i];
    }
}

/* Exact GELU with libm's erff and expf per element (BERT's lm_head: one (N, C)
 * tensor a step), the reference's arithmetic in parallel blocks. */
void pl_cpu_gelu_erf_fwd(float *out, const float *inp, int64_t n)
{
    PL_DISPATCH(gelu_erf_fwd, out, inp, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        pl_ref_gelu_erf_fwd(out + i0, inp + i0, i1 - i0);
    }
}

void pl_cpu_gelu_erf_bwd(float *dinp, const float *inp, const float *dout, int64_t n)
{
    PL_DISPATCH(gelu_erf_bwd, dinp, inp, dout, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        pl_ref_gelu_erf_bwd(dinp + i0, inp + i0, dout + i0, i1 - i0);
    }
}

/* The same on bf16 inputs: the reference's arithmetic on blocks of elements. */
void pl_cpu_gelu_erf_fwd_bf16(float *out, const uint16_t *inp, int64_t n)
{
    PL_DISPATCH(gelu_erf_fwd_bf16, out, inp, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        pl_ref_gelu_erf_fwd_bf16(out + i0, inp + i0, i1 - i0);
    }
}

void pl_cpu_gelu_erf_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t n)
{
    PL_DISPATCH(gelu_erf_bwd_bf16, dinp, inp, dout, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        pl_ref_gelu_erf_bwd_bf16(dinp + i0, inp + i0, dout + i0, i1 - i0);
    }
}

#define GELU_2K 1.5957691216057308f /* 2 sqrt(2/pi) */
#define GELU_A 0.044715f

static inline float gelu_of(float x)
{
    float u2 = GELU_2K * (x + GELU_A * x * x * x);
    return x / (1.0f + pl_vexpf(-u2));
}

/* d/dx [x s(2u)] = s + x s (1 - s) 2u'(x), s = sigmoid(2u), 2u' = 2K (1 + 3A x^2). */
static inline float gelu_grad_of(float x)
{
    float u2 = GELU_2K * (x + GELU_A * x * x * x);
    float s = 1.0f / (1.0f + pl_vexpf(-u2));
    return s + x * s * (1.0f - s) * GELU_2K * (1.0f + 3.0f * GELU_A * x * x);
}

void pl_cpu_gelu_fwd(float *out, const float *inp, int64_t n)
{
    PL_DISPATCH(gelu_fwd, out, inp, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict o = out;
        const float *restrict x = inp;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            o[i] = gelu_of(x[i]);
    }
}

void pl_cpu_gelu_bwd(float *dinp, const float *inp, const float *dout, int64_t n)
{
    PL_DISPATCH(gelu_bwd, dinp, inp, dout, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict d = dinp;
        const float *restrict x = inp, *restrict dy = dout;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            d[i] += gelu_grad_of(x[i]) * dy[i];
    }
}

void pl_cpu_gelu_fwd_bf16(float *out, const uint16_t *inp, int64_t n)
{
    PL_DISPATCH(gelu_fwd_bf16, out, inp, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict o = out;
        const uint16_t *restrict x = inp;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            o[i] = gelu_of(pl_bf16_value(x[i]));
    }
}

void pl_cpu_gelu_bwd_bf16(float *dinp, const uint16_t *inp, const float *dout, int64_t n)
{
    PL_DISPATCH(gelu_bwd_bf16, dinp, inp, dout, n);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict d = dinp;
        const uint16_t *restrict x = inp;
        const float *restrict dy = dout;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            d[i] += gelu_grad_of(pl_bf16_value(x[i])) * dy[i];
    }
}
