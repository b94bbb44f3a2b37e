/* kernels: the Llama-style layers (RMSNorm, SwiGLU, rotary embedding) and
 * dropout.
 *
 * As in test_kernels_pointwise.c: each fast twin against its reference on
 * random nonzero inputs (bit for bit where the fast twin keeps the
 * reference's order of operations), 1 thread against 2 bit for bit, and each
 * backward of the reference against float64 central finite differences of a
 * float64 forward written here, L = sum(out * R) with R random, so dout = R.
 * The forwards in this file are independent statements of the math, not
 * calls to the kernels. Every test runs once per instruction set of the cpu
 * twins. */
#include "base/rng.h"
#include "kernel_check.h"
#include "kernels/kernels.h"

/* Sizes above the kernels' 32768-element threading threshold, odd on purpose. */
#define BIG_N 67
#define BIG_C 771

/* ---- RMSNorm -------------------------------------------------------------- */

typedef struct rms_ctx {
    const double *inp, *weight, *bias; /* bias may be NULL */
    const float *R;
    int64_t N, C;
    double eps;
} rms_ctx;

static double rms_objective(void *p)
{
    const rms_ctx *e = p;
    double s = 0.0;
    for (int64_t n = 0; n < e->N; n++) {
        const double *x = e->inp + n * e->C;
        double ms = 0.0;
        for (int64_t c = 0; c < e->C; c++)
            ms += x[c] * x[c];
        double r = 1.0 / sqrt(ms / (double)e->C + e->eps);
        for (int64_t c = 0; c < e->C; c++)
            s += (x[c] * r * e->weight[c] + (e->bias ? e->bias[c] : 0.0)) * e->R[n * e->C + c];
    }
    return s;
}

TEST(rmsnorm_matches_reference_and_finite_differences_with_and_without_bias)
{
    static const int64_t shapes[][2] = {/* N, C */ {1, 3}, {3, 7}, {5, 64}, {BIG_N, BIG_C}};
    /* C >= 3: with C = 1 the output is sign(x) w whatever |x|, the input
     * gradient is only the eps term (g (1 - xhat^2), cancelling in fp32), and
     * relative errors are noise. */
    const float eps = 1e-5f;
    for (int with_bias = 0; with_bias <= 1; with_bias++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int64_t N = shapes[s][0], C = shapes[s][1];
            /* offset rows (mean ~0.5): RMSNorm does not subtract the mean */
            float *inp = kc_random(N * C, -0.5, 1.5), *w = kc_random(C, 0.5, 1.5);
            float *b = with_bias ? kc_random(C, -0.5, 0.5) : NULL;
            float *out = kc_floats(N * C), *rstd = kc_floats(N);
            float *out_r = kc_floats(N * C), *rstd_r = kc_floats(N);
            KC_WITH_THREADS(1, pl_cpu_rmsnorm_fwd(out_r, rstd_r, inp, w, b, N, C, eps));
            KC_WITH_THREADS(2, pl_cpu_rmsnorm_fwd(out, rstd, inp, w, b, N, C, eps));
            CHECK(kc_same_bits(out, out_r, N * C) && kc_same_bits(rstd, rstd_r, N),
                  "fwd N=%lld: 1 and 2 threads differ", (long long)N);
            pl_ref_rmsnorm_fwd(out_r, rstd_r, inp, w, b, N, C, eps);
            /* mean(x^2) sums C positive fp32 terms, in sequence in the
             * reference and in vector lanes on the cpu side: at most C * 2^-24
             * (4.6e-5 at C = 771) apart, sqrt(C) * 2^-24 (1.7e-6) typically;
             * rstd and out inherit half of it. */
            double err = kc_note("rmsnorm fwd cpu vs ref",
                                 fmax(kc_rel_err(out, out_r, N * C), kc_rel_err(rstd, rstd_r, N)));
            CHECK(err < 1e-5, "fwd N=%lld C=%lld bias %d: rel err %.3g", (long long)N,
                  (long long)C, with_bias, err);

            float *R = kc_random(N * C, -1, 1);
            float *dx0 = kc_random(N * C, -1, 1), *dw0 = kc_random(C, -1, 1);
            float *db0 = kc_random(C, -1, 1);
            float *dx[3], *dw[3], *db[3]; /* cpu 1 thread, cpu 2 threads, ref */
            for (int k = 0; k < 3; k++) {
                dx[k] = kc_copy(dx0, N * C), dw[k] = kc_copy(dw0, C);
                db[k] = with_bias ? kc_copy(db0, C) : NULL;
            }
            KC_WITH_THREADS(1, pl_cpu_rmsnorm_bwd(dx[0], dw[0], db[0], R, inp, w, rstd_r, N, C));
            KC_WITH_THREADS(2, pl_cpu_rmsnorm_bwd(dx[1], dw[1], db[1], R, inp, w, rstd_r, N, C));
            pl_ref_rmsnorm_bwd(dx[2], dw[2], db[2], R, inp, w, rstd_r, N, C);
            CHECK(kc_same_bits(dx[0], dx[1], N * C) && kc_same_bits(dw[0], dw[1], C),
                  "bwd N=%lld: 1 and 2 threads differ", (long long)N);
            /* dweight and dbias: the reference's sums over n, in its order */
            CHECK(kc_same_bits(dw[0], dw[2], C), "dweight: cpu != ref");
            if (with_bias)
                CHECK(kc_same_bits(db[0], db[2], C), "dbias: cpu != ref");
            /* dinp: the row mean of g xhat sums C terms in lanes vs in
             * sequence, as in forward */
            err = kc_note("rmsnorm dinp cpu vs ref", kc_rel_err(dx[0], dx[2], N * C));
            CHECK(err < 1e-5, "bwd N=%lld C=%lld: rel err %.3g", (long long)N, (long long)C, err);

            /* finite differences of the reference's gradients, from zero */
            float *gx = kc_floats(N * C), *gw = kc_floats(C), *gb = with_bias ? kc_floats(C) : NULL;
            memset(gx, 0, (size_t)(N * C) * sizeof *gx);
            memset(gw, 0, (size_t)C * sizeof *gw);
            if (gb)
                memset(gb, 0, (size_t)C * sizeof *gb);
            pl_ref_rmsnorm_bwd(gx, gw, gb, R, inp, w, rstd_r, N, C);
            double *inp_d = kc_to_double(inp, N * C), *w_d = kc_to_double(w, C);
            double *b_d = with_bias ? kc_to_double(b, C) : NULL;
            rms_ctx ctx = {inp_d, w_d, b_d, R, N, C, eps};
            /* dinp: a C-term fp32 row mean times rstd ~ 1.3: ~1e-6 typical;
             * 1e-4 is far below the O(1) error of a wrong or missing term. */
            double ex = kc_fd_check(inp_d, N * C, gx, rms_objective, &ctx, 1e-3, 200);
            double ew = kc_fd_check(w_d, C, gw, rms_objective, &ctx, 1e-3, 200);
            double eb = with_bias ? kc_fd_check(b_d, C, gb, rms_objective, &ctx, 1e-3, 200) : 0.0;
            kc_note("rmsnorm dinp vs FD", ex);
            kc_note("rmsnorm dweight vs FD", ew);
            if (with_bias)
                kc_note("rmsnorm dbias vs FD", eb);
            CHECK(ex < 1e-4 && ew < 1e-4 && eb < 1e-4,
                  "N=%lld C=%lld bias %d: FD rel err x %.3g w %.3g b %.3g", (long long)N,
                  (long long)C, with_bias, ex, ew, eb);
            for (int k = 0; k < 3; k++)
                free(dx[k]), free(dw[k]), free(db[k]);
            free(inp), free(w), free(b), free(out), free(rstd), free(out_r), free(rstd_r), free(R);
            free(dx0), free(dw0), free(db0), free(gx), free(gw), free(gb), free(inp_d), free(w_d);
            free(b_d);
        }
}

