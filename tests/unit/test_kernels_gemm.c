/* kernels/gemm: the oneDNN GEMM against the naive reference twin. */
#include "base/alloc.h"
#include "kernel_check.h"
#include "kernels/kernels.h"

/* A GEMM case: C (M, N) with row stride ldc, leading dimensions padded by
 * `pad` beyond the width so strides are exercised. */
typedef struct gcase {
    int64_t M, N, K, pad;
} gcase;

/* Runs pl_gemm_run and pl_ref_gemm on the same random operands (C starts
 * random, so beta = 1 accumulates onto something) and returns the normwise
 * relative error; checks that padding columns of C are untouched. */
static double gemm_vs_ref(pl_gemm *g, int ta, int tb, gcase c, float beta)
{
    int64_t arows = ta ? c.K : c.M, acols = ta ? c.M : c.K;
    int64_t brows = tb ? c.N : c.K, bcols = tb ? c.K : c.N;
    int64_t lda = acols + c.pad, ldb = bcols + c.pad, ldc = c.N + c.pad;
    float *A = kc_random(arows * lda, -1, 1), *B = kc_random(brows * ldb, -1, 1);
    float *C = kc_random(c.M * ldc, -1, 1), *Cref = kc_copy(C, c.M * ldc);
    CHECK_OK(pl_gemm_run(g, ta, tb, c.M, c.N, c.K, A, lda, B, ldb, beta, C, ldc));
    pl_ref_gemm(ta, tb, c.M, c.N, c.K, A, lda, B, ldb, beta, Cref, ldc);
    int pad_ok = 1;
    for (int64_t i = 0; i < c.M; i++)
        for (int64_t j = c.N; j < ldc; j++)
            pad_ok &= C[i * ldc + j] == Cref[i * ldc + j];
    CHECK(pad_ok, "ta=%d tb=%d: padding of C was written", ta, tb);
    double err = kc_rel_err(C, Cref, c.M * ldc);
    free(A), free(B), free(C), free(Cref);
    return err;
}

TEST(gemm_matches_reference_for_all_transposes_beta_and_strides)
{
    static const gcase cases[] = {
        {1, 1, 1, 0},    {7, 13, 5, 3},    {64, 33, 130, 0}, {1, 300, 257, 5},
        {129, 1, 64, 1}, {96, 200, 768, 16}, {3, 50, 1024, 0},
    };
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int t = 0; t < 4; t++)
            for (int beta = 0; beta < 2; beta++) {
                double err = kc_note("gemm vs ref", gemm_vs_ref(g, t >> 1, t & 1, cases[i], (float)beta));
                /* Both sides sum K products of numbers in [-1, 1] in fp32, in
                 * different orders (oneDNN blocks K and uses FMA). The
                 * difference of two such sums is bounded by ~2K * 2^-24 *
                 * sum|a b| ~ K^2 * 2^-23 / 2 in the worst case, but grows like
                 * sqrt(K) * 2^-24 * |C| in practice; 4e-6 * sqrt(K) leaves a 10x
                 * margin over the observed errors while a wrong transpose or
                 * stride gives O(1). */
                double tol = 4e-6 * sqrt((double)cases[i].K);
                CHECK(err <= tol, "M=%lld N=%lld K=%lld ta=%d tb=%d beta=%d: rel err %.3g > %.3g",
                      (long long)cases[i].M, (long long)cases[i].N, (long long)cases[i].K, t >> 1,
                      t & 1, beta, err, tol);
            }
    pl_gemm_free(g);
}

TEST(gemm_prepare_then_run_is_repeatable_and_many_shapes_grow_the_cache)
{
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    /* 80 distinct shapes: more than half the initial 64-slot table. */
    for (int64_t n = 1; n <= 80; n++)
        CHECK_OK(pl_gemm_prepare(g, 0, 1, 5, n, 7, 7, 7, n, 0.0f));
    float *A = kc_random(5 * 7, -1, 1), *B = kc_random(80 * 7, -1, 1);
    float *C1 = kc_floats(5 * 80), *C2 = kc_floats(5 * 80), *Cr = kc_floats(5 * 80);
    for (int64_t n = 1; n <= 80; n += 13) {
        CHECK_OK(pl_gemm_run(g, 0, 1, 5, n, 7, A, 7, B, 7, 0.0f, C1, n));
        CHECK_OK(pl_gemm_run(g, 0, 1, 5, n, 7, A, 7, B, 7, 0.0f, C2, n));
        pl_ref_gemm(0, 1, 5, n, 7, A, 7, B, 7, 0.0f, Cr, n);
        CHECK(kc_same_bits(C1, C2, 5 * n), "n=%lld: two runs differ", (long long)n);
        CHECK(kc_rel_err(C1, Cr, 5 * n) < 1e-5, "n=%lld: rel err %.3g", (long long)n,
              kc_rel_err(C1, Cr, 5 * n));
    }
    free(A), free(B), free(C1), free(C2), free(Cr);
    pl_gemm_free(g);
}

