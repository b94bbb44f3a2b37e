/* kernels: embeddings, bias, add, GELU and LayerNorm.
 *
 * Each fast twin is compared with its reference on random inputs (bit for bit
 * where the fast twin promises the reference's order of operations), and each
 * backward of the reference is checked against float64 central finite
 * differences of a float64 forward written here: L = sum(out * R), R random,
 * so dout = R. The forwards in this file are independent re-statements of the
 * math, not calls to the kernels. */
#include "kernel_check.h"
#include "kernels/kernels.h"

/* Sizes above the kernels' 32768-element threading threshold, odd on purpose. */
#define BIG_N 67
#define BIG_C 771

/* ---- embeddings -------------------------------------------------------- */

typedef struct emb_ctx {
    const int32_t *ids;
    const double *wte;
    const float *R;
    int64_t N, C, v0, V;
} emb_ctx;

static double emb_objective(void *p)
{
    const emb_ctx *e = p;
    double s = 0.0;
    for (int64_t n = 0; n < e->N; n++) {
        int64_t row = e->ids[n] - e->v0;
        if (row < 0 || row >= e->V)
            continue;
        for (int64_t c = 0; c < e->C; c++)
            s += e->wte[row * e->C + c] * e->R[n * e->C + c];
    }
    return s;
}

/* ids in [v0 - 5, v0 + V + 5): some out of this rank's slice, many repeated. */
static int32_t *random_ids(int64_t N, int64_t v0, int64_t V)
{
    int32_t *ids = malloc((size_t)N * sizeof *ids);
    for (int64_t n = 0; n < N; n++)
        ids[n] = (int32_t)(v0 - 5 + (int64_t)(kc_uniform() * (double)(V + 10)));
    return ids;
}

TEST(embedding_vocab_parallel_slice_matches_reference_and_finite_differences)
{
    static const int64_t shapes[][4] = {/* N, C, v0, V */ {1, 3, 0, 4}, {13, 5, 7, 6},
                                        {BIG_N, BIG_C, 100, 20}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t N = shapes[s][0], C = shapes[s][1], v0 = shapes[s][2], V = shapes[s][3];
        int32_t *ids = random_ids(N, v0, V);
        float *wte = kc_random(V * C, -1, 1), *out = kc_random(N * C, -1, 1);
        float *out_ref = kc_random(N * C, -1, 1);
        pl_ref_embedding_fwd(out_ref, ids, wte, N, C, v0, V);
        KC_WITH_THREADS(1, pl_cpu_embedding_fwd(out, ids, wte, N, C, v0, V));
        CHECK(kc_same_bits(out, out_ref, N * C), "fwd N=%lld, 1 thread: cpu != ref", (long long)N);
        KC_WITH_THREADS(2, pl_cpu_embedding_fwd(out, ids, wte, N, C, v0, V));
        CHECK(kc_same_bits(out, out_ref, N * C), "fwd N=%lld, 2 threads: cpu != ref", (long long)N);
        int zero_ok = 1;
        for (int64_t n = 0; n < N; n++)
            if (ids[n] < v0 || ids[n] >= v0 + V)
                for (int64_t c = 0; c < C; c++)
                    zero_ok &= out[n * C + c] == 0.0f;
        CHECK(zero_ok, "ids outside [v0, v0+V) must give zero rows");

        float *R = kc_random(N * C, -1, 1), *dwte0 = kc_random(V * C, -1, 1);
        float *d1 = kc_copy(dwte0, V * C), *d2 = kc_copy(dwte0, V * C);
        float *dref = kc_copy(dwte0, V * C);
        KC_WITH_THREADS(1, pl_cpu_embedding_bwd(d1, R, ids, N, C, v0, V));
        KC_WITH_THREADS(2, pl_cpu_embedding_bwd(d2, R, ids, N, C, v0, V));
        pl_ref_embedding_bwd(dref, R, ids, N, C, v0, V);
        CHECK(kc_same_bits(d1, dref, V * C) && kc_same_bits(d2, dref, V * C),
              "bwd N=%lld: cpu (1 or 2 threads) != ref", (long long)N);

        float *grad = kc_floats(V * C);
        memset(grad, 0, (size_t)(V * C) * sizeof *grad);
        pl_ref_embedding_bwd(grad, R, ids, N, C, v0, V);
        double *wte_d = kc_to_double(wte, V * C);
        emb_ctx ctx = {ids, wte_d, R, N, C, v0, V};
        /* L is linear in wte: the difference quotient is exact up to float64
         * rounding; the analytic side sums up to N fp32 terms. */
        double err = kc_note("embedding bwd vs FD",
                             kc_fd_check(wte_d, V * C, grad, emb_objective, &ctx, 1e-3, 400));
        CHECK(err < 1e-5, "N=%lld: FD rel err %.3g", (long long)N, err);
        free(ids), free(wte), free(out), free(out_ref), free(R), free(dwte0), free(d1), free(d2);
        free(dref), free(grad), free(wte_d);
    }
}