/* ---- SwiGLU --------------------------------------------------------------- */

typedef struct swiglu_ctx {
    const double *inp; /* (N, 2F) */
    const float *R;    /* (N, F) */
    int64_t N, F;
} swiglu_ctx;

static double swiglu_objective(void *p)
{
    const swiglu_ctx *e = p;
    double s = 0.0;
    for (int64_t n = 0; n < e->N; n++)
        for (int64_t f = 0; f < e->F; f++) {
            double g = e->inp[n * 2 * e->F + f], u = e->inp[n * 2 * e->F + e->F + f];
            s += g / (1.0 + exp(-g)) * u * e->R[n * e->F + f];
        }
    return s;
}

/* (N, 2F) with gates uniform in [-r, r] and ups in [-2, 2]. */
static float *swiglu_input(int64_t N, int64_t F, double r)
{
    float *x = kc_floats(N * 2 * F);
    for (int64_t n = 0; n < N; n++) {
        kc_fill(x + n * 2 * F, F, -r, r);
        kc_fill(x + n * 2 * F + F, F, -2, 2);
    }
    return x;
}

TEST(swiglu_matches_reference_and_finite_differences)
{
    static const int64_t shapes[][2] = {/* N, F */ {1, 1}, {3, 37}, {BIG_N, BIG_C}, {5, 200}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t N = shapes[s][0], F = shapes[s][1];
        /* gates in [-6, 6] cover the curved middle of silu; the last case,
         * [-100, 100], its saturated tails (exp beyond its fp32 range) */
        double r = s == 3 ? 100.0 : 6.0;
        float *inp = swiglu_input(N, F, r);
        float *out = kc_floats(N * F), *out1 = kc_floats(N * F), *out_ref = kc_floats(N * F);
        KC_WITH_THREADS(1, pl_cpu_swiglu_fwd(out1, inp, N, F));
        KC_WITH_THREADS(2, pl_cpu_swiglu_fwd(out, inp, N, F));
        CHECK(kc_same_bits(out1, out, N * F), "fwd N=%lld: 1 and 2 threads differ", (long long)N);
        pl_ref_swiglu_fwd(out_ref, inp, N, F);
        /* The cpu twin's exp is pl_vexpf (rel err 1e-7) instead of expf; then
         * one add, one division, one product: a few ulp of |out|. */
        double err = kc_note("swiglu fwd cpu vs ref", kc_rel_err(out, out_ref, N * F));
        CHECK(err < 1e-6, "fwd N=%lld F=%lld: rel err %.3g", (long long)N, (long long)F, err);

        float *R = kc_random(N * F, -1, 1), *d0 = kc_random(N * 2 * F, -1, 1);
        float *d1 = kc_copy(d0, N * 2 * F), *d2 = kc_copy(d0, N * 2 * F);
        float *dref = kc_copy(d0, N * 2 * F);
        KC_WITH_THREADS(1, pl_cpu_swiglu_bwd(d1, inp, R, N, F));
        KC_WITH_THREADS(2, pl_cpu_swiglu_bwd(d2, inp, R, N, F));
        pl_ref_swiglu_bwd(dref, inp, R, N, F);
        CHECK(kc_same_bits(d1, d2, N * 2 * F), "bwd N=%lld: 1 and 2 threads differ", (long long)N);
        /* silu' = s + g s (1 - s) forms 1 - s in fp32, an absolute 2^-24
         * cancellation error near s = 1, times |g| <= 6 (and |up| <= 2): a
         * few 1e-7 of max |dinp| ~ 2.2; 5e-6 leaves room. */
        err = kc_note("swiglu bwd cpu vs ref", kc_rel_err(d1, dref, N * 2 * F));
        CHECK(err < 5e-6, "bwd N=%lld F=%lld: rel err %.3g", (long long)N, (long long)F, err);

        memset(d1, 0, (size_t)(N * 2 * F) * sizeof *d1);
        pl_ref_swiglu_bwd(d1, inp, R, N, F);
        double *inp_d = kc_to_double(inp, N * 2 * F);
        swiglu_ctx ctx = {inp_d, R, N, F};
        /* fp32 expf and a handful of products: ~1e-7 relative to the largest
         * gradient; 1e-5 leaves room, a wrong formula is O(0.1). Checks both
         * halves (gate and up) of the rows. */
        err = kc_note("swiglu bwd vs FD",
                      kc_fd_check(inp_d, N * 2 * F, d1, swiglu_objective, &ctx, 1e-3, 400));
        CHECK(err < 1e-5, "N=%lld F=%lld: FD rel err %.3g", (long long)N, (long long)F, err);
        free(inp), free(out), free(out1), free(out_ref), free(R), free(d0), free(d1), free(d2);
        free(dref), free(inp_d);
    }
}

