/* kernels: the LM head fused with softmax cross-entropy.
 *
 * Both twins against a naive float64 cross-entropy over the full (N, V)
 * logits written here (loss and its analytic gradient), against float64
 * finite differences of that loss, split into vocab-parallel slices, and with
 * 1 and 2 threads. Shapes cover N = 1, V not a multiple of the chunk, a chunk
 * equal to and larger than V. */
#include "kernel_check.h"
#include "kernels/kernels.h"

typedef struct lshape {
    int64_t N, C, V, chunk;
} lshape;

typedef pl_status (*stats_fn)(float *, float *, float *, const float *, const float *,
                              const float *, const int32_t *, int64_t, int64_t, int64_t, int64_t,
                              int64_t, float *, pl_gemm *);
typedef pl_status (*bwd_fn)(float *, float *, float *, const float *, const float *, const float *,
                            const int32_t *, const float *, const float *, int64_t, int64_t,
                            int64_t, int64_t, int64_t, float *, int, pl_gemm *);
static const stats_fn stats_twins[2] = {pl_ref_lmhead_stats, pl_cpu_lmhead_stats};
static const bwd_fn bwd_twins[2] = {pl_ref_lmhead_bwd, pl_cpu_lmhead_bwd};

/* Naive float64 cross-entropy of the full vocabulary, logits x w^T + b (b may
 * be NULL): loss (N) and, if dx is not NULL, the gradient of sum(dloss * loss)
 * with respect to x, w and (db not NULL) b. */
static void naive_ce_bias(double *loss, double *dx, double *dw, double *db, const double *x,
                          const double *w, const double *b, const int32_t *targets,
                          const float *dloss, lshape s)
{
    const int64_t N = s.N, C = s.C, V = s.V;
    double *lg = kc_doubles(V);
    if (dx) {
        memset(dx, 0, (size_t)(N * C) * sizeof *dx);
        memset(dw, 0, (size_t)(V * C) * sizeof *dw);
    }
    if (db)
        memset(db, 0, (size_t)V * sizeof *db);
    for (int64_t n = 0; n < N; n++) {
        double mx = -INFINITY, z = 0.0;
        for (int64_t v = 0; v < V; v++) {
            double d = b ? b[v] : 0.0;
            for (int64_t c = 0; c < C; c++)
                d += x[n * C + c] * w[v * C + c];
            lg[v] = d;
            mx = fmax(mx, d);
        }
        for (int64_t v = 0; v < V; v++)
            z += exp(lg[v] - mx);
        loss[n] = mx + log(z) - lg[targets[n]];
        if (!dx)
            continue;
        for (int64_t v = 0; v < V; v++) {
            double g = (exp(lg[v] - mx) / z - (v == targets[n])) * dloss[n];
            if (db)
                db[v] += g;
            for (int64_t c = 0; c < C; c++) {
                dx[n * C + c] += g * w[v * C + c];
                dw[v * C + c] += g * x[n * C + c];
            }
        }
    }
    free(lg);
}

static void naive_ce(double *loss, double *dx, double *dw, const double *x, const double *w,
                     const int32_t *targets, const float *dloss, lshape s)
{
    naive_ce_bias(loss, dx, dw, NULL, x, w, NULL, targets, dloss, s);
}

/* loss[n] and lse[n] from the statistics of one slice covering all of V. */
static void loss_from_stats(float *loss, float *lse, const float *mx, const float *se,
                            const float *tl, int64_t N)
{
    for (int64_t n = 0; n < N; n++) {
        lse[n] = mx[n] + logf(se[n]);
        loss[n] = lse[n] - tl[n];
    }
}

static int32_t *random_targets(int64_t N, int64_t V)
{
    int32_t *t = malloc((size_t)N * sizeof *t);
    for (int64_t n = 0; n < N; n++)
        t[n] = (int32_t)(kc_uniform() * (double)V);
    return t;
}

