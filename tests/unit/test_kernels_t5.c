/* kernels: T5's pieces - the attention's relative position bias and softmax
 * scale (both twins), the bucket rule and bias tables (nn/relbias.h), and the
 * ReLU and GEGLU MLP activations.
 *
 * The attention twins are compared with a naive float64 attention written
 * here (grouped layout, causal or padded, scaled by the shape's scale, the
 * bias of each key-query distance added), which is also the forward of the
 * finite-difference checks of dqkv and of the bias gradient (L = sum(out * R)).
 * Shapes cover T not a multiple of the 64-row tiles, several tiles, grouped
 * query heads and padding in the second key tile. Structural: a zero bias with
 * scale 0 is bit for bit the plain kernel (the fast paths are untouched); the
 * bias gradient does not depend on the thread count. */
#include "kernel_check.h"
#include "kernels/kernels.h"
#include "nn/relbias.h"

typedef void (*att_fwd_fn)(float *, float *, const float *, const pl_attn_shape *, float *);
typedef void (*att_bwd_fn)(float *, const float *, const float *, const float *, const float *,
                           const pl_attn_shape *, float *);
static const att_fwd_fn fwd_twin[2] = {pl_ref_attention_fwd, pl_cpu_attention_fwd};
static const att_bwd_fn bwd_twin[2] = {pl_ref_attention_bwd, pl_cpu_attention_bwd};
static const char *twin_name[2] = {"ref", "cpu"};

static int64_t qkv_n(const pl_attn_shape *s)
{
    return s->B * s->T * s->G * (s->NH / s->G + 2) * s->HS;
}
static int64_t out_n(const pl_attn_shape *s) { return s->B * s->T * s->NH * s->HS; }
static int64_t lse_n(const pl_attn_shape *s) { return s->B * s->NH * s->T; }
static int64_t bias_n(const pl_attn_shape *s) { return s->NH * (2 * s->T - 1); }

/* grouped layout offsets: query head h's q at t, its group's k (which 1) or v (2) */
static int64_t at(const pl_attn_shape *s, int64_t b, int64_t t, int64_t h, int which)
{
    const int64_t QG = s->NH / s->G, g = h / QG;
    const int64_t slot = which == 0 ? h % QG : QG + which - 1;
    return (((b * s->T + t) * s->G + g) * (QG + 2) + slot) * s->HS;
}

typedef struct acase {
    pl_attn_shape s;
    int32_t kv_len[2];
    double *qkv_d, *bias_d; /* the finite-difference inputs */
    const float *R;         /* the objective's weights (dout) */
} acase;

/* Naive float64 attention with bias; out (B,T,NH,HS). */
static void naive(double *out, const double *qkv, const double *bias, const pl_attn_shape *s)
{
    const int64_t T = s->T, HS = s->HS;
    const double scale = s->scale > 0 ? s->scale : 1.0 / sqrt((double)HS);
    double *sc = kc_doubles(T);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->NH; h++)
            for (int64_t t = 0; t < T; t++) {
                int64_t n = s->causal ? t + 1 : T;
                if (s->kv_len && s->kv_len[b] < n)
                    n = s->kv_len[b];
                const double *q = qkv + at(s, b, t, h, 0);
                double mx = -INFINITY, z = 0.0;
                for (int64_t u = 0; u < n; u++) {
                    const double *k = qkv + at(s, b, u, h, 1);
                    double d = 0.0;
                    for (int64_t i = 0; i < HS; i++)
                        d += q[i] * k[i];
                    sc[u] = d * scale + bias[h * (2 * T - 1) + T - 1 + u - t];
                    mx = fmax(mx, sc[u]);
                }
                for (int64_t u = 0; u < n; u++)
                    z += exp(sc[u] - mx);
                double *o = out + ((b * T + t) * s->NH + h) * HS;
                for (int64_t i = 0; i < HS; i++)
                    o[i] = 0.0;
                for (int64_t u = 0; u < n; u++) {
                    const double *v = qkv + at(s, b, u, h, 2);
                    for (int64_t i = 0; i < HS; i++)
                        o[i] += exp(sc[u] - mx) / z * v[i];
                }
            }
    free(sc);
}

