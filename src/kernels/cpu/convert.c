/* Fast twins: fp32 matrices to bf16, and rounded through fp16, for the GEMM's
 * reduced-precision modes (gemm.c converts its operands with these); bf16
 * rounding in place and widening back, for the activations --bf16 saves.
 *
 * Rows in parallel (OpenMP), each row one vectorized loop. bf16 rounding is
 * integer arithmetic on the bit pattern (round to nearest even: add 0x7fff
 * plus the lowest kept bit, keep the top half; NaN made quiet), which GCC
 * vectorizes in both builds; it is exactly the reference's function, so the
 * twins agree bit for bit, denormals included. AVX512-BF16's VCVTNE2PS2BF16
 * is not used: it treats denormal inputs as zero (so it would not be the
 * reference's function), needs a CPU feature beyond this build's AVX-512
 * level, and the conversion is memory-bound, so it would not be faster.
 * fp16: the AVX-512 build uses VCVTPS2PH / VCVTPH2PS (AVX512F, round to
 * nearest even; beyond 65504 gives Inf); the portable build the scalar
 * reference function. Both leave the values in fp32 storage: products of two
 * fp16 values (11-bit significands) are exact in fp32. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#include <string.h>

/* Parallel over rows only above this many elements. */
#define CONV_PAR_MIN 65536
/* Elements per work item of flat loops: fixed, so the split never depends on threads. */
#define FLAT_BLOCK 16384

/* The bf16 bits of x: round to nearest even, NaN made quiet (the reference's function). */
static inline uint16_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

void pl_cpu_f32_to_bf16(uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t lds)
{
    PL_DISPATCH(f32_to_bf16, dst, src, rows, cols, lds);
#pragma omp parallel for schedule(static) if (rows * cols > CONV_PAR_MIN && rows > 1)
    for (int64_t i = 0; i < rows; i++) {
        const float *restrict s = src + i * lds;
        uint16_t *restrict d = dst + i * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            d[j] = bf16_bits(s[j]);
    }
}

void pl_cpu_round_bf16(uint16_t *packed, float *x, int64_t n)
{
    PL_DISPATCH(round_bf16, packed, x, n);
#pragma omp parallel for schedule(static) if (n > CONV_PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict v = x;
        if (packed) {
            uint16_t *restrict d = packed;
#pragma omp simd
            for (int64_t i = i0; i < i1; i++) {
                uint16_t h = bf16_bits(v[i]);
                d[i] = h;
                v[i] = pl_bf16_value(h);
            }
        } else {
#pragma omp simd
            for (int64_t i = i0; i < i1; i++)
                v[i] = pl_bf16_value(bf16_bits(v[i]));
        }
    }
}

void pl_cpu_widen_bf16(float *dst, const uint16_t *src, int64_t n)
{
    PL_DISPATCH(widen_bf16, dst, src, n);
#pragma omp parallel for schedule(static) if (n > CONV_PAR_MIN)
    for (int64_t i0 = 0; i0 < n; i0 += FLAT_BLOCK) {
        int64_t i1 = i0 + FLAT_BLOCK < n ? i0 + FLAT_BLOCK : n;
        float *restrict d = dst;
        const uint16_t *restrict h = src;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            d[i] = pl_bf16_value(h[i]);
    }
}

void pl_cpu_round_fp16(float *dst, const float *src, int64_t rows, int64_t cols, int64_t lds)
{
    PL_DISPATCH(round_fp16, dst, src, rows, cols, lds);
#pragma omp parallel for schedule(static) if (rows * cols > CONV_PAR_MIN && rows > 1)
    for (int64_t i = 0; i < rows; i++) {
        const float *s = src + i * lds;
        float *d = dst + i * cols;
        int64_t j = 0;
#if defined(__AVX512F__)
        for (; j + 16 <= cols; j += 16)
            _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                        _mm512_loadu_ps(s + j),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        if (j < cols) {
            __mmask16 k = (__mmask16)((1u << (cols - j)) - 1u);
            _mm512_mask_storeu_ps(d + j, k, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                                _mm512_maskz_loadu_ps(k, s + j),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            j = cols;
        }
#endif
        for (; j < cols; j++)
            d[j] = pl_ref_fp16_to_f32(pl_ref_fp16_from_f32(s[j]));
    }
}