typedef struct pos_ctx {
    const double *wpe;
    const float *R;
    int64_t B, T, C;
} pos_ctx;

static double pos_objective(void *p)
{
    const pos_ctx *e = p;
    double s = 0.0;
    for (int64_t b = 0; b < e->B; b++)
        for (int64_t t = 0; t < e->T; t++)
            for (int64_t c = 0; c < e->C; c++)
                s += e->wpe[t * e->C + c] * e->R[(b * e->T + t) * e->C + c];
    return s;
}

TEST(pos_embedding_matches_reference_and_finite_differences)
{
    static const int64_t shapes[][3] = {/* B, T, C */ {1, 1, 5}, {3, 7, 5}, {2, 33, 1023}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], C = shapes[s][2];
        float *wpe = kc_random((T + 2) * C, -1, 1); /* longer than T, as in a model */
        float *out = kc_random(B * T * C, -1, 1), *out_ref = kc_copy(out, B * T * C);
        pl_cpu_pos_embedding_fwd(out, wpe, B, T, C);
        pl_ref_pos_embedding_fwd(out_ref, wpe, B, T, C);
        CHECK(kc_same_bits(out, out_ref, B * T * C), "fwd B=%lld T=%lld: cpu != ref",
              (long long)B, (long long)T);

        float *R = kc_random(B * T * C, -1, 1), *d0 = kc_random(T * C, -1, 1);
        float *d1 = kc_copy(d0, T * C), *d2 = kc_copy(d0, T * C), *dref = kc_copy(d0, T * C);
        KC_WITH_THREADS(1, pl_cpu_pos_embedding_bwd(d1, R, B, T, C));
        KC_WITH_THREADS(2, pl_cpu_pos_embedding_bwd(d2, R, B, T, C));
        pl_ref_pos_embedding_bwd(dref, R, B, T, C);
        CHECK(kc_same_bits(d1, dref, T * C) && kc_same_bits(d2, dref, T * C),
              "bwd B=%lld: cpu != ref", (long long)B);

        float *grad = kc_floats(T * C);
        memset(grad, 0, (size_t)(T * C) * sizeof *grad);
        pl_ref_pos_embedding_bwd(grad, R, B, T, C);
        double *wpe_d = kc_to_double(wpe, T * C);
        pos_ctx ctx = {wpe_d, R, B, T, C};
        double err = kc_note("pos_embedding bwd vs FD",
                             kc_fd_check(wpe_d, T * C, grad, pos_objective, &ctx, 1e-3, 300));
        CHECK(err < 1e-5, "FD rel err %.3g", err); /* linear in wpe, B-term fp32 sums */
        free(wpe), free(out), free(out_ref), free(R), free(d0), free(d1), free(d2), free(dref);
        free(grad), free(wpe_d);
    }
}

/* ---- bias and add -------------------------------------------------------- */

typedef struct bias_ctx {
    const double *bias;
    const float *R;
    int64_t N, OC;
} bias_ctx;

static double bias_objective(void *p)
{
    const bias_ctx *e = p;
    double s = 0.0;
    for (int64_t n = 0; n < e->N; n++)
        for (int64_t o = 0; o < e->OC; o++)
            s += e->bias[o] * e->R[n * e->OC + o];
    return s;
}