static double objective(void *ctx)
{
    acase *c = ctx;
    double *out = kc_doubles(out_n(&c->s));
    naive(out, c->qkv_d, c->bias_d, &c->s);
    double l = kc_dot(out, c->R, out_n(&c->s));
    free(out);
    return l;
}

static const struct {
    int64_t B, T, NH, G, HS;
    int causal, padded;
    float scale;
} cases[] = {{1, 7, 2, 2, 5, 1, 0, 1.0f},  {2, 70, 4, 2, 8, 0, 1, 1.0f},
             {1, 130, 2, 2, 16, 1, 0, 0.0f}, {2, 40, 3, 1, 6, 0, 1, 0.5f}};

static void case_init(acase *c, size_t i)
{
    memset(c, 0, sizeof *c);
    c->kv_len[0] = (int32_t)cases[i].T;
    c->kv_len[1] = (int32_t)(cases[i].T > 65 ? 66 : cases[i].T - 3);
    c->s = (pl_attn_shape){.B = cases[i].B, .T = cases[i].T, .NH = cases[i].NH, .G = cases[i].G,
                           .HS = cases[i].HS, .causal = cases[i].causal,
                           .kv_len = cases[i].padded ? c->kv_len : NULL, .NHg = cases[i].NH,
                           .scale = cases[i].scale};
}

TEST(attention_with_a_relative_bias_matches_naive_float64_attention)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        acase c;
        case_init(&c, i);
        pl_attn_shape *s = &c.s;
        float *qkv = kc_random(qkv_n(s), -1, 1), *bias = kc_random(bias_n(s), -2, 2);
        s->rel_bias = bias;
        float *ws = kc_floats((int64_t)pl_attention_workspace(s));
        double *qkv_d = kc_to_double(qkv, qkv_n(s)), *bias_d = kc_to_double(bias, bias_n(s));
        double *out_d = kc_doubles(out_n(s));
        naive(out_d, qkv_d, bias_d, s);
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(out_n(s)), *lse = kc_floats(lse_n(s));
            fwd_twin[k](out, lse, qkv, s, ws);
            /* fp32 scores of HS-term products plus a bias: a few ulp of max |out|;
             * a bias at the wrong distance gives O(0.1) */
            double e = kc_note(k ? "bias fwd cpu vs naive" : "bias fwd ref vs naive",
                               kc_rel_err_d(out, out_d, out_n(s)));
            CHECK(e < 5e-6, "%s case %zu: %.3g", twin_name[k], i, e);
            free(out), free(lse);
        }
        free(qkv), free(bias), free(ws), free(qkv_d), free(bias_d), free(out_d);
    }
}

TEST(attention_backward_with_a_relative_bias_matches_finite_differences_in_both_twins)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        acase c;
        case_init(&c, i);
        pl_attn_shape *s = &c.s;
        const int64_t nq = qkv_n(s), no = out_n(s), nb = bias_n(s);
        float *qkv = kc_random(nq, -1, 1), *bias = kc_random(nb, -2, 2), *R = kc_random(no, -1, 1);
        s->rel_bias = bias;
        float *ws = kc_floats((int64_t)pl_attention_workspace(s));
        c.qkv_d = kc_to_double(qkv, nq);
        c.bias_d = kc_to_double(bias, nb);
        c.R = R;
        float *dq[2], *db[2];
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(no), *lse = kc_floats(lse_n(s));
            dq[k] = kc_floats(nq), db[k] = kc_floats(nb);
            memset(dq[k], 0, (size_t)nq * sizeof(float));
            memset(db[k], 0, (size_t)nb * sizeof(float));
            fwd_twin[k](out, lse, qkv, s, ws);
            s->drel_bias = db[k];
            bwd_twin[k](dq[k], R, qkv, out, lse, s, ws);
            s->drel_bias = NULL;
            /* central differences of the float64 forward (kc_fd_check): what is left
             * is the fp32 rounding of the analytic gradients, ~1e-6; a missed or
             * misplaced bias term is O(1) */
            double eq = kc_fd_check(c.qkv_d, nq, dq[k], objective, &c, 1e-3, 200);
            double eb = kc_fd_check(c.bias_d, nb, db[k], objective, &c, 1e-3, 200);
            kc_note(k ? "bias bwd cpu vs fd (dqkv)" : "bias bwd ref vs fd (dqkv)", eq);
            kc_note(k ? "bias bwd cpu vs fd (dbias)" : "bias bwd ref vs fd (dbias)", eb);
            CHECK(eq < 1e-4 && eb < 1e-4, "%s case %zu: dqkv %.3g dbias %.3g", twin_name[k], i,
                  eq, eb);
            free(out), free(lse);
        }
        double e = kc_note("bias bwd cpu vs ref (dbias)", kc_rel_err(db[1], db[0], nb));
        CHECK(e < 1e-5, "case %zu: cpu vs ref bias gradient %.3g", i, e);
        free(qkv), free(bias), free(R), free(ws), free(c.qkv_d), free(c.bias_d);
        for (int k = 0; k < 2; k++)
            free(dq[k]), free(db[k]);
    }
}

