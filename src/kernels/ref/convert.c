/* Reference twins: fp32 to bf16 and fp16 and back, one element at a time.
 *
 * bf16 keeps fp32's 8-bit exponent and the top 7 mantissa bits; rounding is to
 * nearest, ties to even, on the bit pattern (denormals round like any value,
 * Inf stays Inf, a NaN stays a NaN with the quiet bit set). fp16 (IEEE
 * binary16): 5-bit exponent, 10 mantissa bits, largest finite 65504; values
 * from 65520 up round to Inf, values below 2^-14 become half denormals
 * (multiples of 2^-24), all round to nearest, ties to even. */
#include "kernels/kernels.h"

#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t pl_ref_bf16_from_f32(float f)
{
    uint32_t u = bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN: keep sign and payload top, set quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float pl_ref_bf16_to_f32(uint16_t h) { return from_bits((uint32_t)h << 16); }

uint16_t pl_ref_fp16_from_f32(float f)
{
    uint32_t u = bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 (65504 + half an ulp, tie to even goes up): Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: rebias the exponent (127 - 15), round 13 bits off */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    /* half denormal: k * 2^-24 with k = round(|f| * 2^24) */
    uint32_t e = a >> 23;
    if (e < 102) /* |f| < 2^-25: rounds to 0 (2^-25 itself is a tie, to even 0) */
        return (uint16_t)sign;
    uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e; /* |f| 2^24 = m 2^(e-126) */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

float pl_ref_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return from_bits(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* denormal or zero: m * 2^-24, exact in fp32 */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return from_bits(sign | ((e + 112) << 23) | (m << 13));
}

void pl_ref_f32_to_bf16(uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t lds)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[i * cols + j] = pl_ref_bf16_from_f32(src[i * lds + j]);
}

void pl_ref_round_fp16(float *dst, const float *src, int64_t rows, int64_t cols, int64_t lds)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[i * cols + j] = pl_ref_fp16_to_f32(pl_ref_fp16_from_f32(src[i * lds + j]));
}

void pl_ref_round_bf16(uint16_t *packed, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = pl_ref_bf16_from_f32(x[i]);
        x[i] = pl_ref_bf16_to_f32(h);
        if (packed)
            packed[i] = h;
    }
}

void pl_ref_widen_bf16(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = pl_ref_bf16_to_f32(src[i]);
}
