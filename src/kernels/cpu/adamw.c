/* Fast twins: AdamW update and the sum of squares (OpenMP, vectorized).
 *
 * AdamW is elementwise and performs the reference's float operations in the
 * same order (ISO C mode keeps GCC from contracting them into FMAs), so it
 * equals the reference bit for bit. sumsq splits x into SUMSQ_PARTS parts
 * fixed by n alone, sums each in SUMSQ_LANES interleaved double accumulators,
 * and adds the parts in order: the result depends on n, never on threads. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#include <math.h>

#define PAR_MIN 32768
#define FLAT_BLOCK 16384
/* Elements per sub-block of the split AdamW loops (stays in L1). */
#define ADAMW_SUB 512
#define SUMSQ_PARTS 64
#define SUMSQ_LANES 8

/* Without -fno-math-errno, GCC must keep sqrtf's errno path for negative
 * inputs, a branch that stops the vectorizer. Then each block runs three
 * loops: the moments (vectorized), the square roots (scalar, the only scalar
 * work), the parameter update (vectorized, with its two divisions). With
 * -fno-math-errno (__NO_MATH_ERRNO__), one fused loop vectorizes whole:
 * measured 2.2 against 0.9 ns per element on one core. Same bits either way. */
void pl_cpu_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1,
                  float b2, float eps, float wd, float bc1, float bc2, float grad_scale)
{
    PL_DISPATCH(adamw, p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, grad_scale);
    float decay = 1.0f - lr * wd;
    float step = lr / bc1;
    float bc2_sqrt = sqrtf(bc2);
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict pp = p, *restrict mm = m, *restrict vv = v;
        const float *restrict gg = g;
#if defined(__NO_MATH_ERRNO__)
#pragma omp simd
        for (int64_t i = i0; i < i1; i++) {
            float gi = gg[i] * grad_scale;
            float pi = pp[i] * decay;
            float mi = b1 * mm[i] + (1.0f - b1) * gi;
            float vi = b2 * vv[i] + (1.0f - b2) * gi * gi;
            mm[i] = mi;
            vv[i] = vi;
            pp[i] = pi - step * (mi / (sqrtf(vi) / bc2_sqrt + eps));
        }
#else
        float root[ADAMW_SUB];
        for (int64_t s0 = i0; s0 < i1; s0 += ADAMW_SUB) {
            int64_t s1 = s0 + ADAMW_SUB < i1 ? s0 + ADAMW_SUB : i1;
#pragma omp simd
            for (int64_t i = s0; i < s1; i++) {
                float gi = gg[i] * grad_scale;
                mm[i] = b1 * mm[i] + (1.0f - b1) * gi;
                vv[i] = b2 * vv[i] + (1.0f - b2) * gi * gi;
            }
            for (int64_t i = s0; i < s1; i++)
                root[i - s0] = sqrtf(vv[i]);
#pragma omp simd
            for (int64_t i = s0; i < s1; i++)
                pp[i] = pp[i] * decay - step * (mm[i] / (root[i - s0] / bc2_sqrt + eps));
        }
#endif
    }
}

double pl_cpu_sumsq(const float *x, int64_t n)
{
    PL_DISPATCH_RET(sumsq, x, n);
    double part[SUMSQ_PARTS];
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int p = 0; p < SUMSQ_PARTS; p++) {
        int64_t i0 = n * p / SUMSQ_PARTS, i1 = n * (p + 1) / SUMSQ_PARTS;
        double acc[SUMSQ_LANES] = {0};
        int64_t i = i0;
        for (; i + SUMSQ_LANES <= i1; i += SUMSQ_LANES)
            for (int k = 0; k < SUMSQ_LANES; k++)
                acc[k] += (double)x[i + k] * (double)x[i + k];
        for (int k = 0; i < i1; i++, k++)
            acc[k] += (double)x[i] * (double)x[i];
        double s = 0.0;
        for (int k = 0; k < SUMSQ_LANES; k++)
            s += acc[k];
        part[p] = s;
    }
    double s = 0.0;
    for (int p = 0; p < SUMSQ_PARTS; p++)
        s += part[p];
    return s;
}