TEST(a_zero_bias_at_the_default_scale_is_bit_for_bit_the_plain_kernel)
{
    acase c;
    case_init(&c, 2);
    pl_attn_shape *s = &c.s, plain = c.s;
    const int64_t nq = qkv_n(s), no = out_n(s), nb = bias_n(s);
    float *qkv = kc_random(nq, -1, 1), *bias = kc_floats(nb), *R = kc_random(no, -1, 1);
    memset(bias, 0, (size_t)nb * sizeof(float));
    s->rel_bias = bias;
    float *ws = kc_floats((int64_t)pl_attention_workspace(s));
    float *o1 = kc_floats(no), *l1 = kc_floats(lse_n(s)), *o2 = kc_floats(no), *l2 = kc_floats(lse_n(s));
    float *d1 = kc_floats(nq), *d2 = kc_floats(nq);
    memset(d1, 0, (size_t)nq * sizeof(float));
    memset(d2, 0, (size_t)nq * sizeof(float));
    pl_cpu_attention_fwd(o1, l1, qkv, &plain, ws);
    pl_cpu_attention_fwd(o2, l2, qkv, s, ws);
    pl_cpu_attention_bwd(d1, R, qkv, o1, l1, &plain, ws);
    pl_cpu_attention_bwd(d2, R, qkv, o2, l2, s, ws);
    /* forward adds +0.0 to each score; backward's P is exp(scale qk + 0 - lse) in
     * another association, so it is compared to rounding */
    CHECK(kc_same_bits(o1, o2, no) && kc_same_bits(l1, l2, lse_n(s)),
          "a zero bias changed the forward");
    double e = kc_rel_err(d2, d1, nq);
    CHECK(e < 1e-6, "a zero bias changed the backward by %.3g", e);
    CHECK(pl_attention_workspace(&plain) < pl_attention_workspace(s),
          "the bias's per-sample gradient area is not in the workspace");
    free(qkv), free(bias), free(R), free(ws), free(o1), free(l1), free(o2), free(l2), free(d1),
        free(d2);
}

TEST(the_bias_gradient_does_not_depend_on_the_thread_count)
{
    acase c;
    case_init(&c, 1);
    pl_attn_shape *s = &c.s;
    const int64_t nq = qkv_n(s), no = out_n(s), nb = bias_n(s);
    float *qkv = kc_random(nq, -1, 1), *bias = kc_random(nb, -2, 2), *R = kc_random(no, -1, 1);
    s->rel_bias = bias;
    float *ws = NULL; /* sized for the larger thread count (kernels.h) */
    KC_WITH_THREADS(2, ws = kc_floats((int64_t)pl_attention_workspace(s)));
    float *out = kc_floats(no), *lse = kc_floats(lse_n(s)), *db[2], *dq = kc_floats(nq);
    KC_WITH_THREADS(2, pl_cpu_attention_fwd(out, lse, qkv, s, ws));
    for (int k = 0; k < 2; k++) {
        db[k] = kc_floats(nb);
        memset(db[k], 0, (size_t)nb * sizeof(float));
        s->drel_bias = db[k];
        KC_WITH_THREADS(k ? 1 : 2, pl_cpu_attention_bwd(dq, R, qkv, out, lse, s, ws));
    }
    CHECK(kc_same_bits(db[0], db[1], nb), "1 and 2 threads give different bias gradients");
    free(qkv), free(bias), free(R), free(ws), free(out), free(lse), free(dq), free(db[0]),
        free(db[1]);
}