TEST(bias_and_add_match_reference_and_finite_differences)
{
    static const int64_t shapes[][2] = {/* N, OC */ {1, 1}, {5, 3}, {BIG_N, BIG_C}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t N = shapes[s][0], OC = shapes[s][1];
        float *bias = kc_random(OC, -1, 1), *out = kc_random(N * OC, -1, 1);
        float *out_ref = kc_copy(out, N * OC);
        pl_cpu_bias_fwd(out, bias, N, OC);
        pl_ref_bias_fwd(out_ref, bias, N, OC);
        CHECK(kc_same_bits(out, out_ref, N * OC), "bias fwd N=%lld: cpu != ref", (long long)N);

        float *R = kc_random(N * OC, -1, 1), *d0 = kc_random(OC, -1, 1);
        float *d1 = kc_copy(d0, OC), *d2 = kc_copy(d0, OC), *dref = kc_copy(d0, OC);
        KC_WITH_THREADS(1, pl_cpu_bias_bwd(d1, R, N, OC));
        KC_WITH_THREADS(2, pl_cpu_bias_bwd(d2, R, N, OC));
        pl_ref_bias_bwd(dref, R, N, OC);
        CHECK(kc_same_bits(d1, dref, OC) && kc_same_bits(d2, dref, OC), "bias bwd: cpu != ref");

        memset(d1, 0, (size_t)OC * sizeof *d1);
        pl_ref_bias_bwd(d1, R, N, OC);
        double *bias_d = kc_to_double(bias, OC);
        bias_ctx ctx = {bias_d, R, N, OC};
        double err = kc_note("bias bwd vs FD",
                             kc_fd_check(bias_d, OC, d1, bias_objective, &ctx, 1e-3, 200));
        CHECK(err < 1e-5, "bias FD rel err %.3g", err); /* linear, N-term fp32 sums */

        /* add, also in place (out aliasing a) */
        float *a = kc_random(N * OC, -1, 1), *b = kc_random(N * OC, -1, 1);
        float *sum = kc_floats(N * OC), *sum_ref = kc_floats(N * OC);
        pl_cpu_add(sum, a, b, N * OC);
        pl_ref_add(sum_ref, a, b, N * OC);
        CHECK(kc_same_bits(sum, sum_ref, N * OC), "add: cpu != ref");
        pl_cpu_add(a, a, b, N * OC);
        CHECK(kc_same_bits(a, sum_ref, N * OC), "add in place: cpu != ref");
        free(bias), free(out), free(out_ref), free(R), free(d0), free(d1), free(d2), free(dref);
        free(bias_d), free(a), free(b), free(sum), free(sum_ref);
    }
}

/* ---- GELU ---------------------------------------------------------------- */

typedef struct gelu_ctx {
    const double *x;
    const float *R;
    int64_t n;
} gelu_ctx;

static double gelu_objective(void *p)
{
    const gelu_ctx *e = p;
    const double k = sqrt(2.0 / 3.14159265358979323846);
    double s = 0.0;
    for (int64_t i = 0; i < e->n; i++) {
        double x = e->x[i];
        s += 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x))) * e->R[i];
    }
    return s;
}

