/* kernels/precision: bf16 and fp16 conversions against scalar statements of
 * round-to-nearest-even, and the GEMM's bf16 / fp16 modes against GEMMs of the
 * rounded inputs (close) and of the unrounded ones (within the precision). */
#include "base/alloc.h"
#include "kernel_check.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <stdint.h>

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t u_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t bits_rng = 0x243f6a8885a308d3ull;
static uint32_t rand_bits(void)
{
    bits_rng ^= bits_rng << 13, bits_rng ^= bits_rng >> 7, bits_rng ^= bits_rng << 17;
    return (uint32_t)(bits_rng >> 16);
}

static int bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu); }
static int fp16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

TEST(bf16_rounding_of_special_cases)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f800000u, 0x3f80u}, /* 1.0 exact */
        {0x3f808000u, 0x3f80u}, /* tie, kept bit even: down */
        {0x3f818000u, 0x3f82u}, /* tie, kept bit odd: up */
        {0x3f808001u, 0x3f81u}, /* just above the tie: up */
        {0x3f807fffu, 0x3f80u}, /* just below the tie: down */
        {0xbf818000u, 0xbf82u}, /* negative tie, odd: away from zero */
        {0x7f800000u, 0x7f80u}, /* +Inf */
        {0xff800000u, 0xff80u}, /* -Inf */
        {0x7f7fffffu, 0x7f80u}, /* FLT_MAX rounds up to Inf */
        {0x7f7f7fffu, 0x7f7fu}, /* largest value that stays finite */
        {0x00000000u, 0x0000u}, {0x80000000u, 0x8000u}, /* signed zeros */
        {0x00008000u, 0x0000u}, /* denormal tie, even: to zero */
        {0x00018000u, 0x0002u}, /* denormal tie, odd: up */
        {0x00008001u, 0x0001u}, /* denormal above the tie */
        {0x007fffffu, 0x0080u}, /* largest denormal rounds to the smallest normal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint16_t h = pl_ref_bf16_from_f32(f_of(cases[i].in));
        CHECK(h == cases[i].out, "0x%08x -> 0x%04x, expected 0x%04x", cases[i].in, h, cases[i].out);
    }
    static const uint32_t nans[] = {0x7f800001u, 0x7fc00000u, 0xffffffffu, 0x7f80ffffu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        uint16_t h = pl_ref_bf16_from_f32(f_of(nans[i]));
        CHECK(bf16_is_nan(h) && (h >> 15) == (nans[i] >> 31), "NaN 0x%08x -> 0x%04x", nans[i], h);
    }
}

/* An independent statement: the nearest of the two bf16 neighbours in double,
 * ties to the even one. */
static uint16_t bf16_nearest(float f)
{
    uint32_t u = u_of(f), lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)f - (double)f_of(lo));
    double dh = (hi & 0x7fffffffu) >= 0x7f800000u ? fabs((double)f - (double)f_of(lo) * 2) /* past FLT_MAX */
                                                  : fabs((double)f_of(hi) - (double)f);
    if ((hi & 0x7fffffffu) == 0x7f800000u) /* the next value up is Inf: measure to 2^128 */
        dh = fabs(ldexp(f < 0 ? -1.0 : 1.0, 128) - (double)f);
    if (dl < dh || (dl == dh && !((lo >> 16) & 1u)))
        return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

TEST(bf16_rounding_is_nearest_even_on_random_bit_patterns)
{
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = rand_bits();
        if ((u & 0x7fffffffu) >= 0x7f800000u)
            continue;
        uint16_t h = pl_ref_bf16_from_f32(f_of(u)), e = bf16_nearest(f_of(u));
        if (h != e && bad++ < 5)
            CHECK(0, "0x%08x -> 0x%04x, nearest even is 0x%04x", u, h, e);
    }
    CHECK(bad == 0, "%d mismatches", bad);
}