TEST(lmhead_matches_naive_full_logits_cross_entropy)
{
    static const lshape shapes[] = {
        {1, 5, 11, 4},   {7, 13, 50, 16}, {33, 64, 300, 128}, {64, 96, 1000, 1000},
        {5, 7, 20, 64}, {16, 768, 3000, 1024},
    };
    static const char *names[2][2] = {{"lmhead loss ref vs naive", "lmhead dx,dw ref vs naive"},
                                      {"lmhead loss cpu vs naive", "lmhead dx,dw cpu vs naive"}};
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        lshape s = shapes[i];
        const int64_t N = s.N, C = s.C, V = s.V;
        /* x . w of order +-4: a peaked but not saturated softmax */
        float *x = kc_random(N * C, -1, 1), *w = kc_random(V * C, -0.6, 0.6);
        float *dloss = kc_random(N, -1, 1);
        int32_t *tg = random_targets(N, V);
        double *xd = kc_to_double(x, N * C), *wd = kc_to_double(w, V * C);
        double *loss_d = kc_doubles(N), *dx_d = kc_doubles(N * C), *dw_d = kc_doubles(V * C);
        naive_ce(loss_d, dx_d, dw_d, xd, wd, tg, dloss, s);
        float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, s.chunk));
        for (int k = 0; k < 2; k++) {
            float *mx = kc_floats(N), *se = kc_floats(N), *tl = kc_floats(N);
            float *loss = kc_floats(N), *lse = kc_floats(N);
            CHECK_OK(stats_twins[k](mx, se, tl, x, w, NULL, tg, N, C, 0, V, s.chunk, ws, g));
            loss_from_stats(loss, lse, mx, se, tl, N);
            /* logits are C-term fp32 dot products (|l| <~ 4, error ~ sqrt(C)
             * 2^-24 |l|); log-sum-exp adds ~V 2^-24 relative in the sum: 1e-6
             * of max |loss|, 5e-6 to spare. */
            double el = kc_note(names[k][0], kc_rel_err_d(loss, loss_d, N));
            CHECK(el < 5e-6, "%s N=%lld V=%lld chunk=%lld: rel err %.3g", names[k][0],
                  (long long)N, (long long)V, (long long)s.chunk, el);

            float *dx = kc_floats(N * C), *dw = kc_floats(V * C);
            memset(dx, 0, (size_t)(N * C) * sizeof *dx);
            memset(dw, 0, (size_t)(V * C) * sizeof *dw);
            CHECK_OK(bwd_twins[k](dx, dw, NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V, s.chunk, ws, 0, g));
            /* dx sums V fp32 terms, dw sums N: the error of such sums grows
             * like sqrt(terms) 2^-24 (seen: 3.7e-6 for the reference's
             * sequential sums at V = 3000); 5e-7 sqrt(max(V, N)) leaves 5x. */
            double eg = fmax(kc_rel_err_d(dx, dx_d, N * C), kc_rel_err_d(dw, dw_d, V * C));
            kc_note(names[k][1], eg);
            CHECK(eg < 5e-7 * sqrt((double)(V > N ? V : N)), "%s N=%lld V=%lld chunk=%lld: rel err %.3g", names[k][1],
                  (long long)N, (long long)V, (long long)s.chunk, eg);
            free(mx), free(se), free(tl), free(loss), free(lse), free(dx), free(dw);
        }
        free(x), free(w), free(dloss), free(tg), free(xd), free(wd), free(loss_d), free(dx_d);
        free(dw_d), free(ws);
    }
    pl_gemm_free(g);
}

typedef struct ce_ctx {
    const double *x, *w;
    const int32_t *targets;
    const float *dloss;
    double *loss;
    lshape s;
} ce_ctx;

static double ce_objective(void *p)
{
    ce_ctx *c = p;
    naive_ce(c->loss, NULL, NULL, c->x, c->w, c->targets, c->dloss, c->s);
    double L = 0.0;
    for (int64_t n = 0; n < c->s.N; n++)
        L += c->dloss[n] * c->loss[n];
    return L;
}