/* The bf16-input SwiGLUs (--bf16's saved fc1 output) are the fp32 kernels of
 * the same twin on the widened values, bit for bit. */
TEST(swiglu_of_bf16_inputs_is_swiglu_of_the_widened_values)
{
    static const int64_t shapes[][2] = {/* N, F */ {1, 1}, {3, 37}, {BIG_N, BIG_C}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t N = shapes[s][0], F = shapes[s][1], n2 = N * 2 * F;
        float *x = swiglu_input(N, F, 6.0), *xw = kc_floats(n2);
        float *a = kc_floats(N * F), *b = kc_floats(N * F);
        uint16_t *h = malloc((size_t)n2 * sizeof *h);
        pl_ref_f32_to_bf16(h, x, 1, n2, n2);
        for (int64_t i = 0; i < n2; i++)
            xw[i] = pl_ref_bf16_to_f32(h[i]);
        KC_WITH_THREADS(2, pl_cpu_swiglu_fwd(a, xw, N, F));
        KC_WITH_THREADS(2, pl_cpu_swiglu_fwd_bf16(b, h, N, F));
        CHECK(kc_same_bits(a, b, N * F), "cpu fwd N=%lld: bf16 input differs", (long long)N);
        pl_ref_swiglu_fwd(a, xw, N, F);
        pl_ref_swiglu_fwd_bf16(b, h, N, F);
        CHECK(kc_same_bits(a, b, N * F), "ref fwd N=%lld: bf16 input differs", (long long)N);

        float *R = kc_random(N * F, -1, 1), *d0 = kc_random(n2, -1, 1);
        float *d1 = kc_copy(d0, n2), *d2 = kc_copy(d0, n2);
        KC_WITH_THREADS(2, pl_cpu_swiglu_bwd(d1, xw, R, N, F));
        KC_WITH_THREADS(2, pl_cpu_swiglu_bwd_bf16(d2, h, R, N, F));
        CHECK(kc_same_bits(d1, d2, n2), "cpu bwd N=%lld: bf16 input differs", (long long)N);
        memcpy(d1, d0, (size_t)n2 * sizeof *d0);
        memcpy(d2, d0, (size_t)n2 * sizeof *d0);
        pl_ref_swiglu_bwd(d1, xw, R, N, F);
        pl_ref_swiglu_bwd_bf16(d2, h, R, N, F);
        CHECK(kc_same_bits(d1, d2, n2), "ref bwd N=%lld: bf16 input differs", (long long)N);
        free(x), free(xw), free(a), free(b), free(h), free(R), free(d0), free(d1), free(d2);
    }
}

/* ---- rotary position embedding ---------------------------------------------- */

typedef struct rope_shape {
    int64_t B, T, G, QG, HS, rot, pos0;
} rope_shape;

/* Multi-head (G = NH, QG = 1), grouped-query and multi-query layouts, full and
 * partial rotation (rotary_percent 1, 0.5, 2/3), odd T, a nonzero pos0. */
static const rope_shape rope_shapes[] = {
    {1, 1, 1, 1, 2, 2, 0},   {2, 5, 3, 1, 8, 8, 0},    {1, 7, 2, 3, 6, 4, 3},
    {3, 9, 1, 4, 16, 8, 11}, {2, 33, 4, 2, 64, 64, 5}, {1, 65, 2, 4, 128, 64, 0},
};

static int64_t rope_numel(const rope_shape *r) { return r->B * r->T * r->G * (r->QG + 2) * r->HS; }

typedef struct rope_ctx {
    const double *x;
    const float *R, *cos_tab, *sin_tab;
    rope_shape r;
} rope_ctx;

/* sum(rope(x) * R) in float64 on the float tables: the q and k heads rotate,
 * v and the dims past rot pass through. */