TEST(gemm_degenerate_sizes_and_bad_arguments)
{
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 1, 1, 1, 1, 1}, C[6] = {7, 7, 7, 7, 7, 7};
    CHECK_OK(pl_gemm_run(g, 0, 0, 2, 3, 0, A, 1, B, 3, 1.0f, C, 3));
    CHECK(C[0] == 7 && C[5] == 7, "K=0, beta=1 must leave C");
    CHECK_OK(pl_gemm_run(g, 0, 0, 2, 3, 0, A, 1, B, 3, 0.0f, C, 3));
    CHECK(C[0] == 0 && C[5] == 0, "K=0, beta=0 must zero C");
    CHECK_OK(pl_gemm_run(g, 0, 0, 0, 3, 2, A, 2, B, 3, 0.0f, C, 3));
    pl_status st = pl_gemm_run(g, 0, 0, 2, 3, 2, A, 2, B, 3, 0.5f, C, 3);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "beta"), "beta 0.5: %d %s", st,
          pl_error_msg());
    st = pl_gemm_run(g, 0, 0, 2, 3, 2, A, 1, B, 3, 0.0f, C, 3);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "lda=1"), "lda < K: %d %s", st,
          pl_error_msg());
    st = pl_gemm_prepare(g, 1, 1, 2, 3, 2, 2, 1, 3, 0.0f);
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "ldb >= K"), "ldb < K with tb: %d %s", st,
          pl_error_msg());
    pl_gemm_free(g);
}

TEST(gemm_init_allocation_failures_come_back_cleanly)
{
    for (int64_t k = 0; k < 3; k++) {
        int64_t live = pl_alloc_live();
        pl_gemm *g = (pl_gemm *)1;
        pl_alloc_fail_after(k);
        pl_status st = pl_gemm_init(&g);
        pl_alloc_fail_after(-1);
        if (st == PL_OK) {
            pl_gemm_free(g);
            break;
        }
        CHECK(st == PL_ERR_NOMEM && g == NULL, "fail after %lld: status %d", (long long)k, st);
        CHECK(pl_alloc_live() == live, "fail after %lld: %lld blocks leaked", (long long)k,
              (long long)(pl_alloc_live() - live));
    }
}

TEST(gemm_cache_growth_failure_leaves_a_working_context)
{
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    /* 32 shapes fill half of the 64-slot table; the 33rd must grow it. */
    for (int64_t n = 1; n <= 32; n++)
        CHECK_OK(pl_gemm_prepare(g, 0, 0, 3, n, 2, 2, n, n, 0.0f));
    int64_t live = pl_alloc_live();
    pl_alloc_fail_after(0);
    pl_status st = pl_gemm_prepare(g, 0, 0, 3, 33, 2, 2, 33, 33, 0.0f);
    pl_alloc_fail_after(-1);
    CHECK(st == PL_ERR_NOMEM, "growth under allocation failure: status %d", st);
    CHECK(pl_alloc_live() == live, "%lld blocks leaked", (long long)(pl_alloc_live() - live));
    float A[6] = {1, 2, 3, 4, 5, 6}, B[66], Cm[99], Cr[99];
    for (int i = 0; i < 66; i++)
        B[i] = (float)(i % 7) - 3.0f;
    CHECK_OK(pl_gemm_run(g, 0, 0, 3, 33, 2, A, 2, B, 33, 0.0f, Cm, 33));
    pl_ref_gemm(0, 0, 3, 33, 2, A, 2, B, 33, 0.0f, Cr, 33);
    CHECK(kc_same_bits(Cm, Cr, 99), "after the failure: wrong product"); /* small integers: exact */
    CHECK_OK(pl_gemm_run(g, 0, 0, 3, 1, 2, A, 2, B, 1, 0.0f, Cm, 1)); /* an old shape still works */
    pl_gemm_free(g);
}

/* The GEMM shapes of the LM head and of a layer's backward, with contexts
 * created under 1 and under 2 threads (oneDNN fixes its partitioning when a
 * primitive is created): the bits must agree for the kernels' thread-count
 * independence to hold. */
TEST(gemm_results_do_not_depend_on_thread_count)
{
    static const struct {
        int ta, tb;
        int64_t M, N, K;
    } shapes[] = {
        {0, 1, 64, 96, 48}, {0, 0, 64, 48, 96}, {1, 0, 96, 48, 64}, {1, 0, 48, 48, 512},
        {0, 1, 5, 11, 7},   {1, 0, 11, 7, 5},   {1, 0, 7, 9, 300},
        {0, 1, 1024, 256, 768}, {0, 0, 1024, 768, 256}, {1, 0, 256, 768, 1024},
    };
    int nt = omp_get_max_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int ta = shapes[s].ta, tb = shapes[s].tb;
        int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        int64_t lda = ta ? M : K, ldb = tb ? K : N;
        float *A = kc_random(M * K, -1, 1), *B = kc_random(K * N, -1, 1);
        float *C[2];
        C[0] = kc_random(M * N, -1, 1);
        C[1] = kc_copy(C[0], M * N);
        for (int run = 0; run < 2; run++) {
            omp_set_num_threads(run + 1);
            pl_gemm *g = NULL;
            CHECK_OK(pl_gemm_init(&g));
            if (g)
                CHECK_OK(pl_gemm_run(g, ta, tb, M, N, K, A, lda, B, ldb, 1.0f, C[run], N));
            pl_gemm_free(g);
        }
        CHECK(kc_same_bits(C[0], C[1], M * N), "ta=%d tb=%d M=%lld N=%lld K=%lld: 1 and 2 threads differ",
              ta, tb, (long long)M, (long long)N, (long long)K);
        omp_set_num_threads(nt);
        free(A), free(B), free(C[0]), free(C[1]);
    }
}

int main(void)
{
    kc_seed(1);
    RUN(gemm_matches_reference_for_all_transposes_beta_and_strides);
    RUN(gemm_prepare_then_run_is_repeatable_and_many_shapes_grow_the_cache);
    RUN(gemm_degenerate_sizes_and_bad_arguments);
    RUN(gemm_init_allocation_failures_come_back_cleanly);
    RUN(gemm_cache_growth_failure_leaves_a_working_context);
    RUN(gemm_results_do_not_depend_on_thread_count);
    kc_print_notes();
    return test_summary("kernels_gemm");
}