TEST(fp16_rounding_of_special_cases_and_overflow_to_inf)
{
    static const struct {
        float in;
        uint16_t out;
    } cases[] = {
        {1.0f, 0x3c00u},
        {1.0f + 0x1p-11f, 0x3c00u},        /* tie, even: down */
        {1.0f + 3 * 0x1p-11f, 0x3c02u},    /* tie, odd: up */
        {65504.0f, 0x7bffu},               /* largest finite */
        {65519.0f, 0x7bffu},               /* below 65504 + half an ulp */
        {65520.0f, 0x7c00u},               /* the tie goes to even: Inf */
        {1e6f, 0x7c00u},                   {-1e6f, 0xfc00u},
        {0x1p-14f, 0x0400u},               /* smallest normal */
        {0x1p-24f, 0x0001u},               /* smallest denormal */
        {0x1p-25f, 0x0000u},               /* tie between 0 and 2^-24: even 0 */
        {0x1.8p-25f, 0x0001u},             /* above the tie */
        {0x1.8p-24f, 0x0002u},             /* tie between 1 and 2 (x 2^-24): even 2 */
        {0x1p-30f, 0x0000u},               {-0x1p-24f, 0x8001u},
        {0x1.ffcp-15f, 0x0400u},           /* largest denormal + : rounds up to the normal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint16_t h = pl_ref_fp16_from_f32(cases[i].in);
        CHECK(h == cases[i].out, "%a -> 0x%04x, expected 0x%04x", (double)cases[i].in, h,
              cases[i].out);
    }
    CHECK(fp16_is_nan(pl_ref_fp16_from_f32(NAN)), "NaN stays NaN");
    CHECK(pl_ref_fp16_from_f32(INFINITY) == 0x7c00u, "Inf stays Inf");
    /* every fp16 value survives the round trip through fp32 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if (fp16_is_nan((uint16_t)h))
            continue;
        bad += pl_ref_fp16_from_f32(pl_ref_fp16_to_f32((uint16_t)h)) != h;
    }
    CHECK(bad == 0, "%d fp16 values do not round-trip", bad);
}

TEST(fp16_rounding_is_nearest_even_on_random_values)
{
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        /* magnitudes from 2^-27 to 2^17: denormals, normals and overflow */
        float f = (float)(ldexp(1.0 + (rand_bits() & 0xffffff) / 16777216.0,
                                (int)(rand_bits() % 45) - 27));
        if (rand_bits() & 1)
            f = -f;
        uint16_t h = pl_ref_fp16_from_f32(f);
        double r = pl_ref_fp16_to_f32(h), x = f, a = fabs(x);
        int ok;
        if (isinf(r)) {
            ok = a >= 65520.0;
        } else {
            /* neighbours of |h| in the fp16 grid, in double */
            uint16_t m = h & 0x7fffu;
            double up = m == 0x7bffu ? 65536.0 : pl_ref_fp16_to_f32((uint16_t)(m + 1));
            double dn = m == 0 ? -(double)pl_ref_fp16_to_f32(1) : pl_ref_fp16_to_f32((uint16_t)(m - 1));
            double d = fabs(a - fabs(r));
            ok = d <= fabs(up - a) && d <= fabs(a - dn) &&
                 !(d == fabs(up - a) && (m & 1u)) && !(d == fabs(a - dn) && (m & 1u));
        }
        if (!ok && bad++ < 5)
            CHECK(0, "%a -> 0x%04x (%a) is not the nearest even fp16", x, h, r);
    }
    CHECK(bad == 0, "%d values not rounded to the nearest even fp16", bad);
}

/* Random values with specials sprinkled in (NaN, Inf, denormals, fp16 overflow, ties). */
static float *special_random(int64_t n)
{
    float *x = kc_random(n, -3, 3);
    static const uint32_t sp[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00008000u, 0x00018000u,
                                  0x3f808000u, 0x3f818000u, 0x477ff000u, 0x47800000u, 0x33000000u,
                                  0x7f7fffffu, 0x80000001u};
    for (int64_t i = 0; i < n; i += 7)
        x[i] = f_of(sp[(i / 7) % (sizeof sp / sizeof *sp)]);
    return x;
}

TEST(conversion_kernels_match_reference_bit_for_bit)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 17, 17}, {3, 33, 40}, {64, 100, 100},
                                        {300, 768, 770}, {7, 1000, 1001}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1], ld = shapes[s][2];
        float *src = special_random(rows * ld);
        uint16_t *b1 = calloc((size_t)(rows * cols), 2), *b2 = calloc((size_t)(rows * cols), 2);
        float *f1 = kc_floats(rows * cols), *f2 = kc_floats(rows * cols);
        pl_cpu_f32_to_bf16(b1, src, rows, cols, ld);
        pl_ref_f32_to_bf16(b2, src, rows, cols, ld);
        CHECK(memcmp(b1, b2, (size_t)(rows * cols) * 2) == 0, "bf16 %lldx%lld ld %lld differs",
              (long long)rows, (long long)cols, (long long)ld);
        pl_cpu_round_fp16(f1, src, rows, cols, ld);
        pl_ref_round_fp16(f2, src, rows, cols, ld);
        int same = 1;
        for (int64_t i = 0; i < rows * cols; i++)
            same &= isnan(f1[i]) ? isnan(f2[i]) : u_of(f1[i]) == u_of(f2[i]);
        CHECK(same, "fp16 %lldx%lld ld %lld differs", (long long)rows, (long long)cols,
              (long long)ld);
        free(src), free(b1), free(b2), free(f1), free(f2);
    }
}