TEST(lmhead_backward_matches_finite_differences_for_x_and_w)
{
    static const lshape shapes[] = {{1, 4, 6, 4}, {3, 5, 11, 4}, {6, 9, 40, 16}};
    static const char *names[2][2] = {{"lmhead dx ref vs FD", "lmhead dw ref vs FD"},
                                      {"lmhead dx cpu vs FD", "lmhead dw cpu vs FD"}};
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        lshape s = shapes[i];
        const int64_t N = s.N, C = s.C, V = s.V;
        float *x = kc_random(N * C, -1, 1), *w = kc_random(V * C, -1, 1);
        float *dloss = kc_random(N, -1, 1);
        int32_t *tg = random_targets(N, V);
        double *xd = kc_to_double(x, N * C), *wd = kc_to_double(w, V * C), *loss_d = kc_doubles(N);
        float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, s.chunk));
        ce_ctx ctx = {xd, wd, tg, dloss, loss_d, s};
        for (int k = 0; k < 2; k++) {
            float *mx = kc_floats(N), *se = kc_floats(N), *tl = kc_floats(N);
            float *loss = kc_floats(N), *lse = kc_floats(N);
            CHECK_OK(stats_twins[k](mx, se, tl, x, w, NULL, tg, N, C, 0, V, s.chunk, ws, g));
            loss_from_stats(loss, lse, mx, se, tl, N);
            float *dx = kc_floats(N * C), *dw = kc_floats(V * C);
            memset(dx, 0, (size_t)(N * C) * sizeof *dx);
            memset(dw, 0, (size_t)(V * C) * sizeof *dw);
            CHECK_OK(bwd_twins[k](dx, dw, NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V, s.chunk, ws, 0, g));
            /* fp32 softmax of C-term logits: ~1e-7 relative; a wrong sign of
             * the one-hot or a missing dloss factor is O(1). */
            double ex = kc_note(names[k][0], kc_fd_check(xd, N * C, dx, ce_objective, &ctx, 1e-3, 400));
            double ew = kc_note(names[k][1], kc_fd_check(wd, V * C, dw, ce_objective, &ctx, 1e-3, 400));
            CHECK(ex < 1e-5 && ew < 1e-5, "twin %d N=%lld V=%lld: FD rel err dx %.3g dw %.3g", k,
                  (long long)N, (long long)V, ex, ew);
            free(mx), free(se), free(tl), free(loss), free(lse), free(dx), free(dw);
        }
        free(x), free(w), free(dloss), free(tg), free(xd), free(wd), free(loss_d), free(ws);
    }
    pl_gemm_free(g);
}