static double rope_objective(void *p)
{
    const rope_ctx *e = p;
    const rope_shape *r = &e->r;
    int64_t half = r->rot / 2, H = r->QG + 2;
    double s = 0.0;
    for (int64_t bt = 0; bt < r->B * r->T; bt++) {
        int64_t pos = r->pos0 + bt % r->T;
        for (int64_t g = 0; g < r->G; g++)
            for (int64_t h = 0; h < H; h++) {
                int64_t off = ((bt * r->G + g) * H + h) * r->HS;
                const double *x = e->x + off;
                const float *R = e->R + off;
                for (int64_t d = 0; d < r->HS; d++) {
                    double y = x[d];
                    if (h <= r->QG && d < r->rot) {
                        int64_t i = d % half;
                        double c = e->cos_tab[pos * half + i], sn = e->sin_tab[pos * half + i];
                        y = d < half ? x[d] * c - x[d + half] * sn : x[d] * c + x[d - half] * sn;
                    }
                    s += y * R[d];
                }
            }
    }
    return s;
}

/* 1 where the kernels may write (q and k heads, dims < rot), else 0. */
static int rope_rotated(const rope_shape *r, int64_t idx)
{
    int64_t d = idx % r->HS, h = idx / r->HS % (r->QG + 2);
    return h <= r->QG && d < r->rot;
}

TEST(rope_matches_reference_and_finite_differences_and_leaves_v_and_tail_dims)
{
    for (size_t k = 0; k < sizeof rope_shapes / sizeof *rope_shapes; k++) {
        const rope_shape *r = &rope_shapes[k];
        int64_t n = rope_numel(r), P = r->pos0 + r->T + 2, half = r->rot / 2;
        float *cos_tab = kc_floats(P * half), *sin_tab = kc_floats(P * half);
        pl_rope_table(cos_tab, sin_tab, P, r->rot, 10000.0, NULL);
        float *x = kc_random(n, -1, 1), *y[3]; /* cpu 1 thread, cpu 2 threads, ref */
        for (int i = 0; i < 3; i++)
            y[i] = kc_copy(x, n);
        KC_WITH_THREADS(1, pl_cpu_rope_fwd(y[0], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS,
                                           r->rot, r->pos0));
        KC_WITH_THREADS(2, pl_cpu_rope_fwd(y[1], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS,
                                           r->rot, r->pos0));
        pl_ref_rope_fwd(y[2], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS, r->rot, r->pos0);
        /* elementwise, the reference's operations: bit for bit */
        CHECK(kc_same_bits(y[0], y[2], n) && kc_same_bits(y[1], y[2], n),
              "fwd shape %zu: cpu (1 or 2 threads) != ref", k);
        int untouched = 1;
        for (int64_t i = 0; i < n; i++)
            if (!rope_rotated(r, i))
                untouched &= memcmp(&y[1][i], &x[i], sizeof *x) == 0;
        CHECK(untouched, "fwd shape %zu: v or dims >= rot changed", k);

        /* backward: the transposed rotation of dout = R, in place */
        float *R = kc_random(n, -1, 1), *g[3];
        for (int i = 0; i < 3; i++)
            g[i] = kc_copy(R, n);
        KC_WITH_THREADS(1, pl_cpu_rope_bwd(g[0], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS,
                                           r->rot, r->pos0));
        KC_WITH_THREADS(2, pl_cpu_rope_bwd(g[1], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS,
                                           r->rot, r->pos0));
        pl_ref_rope_bwd(g[2], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS, r->rot, r->pos0);
        CHECK(kc_same_bits(g[0], g[2], n) && kc_same_bits(g[1], g[2], n),
              "bwd shape %zu: cpu (1 or 2 threads) != ref", k);
        untouched = 1;
        for (int64_t i = 0; i < n; i++)
            if (!rope_rotated(r, i))
                untouched &= memcmp(&g[1][i], &R[i], sizeof *R) == 0;
        CHECK(untouched, "bwd shape %zu: v or dims >= rot changed", k);

        /* L = sum(rope(x) R) is linear in x: the difference quotient is exact
         * up to float64 rounding; the analytic side is two fp32 products and
         * one add per entry, 1e-7 relative. */
        double *xd = kc_to_double(x, n);
        rope_ctx ctx = {xd, R, cos_tab, sin_tab, *r};
        double err = kc_note("rope bwd vs FD", kc_fd_check(xd, n, g[2], rope_objective, &ctx, 1e-3, 400));
        CHECK(err < 1e-6, "shape %zu: FD rel err %.3g", k, err);

        /* bwd(fwd(x)) = x: the tables' cos^2 + sin^2 is 1 within 2^-23, and
         * each pass rounds twice per entry: a few 1e-7 relative. */
        pl_cpu_rope_bwd(y[1], cos_tab, sin_tab, r->B, r->T, r->G, r->QG, r->HS, r->rot, r->pos0);
        err = kc_note("rope bwd(fwd(x)) vs x", kc_rel_err(y[1], x, n));
        CHECK(err < 1e-6, "shape %zu: bwd(fwd(x)) rel err %.3g", k, err);
        for (int i = 0; i < 3; i++)
            free(y[i]), free(g[i]);
        free(cos_tab), free(sin_tab), free(x), free(R), free(xd);
    }
}

/* Megatron's _apply_scaling written as its tensor expressions (torch.where on
 * the masks), in float64, for one inverse frequency: an independent
 * statement of the rule the table implements. */