TEST(gelu_matches_reference_and_finite_differences)
{
    static const int64_t sizes[] = {1, 37, BIG_N * BIG_C, 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        /* [-6, 6] covers the curved middle and the start of both tails; the
         * last case, [-60, 60], the saturated tails (exp beyond its range) */
        double r = s == 3 ? 60.0 : 6.0;
        float *x = kc_random(n, -r, r), *out = kc_floats(n), *out_ref = kc_floats(n);
        float *out1 = kc_floats(n);
        KC_WITH_THREADS(1, pl_cpu_gelu_fwd(out1, x, n));
        KC_WITH_THREADS(2, pl_cpu_gelu_fwd(out, x, n));
        CHECK(kc_same_bits(out1, out, n), "fwd n=%lld: 1 and 2 threads differ", (long long)n);
        free(out1);
        pl_ref_gelu_fwd(out_ref, x, n);
        /* The cpu twin evaluates x * sigmoid(2u) with its own exp (rel err
         * 1e-7) instead of 0.5 x (1 + tanhf(u)): a few ulp of |gelu| apart. */
        double err = kc_note("gelu fwd cpu vs ref", kc_rel_err(out, out_ref, n));
        CHECK(err < 1e-6, "fwd n=%lld: rel err %.3g", (long long)n, err);

        float *R = kc_random(n, -1, 1), *d0 = kc_random(n, -1, 1);
        float *d1 = kc_copy(d0, n), *d2 = kc_copy(d0, n), *dref = kc_copy(d0, n);
        KC_WITH_THREADS(1, pl_cpu_gelu_bwd(d1, x, R, n));
        KC_WITH_THREADS(2, pl_cpu_gelu_bwd(d2, x, R, n));
        pl_ref_gelu_bwd(dref, x, R, n);
        CHECK(kc_same_bits(d1, d2, n), "bwd n=%lld: 1 and 2 threads differ", (long long)n);
        /* The reference forms sech^2 = 1 - tanh^2 in fp32, which cancels to an
         * absolute 2^-24 error, scaled by x (|x| <= 6): ~1e-6 of max |gelu'|. */
        err = kc_note("gelu bwd cpu vs ref", kc_rel_err(d1, dref, n));
        CHECK(err < 5e-6, "bwd n=%lld: rel err %.3g", (long long)n, err);

        memset(d1, 0, (size_t)n * sizeof *d1);
        pl_ref_gelu_bwd(d1, x, R, n);
        double *xd = kc_to_double(x, n);
        gelu_ctx ctx = {xd, R, n};
        /* fp32 tanhf and a handful of products: ~1e-7 relative to the
         * largest gradient; 1e-5 leaves room, a wrong formula is O(0.1). */
        err = kc_note("gelu bwd vs FD", kc_fd_check(xd, n, d1, gelu_objective, &ctx, 1e-3, 300));
        CHECK(err < 1e-5, "n=%lld: FD rel err %.3g", (long long)n, err);
        free(x), free(out), free(out_ref), free(R), free(d0), free(d1), free(d2), free(dref);
        free(xd);
    }
}

static double gelu_erf_objective(void *p)
{
    const gelu_ctx *e = p;
    double s = 0.0;
    for (int64_t i = 0; i < e->n; i++)
        s += 0.5 * e->x[i] * (1.0 + erf(e->x[i] / sqrt(2.0))) * e->R[i];
    return s;
}

/* The exact GELU (BERT's lm_head): both twins against float64 erf, backward
 * against finite differences of the float64 function, the same bits for 1 and 2
 * threads, and measurably not the tanh approximation. */
TEST(gelu_erf_matches_float64_and_finite_differences)
{
    static const int64_t sizes[] = {1, 37, BIG_N * BIG_C, 1000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const int64_t n = sizes[s];
        const double r = s == 3 ? 60.0 : 6.0;
        float *x = kc_random(n, -r, r), *out[2] = {kc_floats(n), kc_floats(n)};
        double *xd = kc_to_double(x, n), *want = kc_doubles(n);
        for (int64_t i = 0; i < n; i++)
            want[i] = 0.5 * xd[i] * (1.0 + erf(xd[i] / sqrt(2.0)));
        pl_ref_gelu_erf_fwd(out[0], x, n);
        KC_WITH_THREADS(2, pl_cpu_gelu_erf_fwd(out[1], x, n));
        for (int k = 0; k < 2; k++) {
            /* erff and a product: a few ulp */
            double err = kc_note("gelu_erf fwd vs float64", kc_rel_err_d(out[k], want, n));
            CHECK(err < 1e-6, "twin %d n=%lld: rel err %.3g", k, (long long)n, err);
        }
        float *tanh_gelu = kc_floats(n);
        pl_ref_gelu_fwd(tanh_gelu, x, n);
        if (n > 100 && r < 10) /* in [-6, 6] the approximation is off by up to ~5e-4: not this
                                * (over [-60, 60] the saturated tails hide it) */
            CHECK(kc_rel_err_d(tanh_gelu, want, n) > 1e-5, "n=%lld: indistinguishable from the "
                  "tanh approximation", (long long)n);
        float *R = kc_random(n, -1, 1), *d[3] = {kc_floats(n), kc_floats(n), kc_floats(n)};
        for (int k = 0; k < 3; k++)
            memset(d[k], 0, (size_t)n * sizeof(float));
        pl_ref_gelu_erf_bwd(d[0], x, R, n);
        KC_WITH_THREADS(1, pl_cpu_gelu_erf_bwd(d[1], x, R, n));
        KC_WITH_THREADS(2, pl_cpu_gelu_erf_bwd(d[2], x, R, n));
        CHECK(kc_same_bits(d[1], d[2], n), "bwd n=%lld: 1 and 2 threads differ", (long long)n);
        gelu_ctx ctx = {xd, R, n};
        for (int k = 0; k < 2; k++) {
            /* fp32 erff, expf and products: ~1e-7 of the largest gradient */
            double err = kc_note("gelu_erf bwd vs FD",
                                 kc_fd_check(xd, n, d[k], gelu_erf_objective, &ctx, 1e-3, 300));
            CHECK(err < 1e-5, "twin %d n=%lld: FD rel err %.3g", k, (long long)n, err);
        }
        free(x), free(out[0]), free(out[1]), free(xd), free(want), free(tanh_gelu), free(R);
        free(d[0]), free(d[1]), free(d[2]);
    }
}