TEST(lmhead_vocab_parallel_slices_combine_to_the_full_vocabulary)
{
    const int64_t N = 9, C = 24, V = 101, V1 = 40, chunk = 16; /* slices [0,40), [40,101) */
    float *x = kc_random(N * C, -1, 1), *w = kc_random(V * C, -1, 1), *dloss = kc_random(N, -1, 1);
    int32_t *tg = random_targets(N, V);
    float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, chunk));
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    if (!g)
        return;
    for (int k = 0; k < 2; k++) {
        float st[3][3][9]; /* [full, slice 0, slice 1][max, sumexp, target logit][n] */
        CHECK_OK(stats_twins[k](st[0][0], st[0][1], st[0][2], x, w, NULL, tg, N, C, 0, V, chunk, ws, g));
        CHECK_OK(stats_twins[k](st[1][0], st[1][1], st[1][2], x, w, NULL, tg, N, C, 0, V1, chunk, ws, g));
        CHECK_OK(stats_twins[k](st[2][0], st[2][1], st[2][2], x, w + V1 * C, NULL, tg, N, C, V1, V - V1,
                                chunk, ws, g));
        float lse[9], loss_full[9], loss_tp[9], lse_full[9];
        loss_from_stats(loss_full, lse_full, st[0][0], st[0][1], st[0][2], N);
        int tl_ok = 1;
        for (int64_t n = 0; n < N; n++) {
            /* what tensor parallelism all-reduces: max, then rescaled sums, then the target logit */
            float m = fmaxf(st[1][0][n], st[2][0][n]);
            float z = st[1][1][n] * expf(st[1][0][n] - m) + st[2][1][n] * expf(st[2][0][n] - m);
            lse[n] = m + logf(z);
            loss_tp[n] = lse[n] - (st[1][2][n] + st[2][2][n]);
            int in0 = tg[n] < V1;
            tl_ok &= st[in0 ? 2 : 1][2][n] == 0.0f; /* the other slice reports 0 */
        }
        CHECK(tl_ok, "twin %d: a slice without the target must report target logit 0", k);
        /* the same logits, summed in two groups instead of one: fp32 ulps */
        double el = kc_rel_err(loss_tp, loss_full, N);
        CHECK(el < 2e-6, "twin %d: sliced loss rel err %.3g", k, el);

        float *dx_full = kc_floats(N * C), *dx_tp = kc_floats(N * C);
        float *dw_full = kc_floats(V * C), *dw_tp = kc_floats(V * C);
        memset(dx_full, 0, (size_t)(N * C) * sizeof(float));
        memset(dx_tp, 0, (size_t)(N * C) * sizeof(float));
        memset(dw_full, 0, (size_t)(V * C) * sizeof(float));
        memset(dw_tp, 0, (size_t)(V * C) * sizeof(float));
        CHECK_OK(bwd_twins[k](dx_full, dw_full, NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V, chunk, ws, 0, g));
        CHECK_OK(bwd_twins[k](dx_tp, dw_tp, NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V1, chunk, ws, 0, g));
        CHECK_OK(bwd_twins[k](dx_tp, dw_tp + V1 * C, NULL, x, w + V1 * C, NULL, tg, lse, dloss, N, C, V1,
                              V - V1, chunk, ws, 0, g));
        double eg = fmax(kc_rel_err(dx_tp, dx_full, N * C), kc_rel_err(dw_tp, dw_full, V * C));
        CHECK(eg < 2e-6, "twin %d: sliced gradients rel err %.3g", k, eg);
        free(dx_full), free(dx_tp), free(dw_full), free(dw_tp);
    }
    pl_gemm_free(g);
    free(x), free(w), free(dloss), free(tg), free(ws);
}

TEST(lmhead_results_do_not_depend_on_thread_count)
{
    const int64_t N = 70, C = 64, V = 1000, chunk = 512; /* N * chunk above the threading threshold */
    float *x = kc_random(N * C, -1, 1), *w = kc_random(V * C, -0.5, 0.5), *dloss = kc_random(N, -1, 1);
    float *dx0 = kc_random(N * C, -1, 1), *dw0 = kc_random(V * C, -1, 1);
    int32_t *tg = random_targets(N, V);
    float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, chunk));
    float *st[2], *dx[2], *dw[2];
    for (int k = 0; k < 2; k++) {
        KC_WITH_THREADS(k + 1, {
            pl_gemm *g = NULL; /* a context per thread count, as a run would create */
            CHECK_OK(pl_gemm_init(&g));
            st[k] = kc_floats(4 * N), dx[k] = kc_copy(dx0, N * C), dw[k] = kc_copy(dw0, V * C);
            if (g) {
                CHECK_OK(pl_cpu_lmhead_stats(st[k], st[k] + N, st[k] + 2 * N, x, w, NULL, tg, N, C, 0, V,
                                             chunk, ws, g));
                float *lse = st[k] + 3 * N;
                for (int64_t n = 0; n < N; n++)
                    lse[n] = st[k][n] + logf(st[k][N + n]);
                CHECK_OK(pl_cpu_lmhead_bwd(dx[k], dw[k], NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V, chunk,
                                           ws, 0, g));
            }
            pl_gemm_free(g);
        });
    }
    CHECK(kc_same_bits(st[0], st[1], 4 * N), "statistics differ between 1 and 2 threads");
    CHECK(kc_same_bits(dx[0], dx[1], N * C), "dx differs between 1 and 2 threads");
    CHECK(kc_same_bits(dw[0], dw[1], V * C), "dw differs between 1 and 2 threads");
    for (int k = 0; k < 2; k++)
        free(st[k]), free(dx[k]), free(dw[k]);
    free(x), free(w), free(dloss), free(dx0), free(dw0), free(tg), free(ws);
}

