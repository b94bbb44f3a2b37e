/* The SIMD seam of the cpu kernels (internal to src/kernels/cpu/).
 *
 * pl_vexpf is plain C that vectorizes inside `#pragma omp simd` loops (libm's
 * expf is an opaque call and blocks vectorization). pl_vf is a GNU C generic
 * vector (GCC and clang) of PL_VF floats: 4 at the SSE2 baseline this project
 * builds for, 16 in the AVX-512 builds of avx512/ (or 8 / 16 if the compiler
 * is told of a wider ISA); the compiler lowers its arithmetic to whatever the
 * target has. Without GNU C vectors, PL_VF is 0 and callers use their scalar
 * loops. The only intrinsic is the fused multiply-add of pl_vf_fma, used when
 * the target has AVX-512.
 *
 * Run-time dispatch: every public kernel of a cpu file starts with
 * PL_DISPATCH(name, args...) (PL_DISPATCH_RET for kernels returning a
 * value). In the portable build it calls pl_avx512_NAME, the same file's
 * AVX-512 build (avx512/avx512.h), when pl_cpu_isa() is PL_ISA_AVX512; in the
 * AVX-512 build, and when no AVX-512 build exists, it is empty. */
#ifndef PL_KERNELS_CPU_SIMD_H
#define PL_KERNELS_CPU_SIMD_H

#include "kernels/cpu/isa.h"

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#endif

#if PL_AVX512_BUILT && !defined(PL_AVX512_TU)
#define PL_DISPATCH(name, ...)                                                                     \
    do {                                                                                           \
        if (pl_cpu_isa() == PL_ISA_AVX512) {                                                       \
            extern __typeof__(pl_cpu_##name) pl_avx512_##name;                                     \
            pl_avx512_##name(__VA_ARGS__);                                                         \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define PL_DISPATCH_RET(name, ...)                                                                 \
    do {                                                                                           \
        if (pl_cpu_isa() == PL_ISA_AVX512) {                                                       \
            extern __typeof__(pl_cpu_##name) pl_avx512_##name;                                     \
            return pl_avx512_##name(__VA_ARGS__);                                                  \
        }                                                                                          \
    } while (0)
#else
#define PL_DISPATCH(name, ...) ((void)0)
#define PL_DISPATCH_RET(name, ...) ((void)0)
#endif

#if defined(__GNUC__)
#if defined(__AVX512F__)
#define PL_VF 16
#elif defined(__AVX__)
#define PL_VF 8
#else
#define PL_VF 4
#endif
typedef float pl_vf __attribute__((vector_size(PL_VF * sizeof(float))));

/* Unaligned load and store of PL_VF floats. */
static inline pl_vf pl_vf_load(const float *p)
{
    pl_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void pl_vf_store(float *p, pl_vf v) { memcpy(p, &v, sizeof v); }

/* PL_VF copies of a. */
static inline pl_vf pl_vf_set1(float a)
{
    pl_vf v;
    for (int i = 0; i < PL_VF; i++)
        v[i] = a;
    return v;
}

/* a * b + c, rounded once where the target has FMA (AVX-512 builds), else
 * twice (ISO C mode: GCC never contracts a * b + c by itself). */
static inline pl_vf pl_vf_fma(pl_vf a, pl_vf b, pl_vf c)
{
#if PL_VF == 16 && defined(__AVX512F__) && defined(__FMA__)
    return (pl_vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#else
    return a * b + c;
#endif
}
#else
#define PL_VF 0
#endif

/* exp(x) in fp32, relative error below 1e-7 on [lo, hi] = [-86.6, 88.38]
 * (Cephes' polynomial after Cody-Waite range reduction). Saturates outside:
 * 2.5e-38 for x < lo, including -inf (harmless next to the 1 of a softmax's
 * max term or of 1 + exp in a sigmoid), 2.4e38 for x > hi; NaN stays NaN.
 * lo keeps every result a normal number: a denormal result costs a
 * microcode assist, which made GELU on inputs beyond +-10 twice as slow.
 *
 * Branch-free with integer masks: GCC's default -ftrapping-math forbids
 * if-converting a conditional float operation, and it turns float (and even
 * integer) selects back into branches, which stops the vectorizer. */
static inline float pl_vexpf(float x)
{
    const int32_t hi_bits = 0x42b0c0a5;              /*  88.3762626647949 */
    const int32_t lo_bits = (int32_t)0xc2ad3333u;    /* -86.6 */
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
    int32_t e = (int32_t)((uint32_t)(ti - magic_bits + 127) << 23); /* 2^n, n in [-125, 127] */
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

/* The fp32 value of bf16 bits h (exact: the bits are fp32's top half). Plain C
 * that vectorizes in `#pragma omp simd` loops. */
static inline float pl_bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