static double llama3_direct(double freq, double factor, double low, double high, double orig)
{
    double low_freq_wavelen = orig / low, high_freq_wavelen = orig / high;
    double wavelen = 2 * 3.14159265358979323846 / freq;
    double inv_freq_llama = wavelen > low_freq_wavelen ? freq / factor : freq;
    double smooth_factor = (orig / wavelen - low) / (high - low);
    double smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama;
    int is_medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    return is_medium ? smoothed : inv_freq_llama;
}

TEST(rope_table_follows_the_published_llama31_scaling_and_plain_frequencies)
{
    /* Llama 3.1 8B: head size 128, base 500000, scaling (8, 1, 4, 8192):
     * indices 0..28 keep their frequency, 29..34 are blended, 35..63 are
     * divided by 8 (wavelengths below 2048, between, above 8192). */
    const int64_t rot = 128, half = rot / 2, P = 70000;
    const double base = 500000.0;
    const pl_rope_scaling sc = {8.0, 1.0, 4.0, 8192};
    float *cos_s = kc_floats(P * half), *sin_s = kc_floats(P * half);
    float *cos_p = kc_floats(P * half), *sin_p = kc_floats(P * half);
    pl_rope_table(cos_s, sin_s, P, rot, base, &sc);
    pl_rope_table(cos_p, sin_p, P, rot, base, NULL);
    static const int64_t positions[] = {0, 1, 2, 17, 1000, 8191, 65535, P - 1};
    int regime[3] = {0, 0, 0}; /* kept, blended, divided */
    double worst = 0.0;
    for (int64_t i = 0; i < half; i++) {
        double freq = pow(base, -(double)(2 * i) / (double)rot);
        double scaled = llama3_direct(freq, 8.0, 1.0, 4.0, 8192.0);
        regime[scaled == freq ? 0 : scaled == freq / 8.0 ? 2 : 1]++;
        for (size_t k = 0; k < sizeof positions / sizeof *positions; k++) {
            int64_t p = positions[k];
            /* float64 angles and cos/sin rounded once to fp32: within half an
             * fp32 ulp of 1 (2^-24) of the direct computation; the two
             * float64 frequencies differ by a few float64 ulp, times p
             * < 2^17: invisible at fp32 precision. */
            double e[4] = {fabs(cos_s[p * half + i] - cos((double)p * scaled)),
                           fabs(sin_s[p * half + i] - sin((double)p * scaled)),
                           fabs(cos_p[p * half + i] - cos((double)p * freq)),
                           fabs(sin_p[p * half + i] - sin((double)p * freq))};
            for (int j = 0; j < 4; j++)
                worst = fmax(worst, e[j]);
        }
    }
    kc_note("rope table vs direct float64 (abs)", worst);
    CHECK(worst <= 0x1p-24, "table differs from the direct formula by %.3g", worst);
    CHECK(regime[0] == 29 && regime[1] == 6 && regime[2] == 29,
          "regimes kept %d blended %d divided %d, expected 29 6 29", regime[0], regime[1],
          regime[2]);
    CHECK(cos_s[0] == 1.0f && sin_s[half - 1] == 0.0f, "position 0 must be the identity");
    free(cos_s), free(sin_s), free(cos_p), free(sin_p);
}

/* ---- dropout ------------------------------------------------------------------ */

typedef struct drop_shape {
    int64_t B, T, C, Cg, c0;
} drop_shape;

/* Row starts at every alignment mod 4, rows shorter than a Philox block and
 * than the cpu twin's 64-element step, slices of a wider global row. */
static const drop_shape drop_shapes[] = {
    {1, 1, 1, 1, 0},     {2, 3, 3, 7, 2},       {1, 5, 5, 5, 0},      {3, 4, 64, 64, 0},
    {2, 7, 131, 400, 1}, {2, 9, 130, 390, 259}, {4, 16, 771, 771, 0}, {2, 33, 1000, 3003, 2001},
};