/* With the whole slice in one chunk, the backward that takes the logits the
 * stats pass left in the workspace gives the same bits as the one that
 * recomputes them (the same GEMM primitive makes the same logits); asking
 * for kept logits with a smaller chunk is refused. */
TEST(lmhead_kept_logits_give_the_recomputed_gradients_bit_for_bit)
{
    const int64_t N = 70, C = 64, V = 1000;
    const int64_t chunks[2] = {1000, 1024};
    float *x = kc_random(N * C, -1, 1), *w = kc_random(V * C, -0.5, 0.5), *dloss = kc_random(N, -1, 1);
    float *dx0 = kc_random(N * C, -1, 1), *dw0 = kc_random(V * C, -1, 1);
    int32_t *tg = random_targets(N, V);
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    for (int c = 0; c < 2 && g; c++) {
        const int64_t chunk = chunks[c];
        float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, chunk));
        float *st = kc_floats(4 * N), *lse = st + 3 * N, *dx[2], *dw[2];
        CHECK_OK(pl_cpu_lmhead_stats(st, st + N, st + 2 * N, x, w, NULL, tg, N, C, 0, V, chunk, ws, g));
        for (int64_t n = 0; n < N; n++)
            lse[n] = st[n] + logf(st[N + n]);
        for (int kept = 1; kept >= 0; kept--) { /* kept first: the workspace holds the logits */
            dx[kept] = kc_copy(dx0, N * C), dw[kept] = kc_copy(dw0, V * C);
            CHECK_OK(pl_cpu_lmhead_bwd(dx[kept], dw[kept], NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V, chunk,
                                       ws, kept, g));
        }
        CHECK(kc_same_bits(dx[0], dx[1], N * C), "chunk %lld: dx differs with kept logits",
              (long long)chunk);
        CHECK(kc_same_bits(dw[0], dw[1], V * C), "chunk %lld: dw differs with kept logits",
              (long long)chunk);
        CHECK(!kc_same_bits(dx[1], dx0, N * C), "chunk %lld: dx unchanged", (long long)chunk);
        free(ws), free(st), free(dx[0]), free(dx[1]), free(dw[0]), free(dw[1]);
    }
    float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, 512)), *lse = kc_floats(N);
    pl_status st = g ? pl_cpu_lmhead_bwd(dx0, dw0, NULL, x, w, NULL, tg, lse, dloss, N, C, 0, V, 512, ws, 1, g)
                     : PL_OK;
    CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "logits_kept"),
          "kept logits with chunk 512 < V 1000: status %d (%s)", st, pl_error_msg());
    pl_gemm_free(g);
    free(x), free(w), free(dloss), free(dx0), free(dw0), free(tg), free(ws), free(lse);
}

/* The output layer's bias (BERT, T5): logits x w^T + b. Both twins against the
 * float64 reference, over chunks smaller than V and over two vocab-parallel
 * slices (each with its slice of the bias); dbias's column sums bit-equal for
 * 1 and 2 threads; kept logits (which include the bias) give the recomputed
 * gradients bit for bit. */
