/* kernels: AdamW and the sum of squares (gradient norm). */
#include "kernel_check.h"
#include "kernels/kernels.h"

TEST(adamw_follows_pytorch_formula_for_three_steps_with_bias_correction)
{
    /* Hand-evaluated in float64 from the header's formula, step by step. */
    float p[4] = {0.5f, -1.25f, 2.0f, 0.0625f}, m[4] = {0}, v[4] = {0};
    float pr[4], mr[4], vr[4];
    memcpy(pr, p, sizeof p), memcpy(mr, m, sizeof m), memcpy(vr, v, sizeof v);
    double pd[4], md[4] = {0}, vd[4] = {0};
    for (int i = 0; i < 4; i++)
        pd[i] = p[i];
    const float grads[3][4] = {{0.1f, -0.2f, 0.3f, -0.4f},
                               {-0.05f, 0.25f, 0.125f, 1.5f},
                               {0.2f, 0.0f, -0.3f, 0.01f}};
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
        pl_cpu_adamw(p, grads[t - 1], m, v, 4, lr, b1, b2, eps, wd, bc1, bc2, scale);
        pl_ref_adamw(pr, grads[t - 1], mr, vr, 4, lr, b1, b2, eps, wd, bc1, bc2, scale);
        for (int i = 0; i < 4; i++) {
            double g = (double)grads[t - 1][i] * scale;
            pd[i] *= 1.0 - (double)lr * wd;
            md[i] = b1 * md[i] + (1.0 - b1) * g;
            vd[i] = b2 * vd[i] + (1.0 - b2) * g * g;
            pd[i] -= ((double)lr / bc1) * md[i] / (sqrt(vd[i]) / sqrt((double)bc2) + eps);
        }
    }
    /* Three steps of a dozen fp32 operations each: a few ulp of |p| (~2^-22). */
    double err = 0.0;
    for (int i = 0; i < 4; i++) {
        err = fmax(err, fabs(p[i] - pd[i]) / fabs(pd[i]));
        err = fmax(err, fabs(m[i] - md[i]) / fmax(fabs(md[i]), 1e-30));
    }
    kc_note("adamw vs float64 formula", err);
    CHECK(err < 1e-6, "rel err %.3g vs the hand-evaluated formula", err);
    CHECK(memcmp(p, pr, sizeof p) == 0 && memcmp(m, mr, sizeof m) == 0 &&
              memcmp(v, vr, sizeof v) == 0,
          "cpu and ref differ on the hand-evaluated case");
    /* weight decay acts on a zero-gradient element: p only shrinks by (1 - lr wd) */
    CHECK(fabs(pd[1]) < 1.25 && p[1] < 0.0f, "element 1 decayed: %g", p[1]);
}

TEST(adamw_cpu_equals_reference_bit_for_bit_on_any_thread_count)
{
    const int64_t n = 100003; /* threaded, not a multiple of the block */
    float *g = kc_random(n, -1, 1), *p0 = kc_random(n, -1, 1), *m0 = kc_random(n, -0.1, 0.1);
    float *v0 = kc_random(n, 0, 0.01);
    float *p[3], *m[3], *v[3];
    for (int k = 0; k < 3; k++)
        p[k] = kc_copy(p0, n), m[k] = kc_copy(m0, n), v[k] = kc_copy(v0, n);
    const float args[] = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f - 0.9f * 0.9f, 1.0f - 0.95f * 0.95f,
                          0.7f};
#define ADAM_ARGS args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7]
    KC_WITH_THREADS(1, pl_cpu_adamw(p[0], g, m[0], v[0], n, ADAM_ARGS));
    KC_WITH_THREADS(2, pl_cpu_adamw(p[1], g, m[1], v[1], n, ADAM_ARGS));
    pl_ref_adamw(p[2], g, m[2], v[2], n, ADAM_ARGS);
#undef ADAM_ARGS
    for (int k = 0; k < 2; k++)
        CHECK(kc_same_bits(p[k], p[2], n) && kc_same_bits(m[k], m[2], n) &&
                  kc_same_bits(v[k], v[2], n),
              "%d thread(s): cpu != ref", k + 1);
    CHECK(!kc_same_bits(p[2], p0, n), "the update changed nothing");
    for (int k = 0; k < 3; k++)
        free(p[k]), free(m[k]), free(v[k]);
    free(g), free(p0), free(m0), free(v0);
}

TEST(sumsq_is_exact_on_integers_and_independent_of_threads)
{
    static const int64_t sizes[] = {0, 1, 7, 64, 1000, 100003, 3000017};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        float *x = kc_floats(n);
        int64_t exact = 0;
        for (int64_t i = 0; i < n; i++) {
            int k = (int)(kc_uniform() * 201.0) - 100; /* [-100, 100] */
            x[i] = (float)k;
            exact += (int64_t)k * k;
        }
        /* every partial sum is an integer below 2^53: float64 adds them exactly */
        double c1, c2, r = pl_ref_sumsq(x, n);
        KC_WITH_THREADS(1, c1 = pl_cpu_sumsq(x, n));
        KC_WITH_THREADS(2, c2 = pl_cpu_sumsq(x, n));
        CHECK(r == (double)exact && c1 == (double)exact && c2 == (double)exact,
              "n=%lld: exact %lld, ref %.17g, cpu %.17g / %.17g", (long long)n, (long long)exact,
              r, c1, c2);
        /* non-integers: fixed blocking, so 1 and 2 threads agree bit for bit */
        kc_fill(x, n, -1, 1);
        r = pl_ref_sumsq(x, n);
        KC_WITH_THREADS(1, c1 = pl_cpu_sumsq(x, n));
        KC_WITH_THREADS(2, c2 = pl_cpu_sumsq(x, n));
        CHECK(memcmp(&c1, &c2, sizeof c1) == 0, "n=%lld: 1 and 2 threads differ", (long long)n);
        double err = n ? kc_note("sumsq cpu vs ref", fabs(c1 - r) / r) : 0.0;
        /* The reference adds n positive terms in sequence: relative error at
         * most n 2^-53 (3e-10 for 3M), about sqrt(n) 2^-53 in practice. */
        CHECK(err < 1e-11, "n=%lld: rel err %.3g", (long long)n, err);
        free(x);
    }
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(3);
        RUN(adamw_follows_pytorch_formula_for_three_steps_with_bias_correction);
        RUN(adamw_cpu_equals_reference_bit_for_bit_on_any_thread_count);
        RUN(sumsq_is_exact_on_integers_and_independent_of_threads);
        kc_print_notes();
    }
    return test_summary("kernels_optim");
}
