/* Fast twin: dropout (OpenMP over rows; Philox once per block of four
 * consecutive indices, vectorized across blocks).
 *
 * The indices of a row are consecutive, so the row is cut at multiples of 4:
 * a partial block at each end (one scalar Philox block each), whole blocks in
 * between, LANES = 16 of them at a time: one lane per block, in plain C that
 * GCC vectorizes in the portable build (pmuludq, 2 lanes of 64 bits), with
 * AVX-512 intrinsics in the AVX-512 build (16 lanes of 32 bits). Integer
 * arithmetic and the reference's one float product per element: bit for bit
 * the reference, in either build and for any thread count. */
#include "kernels/kernels.h"

#include "base/rng.h"
#include "kernels/cpu/simd.h"

#include <string.h>

/* Threads from 4096 elements: a draw costs several elementwise operations. */
#define PAR_MIN 4096
/* Philox blocks per step of the lane loop (64 elements). */
#define LANES 16

/* Philox4x32-10's constants (pl_philox4x32 in base/rng.c). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* w[4 l + j] = word j of the Philox block of counter (kb + l, stream) and key
 * seed, l < LANES: the u32 draws of indices 4 kb .. 4 kb + 4 LANES - 1, in
 * order. pl_philox4x32's rounds, one lane per block. */
#if defined(__AVX512F__) && defined(__FMA__) && LANES == 16
/* 16 lanes of 32 bits in one register; the 32x32->64-bit products are two
 * _mm512_mul_epu32 (even lanes, then odd lanes shifted down), their halves
 * blended back into place. GCC's vectorization of the C version widens
 * every lane to 64 bits and multiplies with vpmullq, at half the lanes. */
static inline void mul_hi_lo(__m512i a, __m512i m, __m512i *hi, __m512i *lo)
{
    __m512i even = _mm512_mul_epu32(a, m);                         /* lanes 0, 2, .. as 64 bits */
    __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m); /* lanes 1, 3, .. */
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

static inline void philox_lanes(uint32_t w[4 * LANES], uint64_t kb, uint64_t seed, uint64_t stream)
{
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)kb), lane);
    __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lane); /* low word wrapped */
    __m512i c1 = _mm512_set1_epi32((int)(uint32_t)(kb >> 32));
    c1 = _mm512_mask_add_epi32(c1, carry, c1, _mm512_set1_epi32(1));
    __m512i c2 = _mm512_set1_epi32((int)(uint32_t)stream);
    __m512i c3 = _mm512_set1_epi32((int)(uint32_t)(stream >> 32));
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        __m512i hi0, lo0, hi1, lo1;
        mul_hi_lo(c0, m0, &hi0, &lo0);
        mul_hi_lo(c2, m1, &hi1, &lo1);
        c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
        c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
        c1 = lo1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    /* 4x16 words to element order: the unpacks give, in 128-bit lane q of
     * u_r, block 4q + r; the shuffles gather blocks 4v .. 4v+3 into out v. */
    __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    __m512i a = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0)); /* blocks 0 4 1 5 */
    __m512i b = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0)); /* 2 6 3 7 */
    __m512i c = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2)); /* 8 12 9 13 */
    __m512i d = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2)); /* 10 14 11 15 */
    _mm512_storeu_si512(w, _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(w + 16, _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(w + 32, _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(w + 48, _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1)));
}
#else
static inline void philox_lanes(uint32_t w[4 * LANES], uint64_t kb, uint64_t seed, uint64_t stream)
{
    const uint32_t s0 = (uint32_t)stream, s1 = (uint32_t)(stream >> 32);
#pragma omp simd
    for (int l = 0; l < LANES; l++) {
        uint64_t k = kb + (uint64_t)l;
        uint32_t c0 = (uint32_t)k, c1 = (uint32_t)(k >> 32), c2 = s0, c3 = s1;
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int round = 0; round < 10; round++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
            c1 = (uint32_t)p1;
            c3 = (uint32_t)p0;
            c0 = n0;
            c2 = n2;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        w[4 * l] = c0;
        w[4 * l + 1] = c1;
        w[4 * l + 2] = c2;
        w[4 * l + 3] = c3;
    }
}
#endif

/* out[0..n) = inp * mask for the n consecutive indices from index, n >= 0. */
static void dropout_run(float *out, const float *inp, int64_t n, uint64_t index,
                        uint32_t threshold, float scale, uint64_t seed, uint64_t stream)
{
    uint32_t w[4 * LANES];
    int64_t i = 0;
    while (i < n) {
        uint64_t at = index + (uint64_t)i;
        int64_t len;
        if ((at & 3) == 0 && n - i >= 4 * LANES) {
            philox_lanes(w, at >> 2, seed, stream);
            len = 4 * LANES;
        } else { /* one block, possibly entered or left part-way */
            const uint32_t ctr[4] = {(uint32_t)(at >> 2), (uint32_t)(at >> 34), (uint32_t)stream,
                                     (uint32_t)(stream >> 32)};
            const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
            pl_philox4x32(ctr, key, w);
            int64_t off = (int64_t)(at & 3);
            len = 4 - off < n - i ? 4 - off : n - i;
            for (int64_t j = 0; j < len; j++)
                w[j] = w[off + j];
        }
#pragma omp simd
        for (int64_t j = 0; j < len; j++)
            out[i + j] = inp[i + j] * (w[j] >= threshold ? scale : 0.0f);
        i += len;
    }
}

void pl_cpu_dropout(float *out, const float *inp, int64_t n0, int64_t rows, int64_t T, int64_t C,
                    int64_t Cg, int64_t c0, const int64_t *sample, float p, uint64_t seed,
                    uint64_t stream)
{
    PL_DISPATCH(dropout, out, inp, n0, rows, T, C, Cg, c0, sample, p, seed, stream);
    if (p == 0.0f) {
        if (out != inp)
            memmove(out, inp, (size_t)(rows * C) * sizeof *out);
        return;
    }
    uint32_t threshold = pl_dropout_threshold(p);
    float scale = (float)(1.0 / (1.0 - (double)p));
#pragma omp parallel for schedule(static) if (rows * C > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t n = n0 + r, b = n / T, t = n % T;
        uint64_t index = ((uint64_t)sample[b] * (uint64_t)T + (uint64_t)t) * (uint64_t)Cg +
                         (uint64_t)c0;
        dropout_run(out + r * C, inp + r * C, C, index, threshold, scale, seed, stream);
    }
}