TEST(lmhead_output_bias_matches_naive_and_splits)
{
    static const lshape shapes[] = {{7, 13, 50, 16}, {33, 64, 300, 128}, {70, 64, 1000, 1000}};
    pl_gemm *g = NULL;
    CHECK_OK(pl_gemm_init(&g));
    for (size_t i = 0; g && i < sizeof shapes / sizeof *shapes; i++) {
        lshape s = shapes[i];
        const int64_t N = s.N, C = s.C, V = s.V, V1 = V / 3;
        float *x = kc_random(N * C, -1, 1), *w = kc_random(V * C, -0.6, 0.6);
        float *b = kc_random(V, -2, 2), *dloss = kc_random(N, -1, 1);
        int32_t *tg = random_targets(N, V);
        double *xd = kc_to_double(x, N * C), *wd = kc_to_double(w, V * C), *bd = kc_to_double(b, V);
        double *loss_d = kc_doubles(N), *dx_d = kc_doubles(N * C), *dw_d = kc_doubles(V * C);
        double *db_d = kc_doubles(V), *loss_nob = kc_doubles(N);
        naive_ce_bias(loss_d, dx_d, dw_d, db_d, xd, wd, bd, tg, dloss, s);
        naive_ce(loss_nob, NULL, NULL, xd, wd, tg, dloss, s);
        float *ws = kc_floats((int64_t)pl_lmhead_workspace(N, s.chunk));
        for (int k = 0; k < 2; k++) {
            float *st = kc_floats(3 * N), *loss = kc_floats(N), *lse = kc_floats(N);
            CHECK_OK(stats_twins[k](st, st + N, st + 2 * N, x, w, b, tg, N, C, 0, V, s.chunk, ws,
                                    g));
            loss_from_stats(loss, lse, st, st + N, st + 2 * N, N);
            /* the bias must matter: the loss without it is far off */
            double el = kc_rel_err_d(loss, loss_d, N), eno = kc_rel_err_d(loss, loss_nob, N);
            CHECK(el < 5e-6 && eno > 1e-2, "twin %d V=%lld: loss rel err %.3g (%.3g without bias)",
                  k, (long long)V, el, eno);
            float *dx = kc_floats(N * C), *dw = kc_floats(V * C), *db = kc_floats(V);
            memset(dx, 0, (size_t)(N * C) * sizeof *dx);
            memset(dw, 0, (size_t)(V * C) * sizeof *dw);
            memset(db, 0, (size_t)V * sizeof *db);
            CHECK_OK(bwd_twins[k](dx, dw, db, x, w, b, tg, lse, dloss, N, C, 0, V, s.chunk, ws, 0,
                                  g));
            /* db sums N terms of size ~|dloss|: the bound of the dx/dw check */
            double eg = fmax(fmax(kc_rel_err_d(dx, dx_d, N * C), kc_rel_err_d(dw, dw_d, V * C)),
                             kc_rel_err_d(db, db_d, V));
            CHECK(eg < 5e-7 * sqrt((double)(V > N ? V : N)),
                  "twin %d V=%lld chunk=%lld: gradient rel err %.3g", k, (long long)V,
                  (long long)s.chunk, eg);
            /* two vocab-parallel slices, each with its part of w and b */
            float *sl = kc_floats(6 * N), *dxs = kc_floats(N * C), *dws = kc_floats(V * C);
            float *dbs = kc_floats(V), lse_tp[70], loss_tp[70];
            memset(dxs, 0, (size_t)(N * C) * sizeof *dxs);
            memset(dws, 0, (size_t)(V * C) * sizeof *dws);
            memset(dbs, 0, (size_t)V * sizeof *dbs);
            CHECK_OK(stats_twins[k](sl, sl + N, sl + 2 * N, x, w, b, tg, N, C, 0, V1, s.chunk, ws,
                                    g));
            CHECK_OK(stats_twins[k](sl + 3 * N, sl + 4 * N, sl + 5 * N, x, w + V1 * C, b + V1, tg,
                                    N, C, V1, V - V1, s.chunk, ws, g));
            for (int64_t n = 0; n < N; n++) {
                float m = fmaxf(sl[n], sl[3 * N + n]);
                float z = sl[N + n] * expf(sl[n] - m) + sl[4 * N + n] * expf(sl[3 * N + n] - m);
                lse_tp[n] = m + logf(z);
                loss_tp[n] = lse_tp[n] - (sl[2 * N + n] + sl[5 * N + n]);
            }
            CHECK(kc_rel_err_d(loss_tp, loss_d, N) < 5e-6, "twin %d: sliced loss with bias", k);
            CHECK_OK(bwd_twins[k](dxs, dws, dbs, x, w, b, tg, lse_tp, dloss, N, C, 0, V1, s.chunk,
                                  ws, 0, g));
            CHECK_OK(bwd_twins[k](dxs, dws + V1 * C, dbs + V1, x, w + V1 * C, b + V1, tg, lse_tp,
                                  dloss, N, C, V1, V - V1, s.chunk, ws, 0, g));
            CHECK(kc_rel_err_d(dbs, db_d, V) < 5e-7 * sqrt((double)(V > N ? V : N)),
                  "twin %d: sliced output-bias gradient rel err %.3g", k, kc_rel_err_d(dbs, db_d, V));
            free(st), free(loss), free(lse), free(dx), free(dw), free(db), free(sl), free(dxs);
            free(dws), free(dbs);
        }
        /* fast twin: thread count, and kept logits */
        float *dbt[2], *dbk[2];
        for (int t = 0; t < 2; t++) {
            KC_WITH_THREADS(t + 1, {
                float *st = kc_floats(4 * N), *lse = st + 3 * N;
                float *dx = kc_floats(N * C), *dw = kc_floats(V * C);
                dbt[t] = kc_floats(V);
                memset(dbt[t], 0, (size_t)V * sizeof(float));
                CHECK_OK(pl_cpu_lmhead_stats(st, st + N, st + 2 * N, x, w, b, tg, N, C, 0, V,
                                             s.chunk, ws, g));
                for (int64_t n = 0; n < N; n++)
                    lse[n] = st[n] + logf(st[N + n]);
                for (int kept = 1; kept >= 0 && s.chunk >= V; kept--) {
                    dbk[kept] = kc_floats(V);
                    memset(dbk[kept], 0, (size_t)V * sizeof(float));
                    CHECK_OK(pl_cpu_lmhead_bwd(dx, dw, dbk[kept], x, w, b, tg, lse, dloss, N, C, 0,
                                               V, s.chunk, ws, kept, g));
                }
                if (s.chunk >= V) {
                    CHECK(kc_same_bits(dbk[0], dbk[1], V), "V=%lld: dbias differs with kept "
                          "logits", (long long)V);
                    free(dbk[0]), free(dbk[1]);
                }
                CHECK_OK(pl_cpu_lmhead_bwd(dx, dw, dbt[t], x, w, b, tg, lse, dloss, N, C, 0, V,
                                           s.chunk, ws, 0, g));
                free(st), free(dx), free(dw);
            });
        }
        CHECK(kc_same_bits(dbt[0], dbt[1], V), "V=%lld: dbias differs between 1 and 2 threads",
              (long long)V);
        free(dbt[0]), free(dbt[1]);
        free(x), free(w), free(b), free(dloss), free(tg), free(xd), free(wd), free(bd), free(loss_d);
        free(dx_d), free(dw_d), free(db_d), free(loss_nob), free(ws);
    }
    pl_gemm_free(g);
}

TEST(lmhead_rejects_a_zero_chunk)
{
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, out[3], ws[4];
    int32_t tg[1] = {0};
    for (int k = 0; k < 2; k++) {
        pl_status st = stats_twins[k](out, out + 1, out + 2, x, w, NULL, tg, 1, 4, 0, 1, 0, ws, NULL);
        CHECK(st == PL_ERR_ARG && strstr(pl_error_msg(), "chunk"), "twin %d: status %d (%s)", k,
              st, pl_error_msg());
    }
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(5);
        RUN(lmhead_matches_naive_full_logits_cross_entropy);
        RUN(lmhead_backward_matches_finite_differences_for_x_and_w);
        RUN(lmhead_vocab_parallel_slices_combine_to_the_full_vocabulary);
        RUN(lmhead_results_do_not_depend_on_thread_count);
        RUN(lmhead_kept_logits_give_the_recomputed_gradients_bit_for_bit);
        RUN(lmhead_output_bias_matches_naive_and_splits);
        RUN(lmhead_rejects_a_zero_chunk);
        kc_print_notes();
    }
    return test_summary("kernels_lmhead");
}