/* Equal as bit patterns, or both NaN. */
static int same_or_nan(const float *a, const float *b, int64_t n)
{
    int same = 1;
    for (int64_t i = 0; i < n; i++)
        same &= isnan(a[i]) ? isnan(b[i]) : u_of(a[i]) == u_of(b[i]);
    return same;
}

/* The saved activations of --bf16: rounding in place (with and without the packed
 * copy) and widening back, against the scalar reference, at sizes that take the
 * parallel path, on 1 and 2 threads. */
TEST(bf16_round_in_place_and_widen_match_reference_bit_for_bit)
{
    static const int64_t sizes[] = {1, 17, 1000, 65537, 300001};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const int64_t n = sizes[s];
        float *src = special_random(n), *x1 = kc_floats(n), *x2 = kc_floats(n);
        float *x3 = kc_floats(n), *xr = kc_floats(n), *w = kc_floats(n);
        uint16_t *h1 = calloc((size_t)n, 2), *h2 = calloc((size_t)n, 2), *hr = calloc((size_t)n, 2);
        memcpy(x1, src, (size_t)n * sizeof *src);
        memcpy(x2, src, (size_t)n * sizeof *src);
        memcpy(x3, src, (size_t)n * sizeof *src);
        memcpy(xr, src, (size_t)n * sizeof *src);
        KC_WITH_THREADS(1, pl_cpu_round_bf16(h1, x1, n));
        KC_WITH_THREADS(2, pl_cpu_round_bf16(h2, x2, n));
        KC_WITH_THREADS(2, pl_cpu_round_bf16(NULL, x3, n));
        pl_ref_round_bf16(hr, xr, n);
        int ok = 1;
        for (int64_t i = 0; i < n; i++)
            ok &= hr[i] == pl_ref_bf16_from_f32(src[i]);
        CHECK(ok, "n=%lld: the reference's bits are not bf16_from_f32's", (long long)n);
        CHECK(memcmp(h1, hr, (size_t)n * 2) == 0 && memcmp(h2, hr, (size_t)n * 2) == 0,
              "n=%lld: packed bits differ from the reference", (long long)n);
        CHECK(same_or_nan(x1, xr, n) && same_or_nan(x2, xr, n) && same_or_nan(x3, xr, n),
              "n=%lld: values rounded in place differ from the reference", (long long)n);
        KC_WITH_THREADS(2, pl_cpu_widen_bf16(w, h2, n));
        CHECK(same_or_nan(w, xr, n), "n=%lld: widening the packed bits is not the rounded value",
              (long long)n);
        pl_ref_widen_bf16(w, hr, n);
        CHECK(same_or_nan(w, xr, n), "n=%lld: reference widening differs", (long long)n);
        memcpy(x3, x1, (size_t)n * sizeof *x1); /* rounding twice changes nothing */
        pl_cpu_round_bf16(h2, x3, n);
        CHECK(same_or_nan(x3, x1, n) && memcmp(h2, hr, (size_t)n * 2) == 0,
              "n=%lld: rounding is not idempotent", (long long)n);
        free(src), free(x1), free(x2), free(x3), free(xr), free(w), free(h1), free(h2), free(hr);
    }
}

/* C = op(A) op(B) + beta C in double from A, B passed through round(). */
static void gemm_d(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, const float *C0, double *C, int64_t ldc,
                   float (*round)(float))
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t p = 0; p < K; p++) {
                float a = ta ? A[p * lda + i] : A[i * lda + p];
                float b = tb ? B[j * ldb + p] : B[p * ldb + j];
                acc += (double)round(a) * (double)round(b);
            }
            C[i * ldc + j] = beta != 0.0f ? C0[i * ldc + j] + acc : acc;
        }
}

static float round_none(float x) { return x; }
static float round_bf16(float x) { return pl_ref_bf16_to_f32(pl_ref_bf16_from_f32(x)); }
static float round_fp16(float x) { return pl_ref_fp16_to_f32(pl_ref_fp16_from_f32(x)); }

