/* Vectorizable elementary functions for the cpu kernels.
 *
 * Portable C that GCC vectorizes inside `#pragma omp simd` loops (libm's expf
 * is an opaque call and blocks vectorization). Internal to src/kernels/cpu/.
 * This is the seam where ISA-specific versions will go. */
#ifndef PL_KERNELS_CPU_VMATH_H
#define PL_KERNELS_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

/* exp(x) in fp32, relative error below 1e-7 on [lo, hi] = [-87.34, 88.38]
 * (Cephes' polynomial after Cody-Waite range reduction). Saturates outside:
 * 1.2e-38 for x < lo, including -inf (harmless next to the 1 of a softmax's
 * max term or of 1 + exp in a sigmoid), 2.4e38 for x > hi; NaN stays NaN.
 *
 * Branch-free with integer masks: GCC's default -ftrapping-math forbids
 * if-converting a conditional float operation, and it turns float (and even
 * integer) selects back into branches, which stops the vectorizer. */
static inline float pl_vexpf(float x)
{
    const int32_t hi_bits = 0x42b0c0a5;              /*  88.3762626647949 */
    const int32_t lo_bits = (int32_t)0xc2aeac50u;    /* -87.3365447504 */
    const int32_t lo_abs_bits = lo_bits & 0x7fffffff;
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const int32_t magic_bits = 0x4b400000;
    int32_t xi;
    memcpy(&xi, &x, sizeof xi);
    int32_t ax = xi & 0x7fffffff;
    int32_t m_hi = -(int32_t)((xi >= 0) & (ax > hi_bits));
    int32_t m_lo = -(int32_t)((xi < 0) & (ax > lo_abs_bits));
    int32_t m_nan = -(int32_t)(ax > 0x7f800000);
    int32_t ci = (xi & ~(m_hi | m_lo)) | (hi_bits & m_hi) | (lo_bits & m_lo);
    float xc;
    memcpy(&xc, &ci, sizeof xc);
    float t = xc * log2e + magic;
    float n = t - magic;
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    int32_t e = (int32_t)((uint32_t)(ti - magic_bits + 127) << 23); /* 2^n, n in [-126, 127] */
    float r = xc - n * ln2_hi;
    r = r - n * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    float y = p * scale;
    int32_t yi;
    memcpy(&yi, &y, sizeof yi);
    yi = (yi & ~m_nan) | (xi & m_nan);
    memcpy(&y, &yi, sizeof y);
    return y;
}

#endif