TEST(decoding_with_scale_and_bias_equals_the_last_row_of_the_fused_attention)
{
    const int64_t T = 37, NH = 4, G = 2, HS = 8, QG = NH / G, row = (QG + 2) * G * HS;
    float *bias = kc_random(NH * (2 * T - 1), -2, 2);
    pl_attn_shape s = {.B = 1, .T = T, .NH = NH, .G = G, .HS = HS, .causal = 1, .NHg = NH,
                       .scale = 1.0f, .rel_bias = bias};
    float *qkv = kc_random(qkv_n(&s), -1, 1), *out = kc_floats(out_n(&s)), *lse = kc_floats(lse_n(&s));
    float *ws = kc_floats((int64_t)pl_attention_workspace(&s));
    float *kc = kc_floats(T * G * HS), *vc = kc_floats(T * G * HS), *dec = kc_floats(NH * HS);
    float *scores = kc_floats(NH * T);
    pl_cpu_attention_fwd(out, lse, qkv, &s, ws);
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t d = 0; d < HS; d++) {
                kc[(t * G + g) * HS + d] = qkv[t * row + (g * (QG + 2) + QG) * HS + d];
                vc[(t * G + g) * HS + d] = qkv[t * row + (g * (QG + 2) + QG + 1) * HS + d];
            }
    for (int k = 0; k < 2; k++) {
        /* query T-1 against keys 0..T-1: distances -(T-1)..0, elements 0..T-1 of each row */
        (k ? pl_cpu_attention_decode : pl_ref_attention_decode)(
            dec, qkv + (T - 1) * row, kc, vc, T, NH, G, HS, 1.0f, bias, 2 * T - 1, scores);
        double e = kc_note("decode with bias vs fused", kc_rel_err(dec, out + (T - 1) * NH * HS,
                                                                   NH * HS));
        CHECK(e < 2e-6, "%s: %.3g", twin_name[k], e);
    }
    free(bias), free(qkv), free(out), free(lse), free(ws), free(kc), free(vc), free(dec),
        free(scores);
}

TEST(buckets_follow_the_t5_rule)
{
    /* transformers' rule by hand: bidirectional 32 buckets, max distance 128: 16 per
     * side, exact below 8, then 8 + floor(log(d/8) / log(16) * 8), capped at 15 */
    const pl_nn_relbias_spec bi = {32, 128, 1}, uni = {32, 128, 0};
    for (int64_t d = -300; d <= 300; d++) {
        const int64_t a = d < 0 ? -d : d;
        int64_t want = a < 8 ? a : 8 + (int64_t)(log((double)a / 8) / log(16.0) * 8);
        want = (want > 15 ? 15 : want) + (d > 0 ? 16 : 0);
        /* exact powers (d = 16, 32, 64, 128) sit on a float boundary: torch's float32
         * arithmetic decides there (tests/scripts/t5_hf.sh compares those with torch) */
        const int boundary = a == 16 || a == 32 || a == 64 || a == 128;
        CHECK(boundary || pl_nn_relbias_bucket(&bi, d) == want, "bidirectional d=%lld: %lld, "
              "expected %lld", (long long)d, (long long)pl_nn_relbias_bucket(&bi, d),
              (long long)want);
        /* unidirectional: future keys share bucket 0; 32 buckets, exact below 16 */
        int64_t wu = d >= 0 ? 0 : a < 16 ? a : 16 + (int64_t)(log((double)a / 16) / log(8.0) * 16);
        wu = wu > 31 ? 31 : wu;
        CHECK(pl_nn_relbias_bucket(&uni, d) == wu, "unidirectional d=%lld: %lld, expected %lld",
              (long long)d, (long long)pl_nn_relbias_bucket(&uni, d), (long long)wu);
    }
}