/* Max over the real columns of |C - R| / max |R| (padding compared separately). */
static double rel_err_ld(const float *C, const double *R, int64_t M, int64_t N, int64_t ldc)
{
    double e = 0, m = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            e = fmax(e, fabs((double)C[i * ldc + j] - R[i * ldc + j]));
            m = fmax(m, fabs(R[i * ldc + j]));
        }
    return e / fmax(m, 1e-300);
}

static void reduced_gemm_case(pl_gemm_precision prec, int ta, int tb, int64_t M, int64_t N,
                              int64_t K, int64_t pad, float beta)
{
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    pl_gemm_set_precision(g, prec);
    int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    float *A = kc_random((ta ? K : M) * lda, -1, 1), *B = kc_random((tb ? N : K) * ldb, -1, 1);
    float *C = kc_random(M * ldc, -1, 1), *C0 = kc_copy(C, M * ldc);
    double *R = calloc((size_t)(M * ldc), sizeof *R), *U = calloc((size_t)(M * ldc), sizeof *U);
    CHECK_OK(pl_gemm_run(g, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc));
    gemm_d(ta, tb, M, N, K, A, lda, B, ldb, beta, C0, R, ldc,
           prec == PL_GEMM_BF16 ? round_bf16 : round_fp16);
    gemm_d(ta, tb, M, N, K, A, lda, B, ldb, beta, C0, U, ldc, round_none);
    int pad_ok = 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < ldc; j++)
            pad_ok &= u_of(C[i * ldc + j]) == u_of(C0[i * ldc + j]);
    const char *name = pl_gemm_precision_name(prec);
    CHECK(pad_ok, "%s: padding of C written", name);
    /* Against the rounded inputs, only the fp32 accumulation differs (bf16 and
     * fp16 products are exact in fp32): the fp32 GEMM test's bound. */
    double er = rel_err_ld(C, R, M, N, ldc), tol_r = 4e-6 * sqrt((double)K);
    /* Against the unrounded inputs: each product carries the rounding of both
     * factors, |d(ab)| <= 2u |ab| (+ u^2) with u = 2^-8 (bf16) or 2^-11 (fp16),
     * so |C - U| <= 2u S + fp32 accumulation, S = max over C of sum_k |a b|
     * (a rigorous bound, no cancellation assumed; with beta = 1 the sum may
     * cancel C's start value, so |C| itself is no scale). fp16 has denormals
     * below 2^-14 spaced 2^-24 apart: a factor there is off by up to 2^-25
     * absolutely, K products by up to K 2^-24 (|a|, |b| <= 1). Measured as a
     * fraction of max |U|; a transposed or unconverted operand gives O(1). */
    double u = prec == PL_GEMM_BF16 ? 0x1p-8 : 0x1p-11, umax = 0, S = 0;
    for (int64_t i = 0; i < M * ldc; i++)
        umax = fmax(umax, fabs(U[i]));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t p = 0; p < K; p++)
                acc += fabs((double)(ta ? A[p * lda + i] : A[i * lda + p]) *
                            (double)(tb ? B[j * ldb + p] : B[p * ldb + j]));
            S = fmax(S, acc);
        }
    double eu = rel_err_ld(C, U, M, N, ldc);
    double tol_u = ((2 * u + u * u + 4e-6) * S + (prec == PL_GEMM_FP16 ? (double)K * 0x1p-24 : 0)) /
                   fmax(umax, 1e-300);
    kc_note(prec == PL_GEMM_BF16 ? "bf16 gemm vs rounded inputs" : "fp16 gemm vs rounded inputs", er);
    kc_note(prec == PL_GEMM_BF16 ? "bf16 gemm vs fp32 inputs" : "fp16 gemm vs fp32 inputs", eu);
    CHECK(er <= tol_r, "%s ta=%d tb=%d M=%lld N=%lld K=%lld beta=%g: vs rounded inputs %.3g > %.3g",
          name, ta, tb, (long long)M, (long long)N, (long long)K, (double)beta, er, tol_r);
    CHECK(eu <= tol_u, "%s ta=%d tb=%d M=%lld N=%lld K=%lld: vs unrounded %.3g > %.3g", name, ta,
          tb, (long long)M, (long long)N, (long long)K, eu, tol_u);
    /* ... and the precision really was reduced: with a few thousand products,
     * the rounding shows far above fp32's 4e-6 sqrt(K) (beta = 1 adds an
     * unrounded C, which dilutes it: checked on beta = 0). */
    if (M * N * K >= 4096 && beta == 0.0f)
        CHECK(eu > 0.05 * u, "%s M=%lld N=%lld K=%lld: error %.3g vs unrounded inputs is too "
              "small for %s inputs", name, (long long)M, (long long)N, (long long)K, eu, name);
    free(A), free(B), free(C), free(C0), free(R), free(U);
    pl_gemm_free(g);
}