static int64_t *random_samples(int64_t B)
{
    int64_t *s = malloc((size_t)B * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        s[b] = (int64_t)(kc_uniform() * 1e6);
    return s;
}

TEST(dropout_twins_agree_bit_for_bit_at_every_alignment_thread_count_and_in_place)
{
    static const float ps[] = {0.1f, 0.5f, 0.9f};
    for (size_t k = 0; k < sizeof drop_shapes / sizeof *drop_shapes; k++)
        for (size_t j = 0; j < sizeof ps / sizeof *ps; j++) {
            const drop_shape *d = &drop_shapes[k];
            int64_t n = d->B * d->T * d->C;
            int64_t *sample = random_samples(d->B);
            float *x = kc_random(n, -1, 1), *a = kc_floats(n), *b = kc_floats(n);
            float *ref = kc_floats(n);
            uint64_t seed = 1234 + k, stream = pl_hash_str("dropout") + j;
            pl_ref_dropout(ref, x, 0, d->B * d->T, d->T, d->C, d->Cg, d->c0, sample, ps[j], seed, stream);
            KC_WITH_THREADS(1, pl_cpu_dropout(a, x, 0, d->B * d->T, d->T, d->C, d->Cg, d->c0, sample, ps[j], seed, stream));
            KC_WITH_THREADS(2, pl_cpu_dropout(b, x, 0, d->B * d->T, d->T, d->C, d->Cg, d->c0, sample, ps[j], seed, stream));
            CHECK(kc_same_bits(a, ref, n) && kc_same_bits(b, ref, n),
                  "shape %zu p %g: cpu (1 or 2 threads) != ref", k, (double)ps[j]);
            memcpy(b, x, (size_t)n * sizeof *b);
            pl_cpu_dropout(b, b, 0, d->B * d->T, d->T, d->C, d->Cg, d->c0, sample, ps[j], seed, stream);
            CHECK(kc_same_bits(b, ref, n), "shape %zu: in place != out of place", k);
            free(sample), free(x), free(a), free(b), free(ref);
        }
}

/* Sequence parallelism: a rank holds rows [n0, n0 + rows) of the micro-batch,
 * cut anywhere (inside a sample too). Every block of rows, dropped on its own,
 * equals the same rows of the whole, bit for bit, in both twins. */
TEST(dropout_of_a_block_of_rows_equals_those_rows_of_the_whole)
{
    const int64_t B = 3, T = 10, C = 70, N = B * T;
    int64_t *sample = random_samples(B);
    float *x = kc_random(N * C, -1, 1), *whole = kc_floats(N * C), *part = kc_floats(N * C);
    pl_ref_dropout(whole, x, 0, N, T, C, C, 0, sample, 0.3f, 17, 5);
    static const int64_t cuts[][2] = {{0, 30}, {0, 15}, {15, 15}, {7, 11}, {29, 1}, {10, 10}};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        const int64_t n0 = cuts[k][0], rows = cuts[k][1];
        pl_cpu_dropout(part, x + n0 * C, n0, rows, T, C, C, 0, sample, 0.3f, 17, 5);
        CHECK(kc_same_bits(part, whole + n0 * C, rows * C), "cpu rows [%lld, +%lld) differ",
              (long long)n0, (long long)rows);
        pl_ref_dropout(part, x + n0 * C, n0, rows, T, C, C, 0, sample, 0.3f, 17, 5);
        CHECK(kc_same_bits(part, whole + n0 * C, rows * C), "ref rows [%lld, +%lld) differ",
              (long long)n0, (long long)rows);
    }
    free(sample), free(x), free(whole), free(part);
}

/* The cpu twin's 16-block step counts blocks in 32-bit lanes with a carry
 * into the counter's high word: a row whose indices cross 2^34 (block 2^32)
 * inside a step, as sample ids * T * Cg do on long runs (1e6 samples of
 * 2048 x 4096), must match the reference. */
TEST(dropout_twins_agree_where_the_philox_counter_crosses_2_to_the_32)
{
    /* row 85899345 of width 200 starts at index 17179869000 = 2^34 - 184 */
    const int64_t sample[1] = {17179869}, B = 1, T = 5, C = 200;
    float *x = kc_random(B * T * C, -1, 1), *a = kc_floats(B * T * C), *ref = kc_floats(B * T * C);
    pl_ref_dropout(ref, x, 0, B * T, T, C, C, 0, sample, 0.5f, 99, 7);
    pl_cpu_dropout(a, x, 0, B * T, T, C, C, 0, sample, 0.5f, 99, 7);
    CHECK(kc_same_bits(a, ref, B * T * C), "cpu != ref across the counter's 32-bit carry");
    free(x), free(a), free(ref);
}

TEST(dropout_keeps_one_minus_p_of_a_million_elements_within_5_sigma_scaled_by_1_over_1_minus_p)
{
    static const float ps[] = {0.1f, 0.5f, 0.9f};
    const int64_t B = 4, T = 250, C = 1000, n = B * T * C;
    int64_t sample[4] = {0, 1, 2, 3};
    float *x = kc_random(n, 0.5, 1.5), *y = kc_floats(n);
    for (size_t j = 0; j < sizeof ps / sizeof *ps; j++) {
        double p = ps[j];
        pl_cpu_dropout(y, x, 0, B * T, T, C, C, 0, sample, ps[j], 5, 6);
        float scale = (float)(1.0 / (1.0 - p));
        int64_t kept = 0, exact = 1;
        for (int64_t i = 0; i < n; i++) {
            kept += y[i] != 0.0f;
            exact &= y[i] == 0.0f || y[i] == x[i] * scale;
        }
        /* binomial: sd = sqrt(n p (1 - p)), 300 to 500 elements here */
        double sd = sqrt((double)n * p * (1.0 - p)), dev = fabs((double)kept - (double)n * (1.0 - p));
        kc_note("dropout kept count, sigmas from n(1-p)", dev / sd);
        CHECK(dev < 5.0 * sd, "p %g: kept %lld of %lld, %.1f sigma from n(1-p)", p, (long long)kept,
              (long long)n, dev / sd);
        CHECK(exact, "p %g: a kept element is not inp / (1 - p) (rounded once)", p);
    }
    free(x), free(y);
}

