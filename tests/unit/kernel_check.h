/* Helpers shared by the kernel test suites (tests/unit/test_kernels_*.c).
 *
 * A seeded random generator (inputs are never zero arrays), normwise relative
 * errors, a float64 central finite-difference checker, and a table of the
 * worst errors seen, printed at the end of a suite as "  worst NAME: E".
 *
 * Relative errors are normwise: max_i |a_i - b_i| / max_i |b_i|. Per-element
 * ratios blow up on the inevitable entries that are near zero by
 * cancellation; the norm ratio is what fp32 rounding bounds (about
 * K * 2^-24 for a sum of K terms, typically sqrt(K) * 2^-24). */
#ifndef PL_TEST_KERNEL_CHECK_H
#define PL_TEST_KERNEL_CHECK_H

#include "test.h"

#include "kernels/kernels.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t kc_rng_state = 0x9e3779b97f4a7c15ull;

static inline void kc_seed(uint64_t s) { kc_rng_state = s * 0x9e3779b97f4a7c15ull + 1; }

/* Uniform in [0, 1). */
static inline double kc_uniform(void)
{
    kc_rng_state ^= kc_rng_state << 13;
    kc_rng_state ^= kc_rng_state >> 7;
    kc_rng_state ^= kc_rng_state << 17;
    return (double)(kc_rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static inline void kc_fill(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * kc_uniform());
}

static inline float *kc_floats(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "test: out of memory (%lld floats)\n", (long long)n);
        exit(2);
    }
    return p;
}

static inline double *kc_doubles(int64_t n)
{
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "test: out of memory (%lld doubles)\n", (long long)n);
        exit(2);
    }
    return p;
}

static inline float *kc_random(int64_t n, double lo, double hi)
{
    float *p = kc_floats(n);
    kc_fill(p, n, lo, hi);
    return p;
}

static inline float *kc_copy(const float *x, int64_t n)
{
    float *p = kc_floats(n);
    memcpy(p, x, (size_t)n * sizeof *p);
    return p;
}

static inline double *kc_to_double(const float *x, int64_t n)
{
    double *p = kc_doubles(n);
    for (int64_t i = 0; i < n; i++)
        p[i] = x[i];
    return p;
}

/* max |a - b| / max |b| (0 when both are all zero). */
static inline double kc_rel_err(const float *a, const float *b, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        num = d > num || d != d ? d : num;
        den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
    }
    return den > 0.0 ? num / den : num;
}

static inline double kc_rel_err_d(const float *a, const double *b, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        num = d > num || d != d ? d : num;
        den = fabs(b[i]) > den ? fabs(b[i]) : den;
    }
    return den > 0.0 ? num / den : num;
}

/* ---- worst errors seen, by name ---------------------------------------- */

#define KC_MAX_NOTES 64
static struct {
    const char *name;
    double worst;
} kc_notes[KC_MAX_NOTES];
static int kc_nnotes;

/* Records err under name (a string literal) and returns it. */
static inline double kc_note(const char *name, double err)
{
    for (int i = 0; i < kc_nnotes; i++)
        if (strcmp(kc_notes[i].name, name) == 0) {
            if (err > kc_notes[i].worst || err != err)
                kc_notes[i].worst = err;
            return err;
        }
    if (kc_nnotes < KC_MAX_NOTES) {
        kc_notes[kc_nnotes].name = name;
        kc_notes[kc_nnotes].worst = err;
        kc_nnotes++;
    }
    return err;
}

static inline void kc_print_notes(void)
{
    for (int i = 0; i < kc_nnotes; i++)
        printf("  worst %-36s %.2e\n", kc_notes[i].name, kc_notes[i].worst);
}

/* ---- instruction sets of the cpu twins ---------------------------------- */

/* Makes the cpu twins run isa if this CPU and build have it: prints
 * "# cpu twins: NAME", clears the table of worst errors and returns 1; else
 * says so and returns 0. Suites run all their tests once per instruction set
 * (portable, then AVX-512), so both builds of every cpu kernel meet every
 * check against the reference and the finite differences. */
static inline int kc_use_isa(pl_isa isa)
{
    if (pl_cpu_isa_set(isa) != isa) {
        printf("# cpu twins: %s not available here, skipped\n", pl_cpu_isa_name(isa));
        return 0;
    }
    printf("# cpu twins: %s\n", pl_cpu_isa_name(isa));
    kc_nnotes = 0;
    return 1;
}

/* ---- float64 central finite differences ---------------------------------- */

/* Objective of the float64 forward: reads its inputs through ctx. */
typedef double (*kc_objective)(void *ctx);

/* Compares analytic[i] with (f(x + h e_i) - f(x - h e_i)) / 2h for the
 * entries of x (a float64 input of f, restored afterwards): all of them when
 * n <= max_checks, else max_checks entries at a fixed stride. Returns the
 * normwise relative error over the checked entries. With h = 1e-3 the
 * truncation error is h^2 f''' / 6 ~ 1e-7 relative for these smooth
 * objectives, and float64 rounding (1e-16 / h) is negligible, so what remains
 * is the fp32 rounding of the analytic gradient. */
static inline double kc_fd_check(double *x, int64_t n, const float *analytic, kc_objective f,
                                 void *ctx, double h, int64_t max_checks)
{
    int64_t stride = n <= max_checks ? 1 : (n + max_checks - 1) / max_checks;
    double num = 0.0, den = 0.0;
    for (int64_t i = (stride > 1 ? stride / 3 : 0); i < n; i += stride) {
        double x0 = x[i];
        x[i] = x0 + h;
        double fp = f(ctx);
        x[i] = x0 - h;
        double fm = f(ctx);
        x[i] = x0;
        double fd = (fp - fm) / (2.0 * h);
        double d = fabs(fd - (double)analytic[i]);
        num = d > num || d != d ? d : num;
        den = fabs(fd) > den ? fabs(fd) : den;
    }
    return den > 0.0 ? num / den : num;
}

/* sum(out * R) in float64. */
static inline double kc_dot(const double *out, const float *R, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += out[i] * (double)R[i];
    return s;
}

/* Runs the statement(s) with n OpenMP threads, then restores the previous count. */
#define KC_WITH_THREADS(n, ...)                                                                    \
    do {                                                                                           \
        int kc_nt_ = omp_get_max_threads();                                                       \
        omp_set_num_threads(n);                                                                    \
        __VA_ARGS__;                                                                               \
        omp_set_num_threads(kc_nt_);                                                               \
    } while (0)

/* Bitwise equality of two float arrays. */
static inline int kc_same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

#endif