TEST(bf16_and_fp16_gemm_match_gemm_of_rounded_inputs)
{
    static const int64_t shapes[][4] = {{1, 1, 1, 0},   {7, 13, 5, 3},     {64, 33, 130, 0},
                                        {129, 1, 64, 1}, {96, 200, 768, 16}, {3, 50, 1024, 0}};
    for (int prec = PL_GEMM_BF16; prec <= PL_GEMM_FP16; prec++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int t = 0; t < 4; t++)
                for (int beta = 0; beta < 2; beta++)
                    reduced_gemm_case((pl_gemm_precision)prec, t >> 1, t & 1, shapes[s][0],
                                      shapes[s][1], shapes[s][2], shapes[s][3], (float)beta);
}

TEST(fp16_gemm_overflows_to_inf_and_modes_switch_back)
{
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    float A[4] = {1, 2, 3, 70000.0f}, B[4] = {1, 0, 0, 1}, C[4];
    /* 70000 is finite in fp32 and bf16 but beyond fp16's 65504 */
    pl_gemm_set_precision(g, PL_GEMM_FP16);
    CHECK(pl_gemm_convert_bytes(g) == 0, "no conversion buffer before the first use");
    CHECK_OK(pl_gemm_run(g, 0, 0, 2, 2, 2, A, 2, B, 2, 0.0f, C, 2));
    /* C[1][0] = 3 * 1 + Inf * 0 = NaN, C[1][1] = 3 * 0 + Inf * 1 = Inf */
    CHECK(C[0] == 1 && C[1] == 2 && isnan(C[2]) && isinf(C[3]), "fp16: %g %g %g %g", C[0], C[1],
          C[2], C[3]);
    CHECK(pl_gemm_convert_bytes(g) > 0, "the fp16 mode holds a conversion buffer");
    pl_gemm_set_precision(g, PL_GEMM_BF16);
    CHECK_OK(pl_gemm_run(g, 0, 0, 2, 2, 2, A, 2, B, 2, 0.0f, C, 2));
    CHECK(C[3] == 70144.0f, "bf16 rounds 70000 to 70144, got %g", C[3]);
    pl_gemm_set_precision(g, PL_GEMM_FP32);
    CHECK_OK(pl_gemm_run(g, 0, 0, 2, 2, 2, A, 2, B, 2, 0.0f, C, 2));
    CHECK(C[3] == 70000.0f, "fp32 again: got %g", C[3]);
    pl_gemm_free(g);
}

TEST(bf16_gemm_results_do_not_depend_on_thread_count)
{
    int nt = omp_get_max_threads();
    int64_t M = 200, N = 300, K = 768;
    float *A = kc_random(M * K, -1, 1), *B = kc_random(N * K, -1, 1);
    float *C[2] = {kc_floats(M * N), kc_floats(M * N)};
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        pl_gemm *g = NULL;
        CHECK_OK(pl_gemm_init(&g));
        if (g) {
            pl_gemm_set_precision(g, PL_GEMM_BF16);
            CHECK_OK(pl_gemm_run(g, 0, 1, M, N, K, A, K, B, K, 0.0f, C[run], N));
        }
        pl_gemm_free(g);
    }
    omp_set_num_threads(nt);
    CHECK(kc_same_bits(C[0], C[1], M * N), "1 and 2 threads differ");
    free(A), free(B), free(C[0]), free(C[1]);
}

int main(void)
{
    kc_seed(5);
    RUN(bf16_rounding_of_special_cases);
    RUN(bf16_rounding_is_nearest_even_on_random_bit_patterns);
    RUN(fp16_rounding_of_special_cases_and_overflow_to_inf);
    RUN(fp16_rounding_is_nearest_even_on_random_values);
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        RUN(conversion_kernels_match_reference_bit_for_bit);
        RUN(bf16_round_in_place_and_widen_match_reference_bit_for_bit);
        RUN(bf16_and_fp16_gemm_match_gemm_of_rounded_inputs);
        RUN(fp16_gemm_overflows_to_inf_and_modes_switch_back);
        RUN(bf16_gemm_results_do_not_depend_on_thread_count);
        kc_print_notes();
    }
    return test_summary("kernels_precision");
}