TEST(bias_vectors_read_and_scatter_the_table_by_bucket)
{
    const pl_nn_relbias_spec sp = {8, 20, 1};
    const int64_t NHg = 4, h0 = 2, NH = 2, R = 30, nb = 8 * NHg;
    float *table = kc_random(nb, -1, 1), *bias = kc_floats(NH * (2 * R - 1));
    pl_nn_relbias_fill(bias, table, &sp, NHg, h0, NH, R);
    int ok = 1;
    for (int64_t h = 0; h < NH; h++)
        for (int64_t d = -(R - 1); d < R; d++)
            ok &= bias[h * (2 * R - 1) + R - 1 + d] ==
                  table[pl_nn_relbias_bucket(&sp, d) * NHg + h0 + h];
    CHECK(ok, "a bias element is not its table entry");
    /* the scatter is the fill's transpose: <fill(t), g> = <t, grad(g)> */
    float *g = kc_random(NH * (2 * R - 1), -1, 1), *dt = kc_floats(nb);
    memset(dt, 0, (size_t)nb * sizeof(float));
    pl_nn_relbias_grad(dt, g, &sp, NHg, h0, NH, R);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < NH * (2 * R - 1); i++)
        lhs += (double)bias[i] * g[i];
    for (int64_t i = 0; i < nb; i++)
        rhs += (double)table[i] * dt[i];
    CHECK(fabs(lhs - rhs) < 1e-4 * (fabs(lhs) + 1), "fill and scatter disagree: %g vs %g", lhs,
          rhs);
    int others = 1; /* other ranks' heads get nothing */
    for (int64_t b = 0; b < 8; b++)
        others &= dt[b * NHg] == 0.0f && dt[b * NHg + 1] == 0.0f;
    CHECK(others, "the scatter wrote another rank's heads");
    free(table), free(bias), free(g), free(dt);
}

/* ---- ReLU and GEGLU --------------------------------------------------------- */

typedef struct actx {
    double *x;
    const float *R;
    int64_t N, F;
    int geglu;
} actx;