/* The bf16-input GELUs (--bf16's saved fc1) are the fp32 kernels on the widened
 * values, bit for bit, and their reference twins agree with the fp32 ones. */
TEST(gelu_of_bf16_inputs_is_gelu_of_the_widened_values)
{
    static const int64_t sizes[] = {1, 37, BIG_N * BIG_C};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        float *x = kc_random(n, -6, 6), *xw = kc_floats(n), *a = kc_floats(n), *b = kc_floats(n);
        uint16_t *h = malloc((size_t)n * sizeof *h);
        pl_ref_f32_to_bf16(h, x, 1, n, n);
        for (int64_t i = 0; i < n; i++)
            xw[i] = pl_ref_bf16_to_f32(h[i]);
        KC_WITH_THREADS(2, pl_cpu_gelu_fwd(a, xw, n));
        KC_WITH_THREADS(2, pl_cpu_gelu_fwd_bf16(b, h, n));
        CHECK(kc_same_bits(a, b, n), "fwd n=%lld: bf16 input differs from fp32 gelu", (long long)n);
        pl_ref_gelu_fwd(a, xw, n);
        pl_ref_gelu_fwd_bf16(b, h, n);
        CHECK(kc_same_bits(a, b, n), "ref fwd n=%lld differs", (long long)n);

        float *R = kc_random(n, -1, 1), *d0 = kc_random(n, -1, 1);
        float *d1 = kc_copy(d0, n), *d2 = kc_copy(d0, n);
        KC_WITH_THREADS(2, pl_cpu_gelu_bwd(d1, xw, R, n));
        KC_WITH_THREADS(2, pl_cpu_gelu_bwd_bf16(d2, h, R, n));
        CHECK(kc_same_bits(d1, d2, n), "bwd n=%lld: bf16 input differs from fp32 gelu", (long long)n);
        memcpy(d1, d0, (size_t)n * sizeof *d0);
        memcpy(d2, d0, (size_t)n * sizeof *d0);
        pl_ref_gelu_bwd(d1, xw, R, n);
        pl_ref_gelu_bwd_bf16(d2, h, R, n);
        CHECK(kc_same_bits(d1, d2, n), "ref bwd n=%lld differs", (long long)n);
        /* the exact GELU's (post-LN BERT's layers): its reference on the widened values */
        pl_ref_gelu_erf_fwd(a, xw, n);
        KC_WITH_THREADS(2, pl_cpu_gelu_erf_fwd_bf16(b, h, n));
        CHECK(kc_same_bits(a, b, n), "erf fwd n=%lld: bf16 input differs", (long long)n);
        pl_ref_gelu_erf_fwd_bf16(b, h, n);
        CHECK(kc_same_bits(a, b, n), "erf ref fwd n=%lld differs", (long long)n);
        memcpy(d1, d0, (size_t)n * sizeof *d0);
        memcpy(d2, d0, (size_t)n * sizeof *d0);
        pl_ref_gelu_erf_bwd(d1, xw, R, n);
        KC_WITH_THREADS(2, pl_cpu_gelu_erf_bwd_bf16(d2, h, R, n));
        CHECK(kc_same_bits(d1, d2, n), "erf bwd n=%lld: bf16 input differs", (long long)n);
        memcpy(d2, d0, (size_t)n * sizeof *d0);
        pl_ref_gelu_erf_bwd_bf16(d2, h, R, n);
        CHECK(kc_same_bits(d1, d2, n), "erf ref bwd n=%lld differs", (long long)n);
        free(x), free(xw), free(a), free(b), free(h), free(R), free(d0), free(d1), free(d2);
    }
}