TEST(dropout_of_a_column_slice_is_the_slice_of_the_full_width_mask)
{
    const int64_t B = 3, T = 6, Cg = 515;
    int64_t *sample = random_samples(B);
    float *x = kc_random(B * T * Cg, -1, 1), *full = kc_floats(B * T * Cg);
    pl_cpu_dropout(full, x, 0, B * T, T, Cg, Cg, 0, sample, 0.3f, 42, 43);
    /* three uneven tensor-parallel slices, the first ending mid-block */
    static const int64_t cuts[] = {0, 170, 345, 515};
    for (int r = 0; r < 3; r++) {
        int64_t c0 = cuts[r], C = cuts[r + 1] - c0;
        float *xs = kc_floats(B * T * C), *ys = kc_floats(B * T * C), *yr = kc_floats(B * T * C);
        for (int64_t row = 0; row < B * T; row++)
            memcpy(xs + row * C, x + row * Cg + c0, (size_t)C * sizeof *xs);
        pl_cpu_dropout(ys, xs, 0, B * T, T, C, Cg, c0, sample, 0.3f, 42, 43);
        pl_ref_dropout(yr, xs, 0, B * T, T, C, Cg, c0, sample, 0.3f, 42, 43);
        int same = kc_same_bits(ys, yr, B * T * C);
        for (int64_t row = 0; row < B * T; row++)
            same &= memcmp(ys + row * C, full + row * Cg + c0, (size_t)C * sizeof *ys) == 0;
        CHECK(same, "slice [%lld, %lld) differs from the full-width call", (long long)c0,
              (long long)(c0 + C));
        free(xs), free(ys), free(yr);
    }
    free(sample), free(x), free(full);
}

TEST(dropout_mask_follows_the_sample_id_not_the_batch_position)
{
    const int64_t T = 8, C = 640, n = T * C;
    const int64_t ab[2] = {7, 3}, ba[2] = {3, 7};
    float *x = kc_random(2 * n, 0.5, 1.5), *y1 = kc_floats(2 * n), *y2 = kc_floats(2 * n);
    memcpy(x + n, x, (size_t)n * sizeof *x); /* both samples see the same values */
    pl_cpu_dropout(y1, x, 0, 2 * T, T, C, C, 0, ab, 0.5f, 11, 12);
    pl_cpu_dropout(y2, x, 0, 2 * T, T, C, C, 0, ba, 0.5f, 11, 12);
    CHECK(kc_same_bits(y1, y2 + n, n) && kc_same_bits(y1 + n, y2, n),
          "swapping the sample ids must swap the masks");
    /* two samples' masks at p = 0.5 agree on half their elements, sd 0.5 sqrt(n) */
    int64_t agree = 0;
    for (int64_t i = 0; i < n; i++)
        agree += (y1[i] == 0.0f) == (y1[n + i] == 0.0f);
    double dev = fabs((double)agree - 0.5 * (double)n) / (0.5 * sqrt((double)n));
    CHECK(dev < 5.0, "masks of samples 7 and 3 agree on %lld of %lld (%.1f sigma)",
          (long long)agree, (long long)n, dev);
    /* another seed or stream: another mask */
    pl_cpu_dropout(y2, x, 0, 2 * T, T, C, C, 0, ab, 0.5f, 12, 12);
    CHECK(!kc_same_bits(y1, y2, 2 * n), "the seed must change the mask");
    pl_cpu_dropout(y2, x, 0, 2 * T, T, C, C, 0, ab, 0.5f, 11, 13);
    CHECK(!kc_same_bits(y1, y2, 2 * n), "the stream must change the mask");
    free(x), free(y1), free(y2);
}

TEST(dropout_with_p_zero_is_the_identity)
{
    const int64_t B = 2, T = 3, C = 50, n = B * T * C, sample[2] = {0, 1};
    float *x = kc_random(n, -1, 1), *y = kc_floats(n), *z = kc_copy(x, n);
    pl_cpu_dropout(y, x, 0, B * T, T, C, C, 0, sample, 0.0f, 1, 2);
    CHECK(kc_same_bits(y, x, n), "cpu: p = 0 must copy");
    pl_ref_dropout(y, x, 0, B * T, T, C, C, 0, sample, 0.0f, 1, 2);
    CHECK(kc_same_bits(y, x, n), "ref: p = 0 must copy");
    pl_cpu_dropout(z, z, 0, B * T, T, C, C, 0, sample, 0.0f, 1, 2);
    CHECK(kc_same_bits(z, x, n), "cpu in place: p = 0 must leave the input");
    free(x), free(y), free(z);
}

typedef struct drop_ctx {
    const double *x;
    const float *R;
    const int64_t *sample;
    drop_shape d;
    double p;
    uint64_t seed, stream;
} drop_ctx;

/* sum(dropout(x) R) in float64, the mask drawn here from its definition. */
static double drop_objective(void *p)
{
    const drop_ctx *e = p;
    const drop_shape *d = &e->d;
    uint32_t threshold = pl_dropout_threshold(e->p);
    double s = 0.0;
    for (int64_t row = 0; row < d->B * d->T; row++)
        for (int64_t c = 0; c < d->C; c++) {
            uint64_t index = (uint64_t)((e->sample[row / d->T] * d->T + row % d->T) * d->Cg +
                                        d->c0 + c);
            if (pl_rng_u32(e->seed, e->stream, index) >= threshold)
                s += e->x[row * d->C + c] / (1.0 - e->p) * e->R[row * d->C + c];
        }
    return s;
}

TEST(dropout_of_the_gradient_is_the_backward_by_finite_differences)
{
    const drop_shape d = {2, 5, 37, 100, 21};
    int64_t n = d.B * d.T * d.C, *sample = random_samples(d.B);
    float *x = kc_random(n, -1, 1), *R = kc_random(n, -1, 1), *g = kc_floats(n);
    pl_ref_dropout(g, R, 0, d.B * d.T, d.T, d.C, d.Cg, d.c0, sample, 0.25f, 8, 9);
    double *xd = kc_to_double(x, n);
    drop_ctx ctx = {xd, R, sample, d, 0.25, 8, 9};
    /* linear in x: exact difference quotients; the analytic side rounds
     * 1/(1-p) and one product to fp32, 1e-7 relative */
    double err = kc_note("dropout bwd vs FD", kc_fd_check(xd, n, g, drop_objective, &ctx, 1e-3, 400));
    CHECK(err < 1e-6, "FD rel err %.3g", err);
    free(sample), free(x), free(R), free(g), free(xd);
}