static double act_objective(void *ctx)
{
    actx *a = ctx;
    double l = 0;
    for (int64_t n = 0; n < a->N; n++)
        for (int64_t f = 0; f < a->F; f++) {
            double y;
            if (a->geglu) {
                const double g = a->x[n * 2 * a->F + f], u = a->x[n * 2 * a->F + a->F + f];
                y = 0.5 * g * (1 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u;
            } else {
                y = a->x[n * a->F + f] > 0 ? a->x[n * a->F + f] : 0;
            }
            l += y * a->R[n * a->F + f];
        }
    return l;
}

TEST(relu_and_geglu_twins_agree_and_match_finite_differences)
{
    const int64_t N = 37, F = 29;
    for (int geglu = 0; geglu < 2; geglu++) {
        const int64_t ni = geglu ? N * 2 * F : N * F, no = N * F;
        float *x = kc_random(ni, -2, 2), *R = kc_random(no, -1, 1);
        for (int64_t i = 0; i < ni; i++) /* off ReLU's kink by more than the step h */
            x[i] = fabsf(x[i]) < 0.01f ? 0.5f : x[i];
        float *y[2], *dx[2];
        for (int k = 0; k < 2; k++) {
            y[k] = kc_floats(no), dx[k] = kc_random(ni, -1, 1);
        }
        memcpy(dx[1], dx[0], (size_t)ni * sizeof(float));
        float *dx0 = kc_copy(dx[0], ni);
        if (geglu) {
            pl_ref_geglu_fwd(y[0], x, N, F), pl_cpu_geglu_fwd(y[1], x, N, F);
            pl_ref_geglu_bwd(dx[0], x, R, N, F), pl_cpu_geglu_bwd(dx[1], x, R, N, F);
        } else {
            pl_ref_relu_fwd(y[0], x, no), pl_cpu_relu_fwd(y[1], x, no);
            pl_ref_relu_bwd(dx[0], x, R, no), pl_cpu_relu_bwd(dx[1], x, R, no);
        }
        CHECK(kc_same_bits(y[0], y[1], no) && kc_same_bits(dx[0], dx[1], ni),
              "%s: the twins differ (the same formulas, the same bits)", geglu ? "geglu" : "relu");
        for (int64_t i = 0; i < ni; i++) /* the gradient alone: the kernels add into dx */
            dx[0][i] -= dx0[i];
        actx a = {kc_to_double(x, ni), R, N, F, geglu};
        double e = kc_note(geglu ? "geglu bwd vs fd" : "relu bwd vs fd",
                           kc_fd_check(a.x, ni, dx[0], act_objective, &a, 1e-3, 400));
        /* fp32 rounding of the analytic gradient; ReLU's is exact */
        CHECK(e < 1e-5, "%s: %.3g", geglu ? "geglu" : "relu", e);
        free(x), free(R), free(a.x), free(dx0);
        for (int k = 0; k < 2; k++)
            free(y[k]), free(dx[k]);
    }
}

/* The bf16-input ReLU and GEGLU (--bf16's saved fc1 output) are the fp32 kernels of the
 * same twin on the widened values, bit for bit, at sizes below and above the threads'
 * threshold (2 threads). */
TEST(relu_and_geglu_of_bf16_inputs_are_the_kernels_of_the_widened_values)
{
    static const int64_t shapes[][2] = {/* N, F */ {1, 1}, {3, 37}, {300, 130}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int geglu = 0; geglu < 2; geglu++) {
            const int64_t N = shapes[s][0], F = shapes[s][1];
            const int64_t ni = geglu ? N * 2 * F : N * F, no = N * F;
            float *x = kc_random(ni, -4, 4), *xw = kc_floats(ni), *R = kc_random(no, -1, 1);
            uint16_t *h = malloc((size_t)ni * sizeof *h);
            pl_ref_f32_to_bf16(h, x, 1, ni, ni);
            for (int64_t i = 0; i < ni; i++)
                xw[i] = pl_ref_bf16_to_f32(h[i]);
            for (int twin = 0; twin < 2; twin++) {
                float *a = kc_floats(no), *b = kc_floats(no), *d0 = kc_random(ni, -1, 1);
                float *d1 = kc_copy(d0, ni), *d2 = kc_copy(d0, ni);
                if (geglu && twin) {
                    KC_WITH_THREADS(2, pl_cpu_geglu_fwd(a, xw, N, F));
                    KC_WITH_THREADS(2, pl_cpu_geglu_fwd_bf16(b, h, N, F));
                    KC_WITH_THREADS(2, pl_cpu_geglu_bwd(d1, xw, R, N, F));
                    KC_WITH_THREADS(2, pl_cpu_geglu_bwd_bf16(d2, h, R, N, F));
                } else if (geglu) {
                    pl_ref_geglu_fwd(a, xw, N, F), pl_ref_geglu_fwd_bf16(b, h, N, F);
                    pl_ref_geglu_bwd(d1, xw, R, N, F), pl_ref_geglu_bwd_bf16(d2, h, R, N, F);
                } else if (twin) {
                    KC_WITH_THREADS(2, pl_cpu_relu_fwd(a, xw, no));
                    KC_WITH_THREADS(2, pl_cpu_relu_fwd_bf16(b, h, no));
                    KC_WITH_THREADS(2, pl_cpu_relu_bwd(d1, xw, R, no));
                    KC_WITH_THREADS(2, pl_cpu_relu_bwd_bf16(d2, h, R, no));
                } else {
                    pl_ref_relu_fwd(a, xw, no), pl_ref_relu_fwd_bf16(b, h, no);
                    pl_ref_relu_bwd(d1, xw, R, no), pl_ref_relu_bwd_bf16(d2, h, R, no);
                }
                CHECK(kc_same_bits(a, b, no) && kc_same_bits(d1, d2, ni),
                      "%s %s N=%lld F=%lld: the bf16 input's result differs",
                      geglu ? "geglu" : "relu", twin_name[twin], (long long)N, (long long)F);
                CHECK(!kc_same_bits(d0, d2, ni), "%s %s: the backward added nothing",
                      geglu ? "geglu" : "relu", twin_name[twin]);
                free(a), free(b), free(d0), free(d1), free(d2);
            }
            free(x), free(xw), free(R), free(h);
        }
}

int main(void)
{
    kc_seed(15);
    RUN(attention_with_a_relative_bias_matches_naive_float64_attention);
    RUN(attention_backward_with_a_relative_bias_matches_finite_differences_in_both_twins);
    RUN(a_zero_bias_at_the_default_scale_is_bit_for_bit_the_plain_kernel);
    RUN(the_bias_gradient_does_not_depend_on_the_thread_count);
    RUN(decoding_with_scale_and_bias_equals_the_last_row_of_the_fused_attention);
    RUN(buckets_follow_the_t5_rule);
    RUN(bias_vectors_read_and_scatter_the_table_by_bucket);
    RUN(relu_and_geglu_twins_agree_and_match_finite_differences);
    RUN(relu_and_geglu_of_bf16_inputs_are_the_kernels_of_the_widened_values);
    kc_print_notes();
    return test_summary("kernels_t5");
}