/* ---- LayerNorm ------------------------------------------------------------ */

typedef struct ln_ctx {
    const double *inp, *weight, *bias;
    const float *R;
    int64_t N, C;
    double eps;
} ln_ctx;

static double ln_objective(void *p)
{
    const ln_ctx *e = p;
    double s = 0.0;
    for (int64_t n = 0; n < e->N; n++) {
        const double *x = e->inp + n * e->C;
        double m = 0.0, v = 0.0;
        for (int64_t c = 0; c < e->C; c++)
            m += x[c];
        m /= (double)e->C;
        for (int64_t c = 0; c < e->C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= (double)e->C; /* biased, as PyTorch and Megatron */
        double r = 1.0 / sqrt(v + e->eps);
        for (int64_t c = 0; c < e->C; c++)
            s += ((x[c] - m) * r * e->weight[c] + e->bias[c]) * e->R[n * e->C + c];
    }
    return s;
}

TEST(layernorm_matches_reference_and_finite_differences)
{
    static const int64_t shapes[][2] = {/* N, C */ {1, 3}, {3, 7}, {5, 64}, {BIG_N, BIG_C}};
    /* C >= 3: with C = 2 the normalized row is (-1, 1) whatever the input,
     * the input gradient is only the eps term, and relative errors are noise. */
    const float eps = 1e-5f;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t N = shapes[s][0], C = shapes[s][1];
        /* offset rows (mean ~0.5) so the two-pass mean/variance matters */
        float *inp = kc_random(N * C, -0.5, 1.5), *w = kc_random(C, 0.5, 1.5);
        float *b = kc_random(C, -0.5, 0.5);
        float *out = kc_floats(N * C), *mean = kc_floats(N), *rstd = kc_floats(N);
        float *out_r = kc_floats(N * C), *mean_r = kc_floats(N), *rstd_r = kc_floats(N);
        KC_WITH_THREADS(1, pl_cpu_layernorm_fwd(out_r, mean_r, rstd_r, inp, w, b, N, C, eps));
        KC_WITH_THREADS(2, pl_cpu_layernorm_fwd(out, mean, rstd, inp, w, b, N, C, eps));
        CHECK(kc_same_bits(out, out_r, N * C) && kc_same_bits(mean, mean_r, N) &&
                  kc_same_bits(rstd, rstd_r, N),
              "fwd N=%lld: 1 and 2 threads differ", (long long)N);
        pl_ref_layernorm_fwd(out_r, mean_r, rstd_r, inp, w, b, N, C, eps);
        /* mean and variance are sums of C fp32 terms, sequential in the
         * reference and in vector lanes on the cpu side: up to C * 2^-24
         * (4.6e-5 at C = 771) apart, sqrt(C) * 2^-24 (1.7e-6) typically, times
         * |xhat| ~ 1.7 over max |out| ~ 3. */
        double err = kc_note("layernorm fwd cpu vs ref",
                             fmax(kc_rel_err(out, out_r, N * C),
                                  fmax(kc_rel_err(mean, mean_r, N), kc_rel_err(rstd, rstd_r, N))));
        CHECK(err < 1e-5, "fwd N=%lld C=%lld: rel err %.3g", (long long)N, (long long)C, err);

        float *R = kc_random(N * C, -1, 1);
        float *dx0 = kc_random(N * C, -1, 1), *dw0 = kc_random(C, -1, 1), *db0 = kc_random(C, -1, 1);
        float *dx[3], *dw[3], *db[3]; /* cpu 1 thread, cpu 2 threads, ref */
        for (int k = 0; k < 3; k++)
            dx[k] = kc_copy(dx0, N * C), dw[k] = kc_copy(dw0, C), db[k] = kc_copy(db0, C);
        KC_WITH_THREADS(1, pl_cpu_layernorm_bwd(dx[0], dw[0], db[0], R, inp, w, mean_r, rstd_r, N, C));
        KC_WITH_THREADS(2, pl_cpu_layernorm_bwd(dx[1], dw[1], db[1], R, inp, w, mean_r, rstd_r, N, C));
        pl_ref_layernorm_bwd(dx[2], dw[2], db[2], R, inp, w, mean_r, rstd_r, N, C);
        CHECK(kc_same_bits(dx[0], dx[1], N * C) && kc_same_bits(dw[0], dw[1], C) &&
                  kc_same_bits(db[0], db[1], C),
              "bwd N=%lld: 1 and 2 threads differ", (long long)N);
        CHECK(kc_same_bits(db[0], db[2], C), "dbias: cpu != ref (same order of sums)");
        err = kc_note("layernorm bwd cpu vs ref",
                      fmax(kc_rel_err(dx[0], dx[2], N * C), kc_rel_err(dw[0], dw[2], C)));
        CHECK(err < 1e-5, "bwd N=%lld C=%lld: rel err %.3g", (long long)N, (long long)C, err);

        /* finite differences of the reference's gradients, from zero */
        float *gx = kc_floats(N * C), *gw = kc_floats(C), *gb = kc_floats(C);
        memset(gx, 0, (size_t)(N * C) * sizeof *gx);
        memset(gw, 0, (size_t)C * sizeof *gw);
        memset(gb, 0, (size_t)C * sizeof *gb);
        pl_ref_layernorm_bwd(gx, gw, gb, R, inp, w, mean_r, rstd_r, N, C);
        double *inp_d = kc_to_double(inp, N * C), *w_d = kc_to_double(w, C);
        double *b_d = kc_to_double(b, C);
        ln_ctx ctx = {inp_d, w_d, b_d, R, N, C, eps};
        /* dinp: ~C fp32 terms per row mean, times rstd ~ 3.5: 1e-6 typical;
         * 1e-4 is far below the O(1) error of any wrong term. */
        double ex = kc_fd_check(inp_d, N * C, gx, ln_objective, &ctx, 1e-3, 200);
        double ew = kc_fd_check(w_d, C, gw, ln_objective, &ctx, 1e-3, 200);
        double eb = kc_fd_check(b_d, C, gb, ln_objective, &ctx, 1e-3, 200);
        kc_note("layernorm dinp vs FD", ex);
        kc_note("layernorm dweight vs FD", ew);
        kc_note("layernorm dbias vs FD", eb);
        CHECK(ex < 1e-4 && ew < 1e-4 && eb < 1e-4, "N=%lld C=%lld: FD rel err x %.3g w %.3g b %.3g",
              (long long)N, (long long)C, ex, ew, eb);
        for (int k = 0; k < 3; k++)
            free(dx[k]), free(dw[k]), free(db[k]);
        free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(out_r), free(mean_r);
        free(rstd_r), free(R), free(dx0), free(dw0), free(db0), free(gx), free(gw), free(gb);
        free(inp_d), free(w_d), free(b_d);
    }
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(2);
        RUN(embedding_vocab_parallel_slice_matches_reference_and_finite_differences);
        RUN(pos_embedding_matches_reference_and_finite_differences);
        RUN(bias_and_add_match_reference_and_finite_differences);
        RUN(gelu_matches_reference_and_finite_differences);
        RUN(gelu_of_bf16_inputs_is_gelu_of_the_widened_values);
        RUN(gelu_erf_matches_float64_and_finite_differences);
        RUN(layernorm_matches_reference_and_finite_differences);
        kc_print_notes();
    }
    return test_summary("kernels_pointwise");
}