/* ---- across instruction sets ----------------------------------------------- */

/* SwiGLU, RoPE and dropout are elementwise without FMA, and RMSNorm's dweight
 * and dbias sum in a fixed scalar order: the portable and AVX-512 builds give
 * the same bits (docs/kernels.md). Only RMSNorm's row reductions may differ. */
TEST(elementwise_kernels_and_rmsnorm_parameter_sums_give_the_same_bits_in_both_builds)
{
    if (pl_cpu_isa_set(PL_ISA_AVX512) != PL_ISA_AVX512) {
        printf("# no AVX-512 build or CPU: nothing to compare\n");
        return;
    }
    const int64_t N = 29, F = 515, C = 515, n2 = N * 2 * F;
    float *gu = swiglu_input(N, F, 20.0), *dy = kc_random(N * F, -1, 1);
    float *x = kc_random(N * C, -1, 1), *w = kc_random(C, 0.5, 1.5);
    float *y = kc_floats(N * C), *rstd = kc_floats(N), *dx = kc_floats(N * C);
    pl_ref_rmsnorm_fwd(y, rstd, x, w, NULL, N, C, 1e-5f); /* one rstd for both builds */
    const rope_shape r = {2, 7, 2, 3, 64, 48, 5};
    int64_t nq = rope_numel(&r), P = r.pos0 + r.T;
    float *cos_tab = kc_floats(P * r.rot / 2), *sin_tab = kc_floats(P * r.rot / 2);
    pl_rope_table(cos_tab, sin_tab, P, r.rot, 10000.0, NULL);
    float *q0 = kc_random(nq, -1, 1);
    const int64_t sample[1] = {12345};
    enum { SW_F, SW_B, RO_F, RO_B, DROP, DW, DB, NOUT };
    static const char *what[NOUT] = {"swiglu fwd", "swiglu bwd", "rope fwd", "rope bwd",
                                     "dropout",    "rmsnorm dweight", "rmsnorm dbias"};
    const int64_t len[NOUT] = {N * F, n2, nq, nq, N * C, C, C};
    float *out[2][NOUT]; /* per isa */
    for (int isa = 0; isa < 2; isa++) {
        float **o = out[isa];
        pl_cpu_isa_set((pl_isa)isa);
        o[SW_F] = kc_floats(N * F);
        pl_cpu_swiglu_fwd(o[SW_F], gu, N, F);
        o[SW_B] = kc_copy(gu, n2);
        pl_cpu_swiglu_bwd(o[SW_B], gu, dy, N, F);
        o[RO_F] = kc_copy(q0, nq);
        pl_cpu_rope_fwd(o[RO_F], cos_tab, sin_tab, r.B, r.T, r.G, r.QG, r.HS, r.rot, r.pos0);
        o[RO_B] = kc_copy(q0, nq);
        pl_cpu_rope_bwd(o[RO_B], cos_tab, sin_tab, r.B, r.T, r.G, r.QG, r.HS, r.rot, r.pos0);
        o[DROP] = kc_floats(N * C);
        pl_cpu_dropout(o[DROP], x, 0, N, N, C, C, 0, sample, 0.2f, 3, 4);
        o[DW] = kc_copy(w, C), o[DB] = kc_copy(w, C);
        memset(dx, 0, (size_t)(N * C) * sizeof *dx);
        pl_cpu_rmsnorm_bwd(dx, o[DW], o[DB], x, x, w, rstd, N, C);
    }
    for (int k = 0; k < NOUT; k++) {
        CHECK(kc_same_bits(out[0][k], out[1][k], len[k]), "%s: portable != avx512", what[k]);
        free(out[0][k]), free(out[1][k]);
    }
    free(gu), free(dy), free(x), free(w), free(y), free(rstd), free(dx), free(cos_tab);
    free(sin_tab), free(q0);
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(3);
        RUN(rmsnorm_matches_reference_and_finite_differences_with_and_without_bias);
        RUN(swiglu_matches_reference_and_finite_differences);
        RUN(swiglu_of_bf16_inputs_is_swiglu_of_the_widened_values);
        RUN(rope_matches_reference_and_finite_differences_and_leaves_v_and_tail_dims);
        RUN(rope_table_follows_the_published_llama31_scaling_and_plain_frequencies);
        RUN(dropout_twins_agree_bit_for_bit_at_every_alignment_thread_count_and_in_place);
        RUN(dropout_twins_agree_where_the_philox_counter_crosses_2_to_the_32);
        RUN(dropout_keeps_one_minus_p_of_a_million_elements_within_5_sigma_scaled_by_1_over_1_minus_p);
        RUN(dropout_of_a_column_slice_is_the_slice_of_the_full_width_mask);
        RUN(dropout_of_a_block_of_rows_equals_those_rows_of_the_whole);
        RUN(dropout_mask_follows_the_sample_id_not_the_batch_position);
        RUN(dropout_with_p_zero_is_the_identity);
        RUN(dropout_of_the_gradient_is_the_backward_by_finite_differences);
        kc_print_notes();
    }
    RUN(elementwise_kernels_and_rmsnorm_parameter_sums_give_the_same_bits_in_both_builds);
    return test_summary("kernels_llama");
}
