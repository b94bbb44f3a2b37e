/* kernels: self-attention (flash-style cpu twin, row-wise reference).
 *
 * Both twins are compared with naive float64 O(T^2) softmax attentions
 * written here: one in GPT's per-head [q, k, v] layout (multi-head, causal),
 * one general (grouped layout, causal or not, padding, dropout factors from
 * the formula of kernels.h). The general one is also the forward of the
 * finite-difference checks of the backward (L = sum(out * R), so dout = R;
 * the dropout mask is fixed by its key, so L is differentiable). Shapes
 * cover T = 1, T not a multiple of the 64-row tiles nor of the 4 keys of a
 * Philox block, several tiles, HS = 1, odd and not a power of two, kv_len in
 * the first and in the second key tile. Structural checks: grouped-query
 * attention equals multi-head attention on duplicated k/v heads, a tensor-
 * parallel slice equals its heads of the full call, padded keys never
 * matter, nothing dropped equals no dropout, 1 thread equals 2. */
#include "kernel_check.h"
#include "kernels/kernels.h"

#include "base/rng.h"

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

static float *workspace_for(const pl_attn_shape *s)
{
    /* exactly the promised size, so AddressSanitizer catches any overrun */
    return kc_floats((int64_t)pl_attention_workspace(s));
}

/* ---- the GPT case, in the per-head layout --------------------------------- */

typedef struct ashape {
    int64_t B, T, NH, HS;
} ashape;

/* Multi-head, causal, no padding, no dropout: G = NH. */
static pl_attn_shape gpt_shape(ashape s)
{
    return (pl_attn_shape){.B = s.B, .T = s.T, .NH = s.NH, .G = s.NH, .HS = s.HS, .causal = 1,
                           .NHg = s.NH};
}

/* Naive float64 causal attention on qkv (B,T,NH,3,HS): out (B,T,NH,HS), lse (B,NH,T). */
static void naive_mha(double *out, double *lse, const double *qkv, ashape s)
{
    const int64_t T = s.T, NH = s.NH, HS = s.HS;
    double *sc = kc_doubles(T);
    for (int64_t b = 0; b < s.B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t t = 0; t < T; t++) {
                const double *q = qkv + ((b * T + t) * NH + h) * 3 * HS;
                double mx = -INFINITY;
                for (int64_t u = 0; u <= t; u++) {
                    const double *k = qkv + ((b * T + u) * NH + h) * 3 * HS + HS;
                    double d = 0.0;
                    for (int64_t i = 0; i < HS; i++)
                        d += q[i] * k[i];
                    sc[u] = d / sqrt((double)HS);
                    mx = fmax(mx, sc[u]);
                }
                double z = 0.0;
                for (int64_t u = 0; u <= t; u++)
                    z += exp(sc[u] - mx);
                double *o = out + ((b * T + t) * NH + h) * HS;
                for (int64_t i = 0; i < HS; i++)
                    o[i] = 0.0;
                for (int64_t u = 0; u <= t; u++) {
                    const double *v = qkv + ((b * T + u) * NH + h) * 3 * HS + 2 * HS;
                    double pr = exp(sc[u] - mx) / z;
                    for (int64_t i = 0; i < HS; i++)
                        o[i] += pr * v[i];
                }
                lse[(b * NH + h) * T + t] = mx + log(z);
            }
    free(sc);
}

static const ashape gpt_shapes[] = {{1, 1, 1, 1},  {1, 7, 2, 5},    {2, 70, 3, 12}, {1, 130, 2, 64},
                                    {2, 64, 1, 3}, {1, 200, 1, 80}, {1, 256, 2, 64}};

TEST(attention_with_g_equal_nh_matches_naive_per_head_causal_attention)
{
    for (size_t i = 0; i < sizeof gpt_shapes / sizeof *gpt_shapes; i++) {
        ashape a = gpt_shapes[i];
        pl_attn_shape s = gpt_shape(a);
        float *qkv = kc_random(qkv_n(&s), -1.5, 1.5), *ws = workspace_for(&s);
        double *qkv_d = kc_to_double(qkv, qkv_n(&s));
        double *out_d = kc_doubles(out_n(&s)), *lse_d = kc_doubles(lse_n(&s));
        naive_mha(out_d, lse_d, qkv_d, a);
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(out_n(&s)), *lse = kc_floats(lse_n(&s));
            fwd_twin[k](out, lse, qkv, &s, ws);
            /* fp32 scores are HS-term dot products (|q.k| <~ 2 HS); softmax
             * weights and the weighted sum of up to T values add a few ulp:
             * ~1e-6 of max |out| and of max |lse| seen; a misplaced mask or
             * tile gives O(0.1). */
            double eo = kc_rel_err_d(out, out_d, out_n(&s));
            double el = kc_rel_err_d(lse, lse_d, lse_n(&s));
            kc_note(k ? "gpt fwd cpu vs naive per-head" : "gpt fwd ref vs naive per-head",
                    fmax(eo, el));
            CHECK(eo < 5e-6 && el < 5e-6, "%s B=%lld T=%lld NH=%lld HS=%lld: out %.3g lse %.3g",
                  twin_name[k], (long long)a.B, (long long)a.T, (long long)a.NH, (long long)a.HS,
                  eo, el);
            free(out), free(lse);
        }
        free(qkv), free(ws), free(qkv_d), free(out_d), free(lse_d);
    }
}

TEST(attention_backward_cpu_matches_reference_for_gpt_shapes)
{
    for (size_t i = 0; i < sizeof gpt_shapes / sizeof *gpt_shapes; i++) {
        pl_attn_shape s = gpt_shape(gpt_shapes[i]);
        int64_t nq = qkv_n(&s), no = out_n(&s);
        float *qkv = kc_random(nq, -1.5, 1.5), *ws = workspace_for(&s);
        float *out = kc_floats(no), *lse = kc_floats(lse_n(&s)), *dout = kc_random(no, -1, 1);
        pl_ref_attention_fwd(out, lse, qkv, &s, ws);
        float *d0 = kc_random(nq, -1, 1), *dc = kc_copy(d0, nq), *dr = kc_copy(d0, nq);
        pl_cpu_attention_bwd(dc, dout, qkv, out, lse, &s, ws);
        pl_ref_attention_bwd(dr, dout, qkv, out, lse, &s, ws);
        /* Compare the increments (the random initial gradient is added by both). */
        for (int64_t j = 0; j < nq; j++)
            dc[j] -= d0[j], dr[j] -= d0[j];
        /* D = rowsum(dout * out) (cpu) versus sum_j P_j dP_j (ref) and tiled
         * versus row-wise sums over up to T keys: ~1e-6 of max |dqkv|. */
        double err = kc_note("gpt bwd cpu vs ref", kc_rel_err(dc, dr, nq));
        CHECK(err < 2e-5, "B=%lld T=%lld NH=%lld HS=%lld: rel err %.3g", (long long)s.B,
              (long long)s.T, (long long)s.NH, (long long)s.HS, err);
        free(qkv), free(ws), free(out), free(lse), free(dout), free(d0), free(dc), free(dr);
    }
}

/* ---- the general case -------------------------------------------------------- */

/* Masks and dropout of a case. pad: ragged kv_len (see case_init). */
typedef struct amode {
    int causal, pad;
    float p;
} amode;

/* A shape with the arrays it points at (not to be copied: s points into it). */
typedef struct acase {
    pl_attn_shape s;
    int32_t kv_len[4];
    int64_t sample[4];
} acase;

/* B <= 4. Padded samples keep about 2/3 (even b) or 1/3 (odd b) of their
 * keys, so that kv_len falls in the first or the second key tile when T > 64.
 * Sample ids are large (indices beyond 2^32, so the Philox counter's high
 * word is exercised) and the seed and stream use both of their halves. */
static void case_init(acase *c, int64_t B, int64_t T, int64_t NH, int64_t G, int64_t HS, amode m)
{
    memset(c, 0, sizeof *c);
    for (int64_t b = 0; b < B && b < 4; b++) {
        c->kv_len[b] = (int32_t)(b % 2 == 0 ? 2 * T / 3 + 1 : T / 3 + 1);
        if (c->kv_len[b] > T)
            c->kv_len[b] = (int32_t)T;
        c->sample[b] = 3000000019LL + 7919 * b;
    }
    c->s = (pl_attn_shape){.B = B, .T = T, .NH = NH, .G = G, .HS = HS, .causal = m.causal,
                           .kv_len = m.pad ? c->kv_len : NULL, .dropout = m.p,
                           .drop_seed = 0x0123456789abcdefull, .drop_stream = 0xfedcba9876543ull,
                           .sample = c->sample, .NHg = NH, .h0 = 0};
}

/* Does query t of sample b see key u? */
static int sees(const pl_attn_shape *s, int64_t b, int64_t t, int64_t u)
{
    return (!s->causal || u <= t) && (!s->kv_len || u < s->kv_len[b]);
}

/* Z/(1-p) of every (b, h, t, u), (B,NH,T,T), from the index formula of
 * kernels.h; all 1 without dropout. */
static double *drop_factors(const pl_attn_shape *s)
{
    const int64_t T = s->T;
    double *z = kc_doubles(s->B * s->NH * T * T);
    uint32_t thr = pl_dropout_threshold(s->dropout);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->NH; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t u = 0; u < T; u++) {
                    uint64_t head =
                        (uint64_t)s->sample[b] * (uint64_t)s->NHg + (uint64_t)(s->h0 + h);
                    uint64_t idx = (head * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)u;
                    int kept = s->dropout == 0.0f ||
                               pl_rng_u32(s->drop_seed, s->drop_stream, idx) >= thr;
                    z[((b * s->NH + h) * T + t) * T + u] =
                        kept ? 1.0 / (1.0 - (double)s->dropout) : 0.0;
                }
    return z;
}

/* Offset of query head h's q at (b, t) in the grouped layout; its group's k
 * is at + (QG - j) HS, v one HS further. */
static int64_t q_at(const pl_attn_shape *s, int64_t b, int64_t t, int64_t h)
{
    const int64_t QG = s->NH / s->G;
    return (((b * s->T + t) * s->G + h / QG) * (QG + 2) + h % QG) * s->HS;
}
static int64_t k_at(const pl_attn_shape *s, int64_t b, int64_t t, int64_t h)
{
    const int64_t QG = s->NH / s->G;
    return (((b * s->T + t) * s->G + h / QG) * (QG + 2) + QG) * s->HS;
}

/* Naive float64 attention with masks and dropout factors z (drop_factors);
 * lse may be NULL. */
static void naive_attention(double *out, double *lse, const double *qkv, const pl_attn_shape *s,
                            const double *z)
{
    const int64_t T = s->T, NH = s->NH, HS = s->HS;
    double *sc = kc_doubles(T);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t t = 0; t < T; t++) {
                const double *q = qkv + q_at(s, b, t, h);
                double mx = -INFINITY;
                for (int64_t u = 0; u < T; u++) {
                    if (!sees(s, b, t, u))
                        continue;
                    const double *k = qkv + k_at(s, b, u, h);
                    double d = 0.0;
                    for (int64_t i = 0; i < HS; i++)
                        d += q[i] * k[i];
                    sc[u] = d / sqrt((double)HS);
                    mx = fmax(mx, sc[u]);
                }
                double sum = 0.0;
                for (int64_t u = 0; u < T; u++)
                    if (sees(s, b, t, u))
                        sum += exp(sc[u] - mx);
                double *o = out + ((b * T + t) * NH + h) * HS;
                for (int64_t i = 0; i < HS; i++)
                    o[i] = 0.0;
                for (int64_t u = 0; u < T; u++) {
                    if (!sees(s, b, t, u))
                        continue;
                    const double *v = qkv + k_at(s, b, u, h) + HS;
                    double w = exp(sc[u] - mx) / sum * z[((b * NH + h) * T + t) * T + u];
                    for (int64_t i = 0; i < HS; i++)
                        o[i] += w * v[i];
                }
                if (lse)
                    lse[(b * NH + h) * T + t] = mx + log(sum);
            }
    free(sc);
}

/* Every combination of causal, padding and dropout p in {0, 0.1, 0.5}. */
static const amode all_modes[] = {{1, 0, 0.0f}, {0, 0, 0.0f}, {1, 1, 0.0f}, {0, 1, 0.0f},
                                  {1, 0, 0.1f}, {0, 0, 0.1f}, {1, 1, 0.1f}, {0, 1, 0.1f},
                                  {1, 0, 0.5f}, {0, 0, 0.5f}, {1, 1, 0.5f}, {0, 1, 0.5f}};
#define N_MODES (sizeof all_modes / sizeof *all_modes)

/* Head configurations: grouped-query (QG = 4), multi-query (G = 1), multi-head. */
static const int64_t heads[][2] = {{8, 2}, {8, 1}, {4, 4}};
/* B, T, HS of the twin comparisons. */
static const int64_t twin_shapes[][3] = {{2, 70, 12}, {1, 130, 16}};

static void mode_str(char *buf, size_t n, const acase *c)
{
    snprintf(buf, n, "B=%lld T=%lld NH=%lld G=%lld HS=%lld causal=%d pad=%d p=%.2f",
             (long long)c->s.B, (long long)c->s.T, (long long)c->s.NH, (long long)c->s.G,
             (long long)c->s.HS, c->s.causal, c->s.kv_len != NULL, (double)c->s.dropout);
}

TEST(attention_forward_twins_match_naive_for_gqa_masks_and_dropout)
{
    for (size_t sh = 0; sh < 2; sh++)
        for (size_t hc = 0; hc < 3; hc++)
            for (size_t m = 0; m < N_MODES; m++) {
                acase c;
                case_init(&c, twin_shapes[sh][0], twin_shapes[sh][1], heads[hc][0], heads[hc][1],
                          twin_shapes[sh][2], all_modes[m]);
                const pl_attn_shape *s = &c.s;
                float *qkv = kc_random(qkv_n(s), -1.5, 1.5), *ws = workspace_for(s);
                double *qkv_d = kc_to_double(qkv, qkv_n(s)), *z = drop_factors(s);
                double *out_d = kc_doubles(out_n(s)), *lse_d = kc_doubles(lse_n(s));
                naive_attention(out_d, lse_d, qkv_d, s, z);
                for (int k = 0; k < 2; k++) {
                    float *out = kc_floats(out_n(s)), *lse = kc_floats(lse_n(s));
                    fwd_twin[k](out, lse, qkv, s, ws);
                    /* As for the GPT case; dropout scales kept terms by up
                     * to 2, and the kernels' 1/(1-p) is rounded to fp32
                     * (6e-8 relative): same few ulp of max |out|. */
                    double eo = kc_rel_err_d(out, out_d, out_n(s));
                    double el = kc_rel_err_d(lse, lse_d, lse_n(s));
                    kc_note(k ? "fwd cpu vs naive (all modes)" : "fwd ref vs naive (all modes)",
                            fmax(eo, el));
                    char what[160];
                    mode_str(what, sizeof what, &c);
                    CHECK(eo < 5e-6 && el < 5e-6, "%s %s: out %.3g lse %.3g", twin_name[k], what,
                          eo, el);
                    free(out), free(lse);
                }
                free(qkv), free(ws), free(qkv_d), free(z), free(out_d), free(lse_d);
            }
}

TEST(attention_backward_cpu_matches_reference_for_gqa_masks_and_dropout)
{
    for (size_t sh = 0; sh < 2; sh++)
        for (size_t hc = 0; hc < 3; hc++)
            for (size_t m = 0; m < N_MODES; m++) {
                acase c;
                case_init(&c, twin_shapes[sh][0], twin_shapes[sh][1], heads[hc][0], heads[hc][1],
                          twin_shapes[sh][2], all_modes[m]);
                const pl_attn_shape *s = &c.s;
                int64_t nq = qkv_n(s), no = out_n(s);
                float *qkv = kc_random(nq, -1.5, 1.5), *ws = workspace_for(s);
                float *out = kc_floats(no), *lse = kc_floats(lse_n(s)),
                      *dout = kc_random(no, -1, 1);
                pl_ref_attention_fwd(out, lse, qkv, s, ws);
                float *d0 = kc_random(nq, -1, 1), *dc = kc_copy(d0, nq), *dr = kc_copy(d0, nq);
                pl_cpu_attention_bwd(dc, dout, qkv, out, lse, s, ws);
                pl_ref_attention_bwd(dr, dout, qkv, out, lse, s, ws);
                for (int64_t j = 0; j < nq; j++)
                    dc[j] -= d0[j], dr[j] -= d0[j];
                /* As for the GPT case; a group's dk, dv add QG heads' terms
                 * (in another order in each twin): a few more ulp. */
                double err = kc_note("bwd cpu vs ref (all modes)", kc_rel_err(dc, dr, nq));
                char what[160];
                mode_str(what, sizeof what, &c);
                CHECK(err < 2e-5, "%s: rel err %.3g", what, err);
                free(qkv), free(ws), free(out), free(lse), free(dout), free(d0), free(dc),
                    free(dr);
            }
}

typedef struct att_ctx {
    const double *qkv, *z;
    double *out;
    const float *R;
    const pl_attn_shape *s;
} att_ctx;

static double att_objective(void *p)
{
    att_ctx *c = p;
    naive_attention(c->out, NULL, c->qkv, c->s, c->z);
    return kc_dot(c->out, c->R, out_n(c->s));
}

TEST(attention_backward_matches_finite_differences_for_gqa_masks_and_dropout)
{
    /* B, T, NH, G, HS: GQA at T < 8 (kv_len 5 and 3), MQA across two key
     * tiles (kv_len 47 and 24), MHA with T = 9 (not a multiple of 4). */
    static const int64_t shapes[][5] = {{2, 7, 4, 2, 5}, {2, 70, 2, 1, 3}, {1, 9, 2, 2, 4}};
    static const amode modes[] = {{1, 0, 0.0f}, {0, 0, 0.0f}, {1, 1, 0.0f},
                                  {0, 1, 0.1f}, {1, 0, 0.5f}, {1, 1, 0.5f}};
    static const char *names[2][3] = {{"dq ref vs FD", "dk ref vs FD", "dv ref vs FD"},
                                      {"dq cpu vs FD", "dk cpu vs FD", "dv cpu vs FD"}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            acase c;
            case_init(&c, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4],
                      modes[m]);
            const pl_attn_shape *s = &c.s;
            const int64_t nq = qkv_n(s), no = out_n(s), QG = s->NH / s->G;
            float *qkv = kc_random(nq, -1.5, 1.5), *ws = workspace_for(s),
                  *R = kc_random(no, -1, 1);
            float *out = kc_floats(no), *lse = kc_floats(lse_n(s));
            pl_ref_attention_fwd(out, lse, qkv, s, ws);
            double *qkv_d = kc_to_double(qkv, nq), *out_d = kc_doubles(no), *z = drop_factors(s);
            att_ctx ctx = {qkv_d, z, out_d, R, s};
            /* every entry of the small shapes; every 5th of the T = 70 one
             * (an odd stride: it meets every q, k and v slot of a group) */
            const int64_t stride = 1 + 2 * (nq / 800);
            double *fd = kc_doubles(nq);
            for (int64_t j = 0; j < nq; j++) {
                fd[j] = NAN;
                if (j % stride)
                    continue;
                double x0 = qkv_d[j];
                qkv_d[j] = x0 + 1e-3;
                double fp = att_objective(&ctx);
                qkv_d[j] = x0 - 1e-3;
                double fm = att_objective(&ctx);
                qkv_d[j] = x0;
                fd[j] = (fp - fm) / 2e-3;
            }
            double den_all = 0.0;
            for (int64_t j = 0; j < nq; j += stride)
                den_all = fmax(den_all, fabs(fd[j]));
            for (int k = 0; k < 2; k++) {
                float *g = kc_floats(nq);
                memset(g, 0, (size_t)nq * sizeof *g);
                bwd_twin[k](g, R, qkv, out, lse, s, ws);
                for (int which = 0; which < 3; which++) {
                    /* floor: dq, dk vanish where a query sees one key */
                    double num = 0.0, den = 1e-3 * den_all;
                    for (int64_t j = 0; j < nq; j += stride) {
                        int64_t slot = (j / s->HS) % (QG + 2); /* < QG: q, QG: k, QG+1: v */
                        if ((slot < QG ? 0 : slot == QG ? 1 : 2) != which)
                            continue;
                        num = fmax(num, fabs(g[j] - fd[j]));
                        den = fmax(den, fabs(fd[j]));
                    }
                    double err = kc_note(names[k][which], num / den);
                    /* fp32 gradients of softmax attention: ~5e-7 relative
                     * seen; the FD truncation h^2 f''' / 6 is ~1e-7. A
                     * missing term (the -D of the softmax backward, a
                     * dropout factor on the wrong side, a group's head not
                     * summed) is O(1). */
                    char what[160];
                    mode_str(what, sizeof what, &c);
                    CHECK(err < 2e-5, "%s %s: rel err %.3g", names[k][which], what, err);
                }
                free(g);
            }
            free(qkv), free(ws), free(R), free(out), free(lse), free(qkv_d), free(out_d),
                free(z), free(fd);
        }
}

TEST(attention_results_do_not_depend_on_thread_count)
{
    /* B, T, NH, G, HS and mode: the GPT case, GQA with everything on, MQA. */
    static const int64_t shapes[][5] = {{2, 130, 3, 3, 24}, {2, 130, 6, 2, 24}, {1, 100, 4, 1, 16}};
    static const amode modes[] = {{1, 0, 0.0f}, {0, 1, 0.3f}, {1, 1, 0.1f}};
    for (size_t i = 0; i < 3; i++) {
        acase c;
        case_init(&c, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4],
                  modes[i]);
        const pl_attn_shape *s = &c.s;
        int64_t nq = qkv_n(s), no = out_n(s), nl = lse_n(s);
        float *qkv = kc_random(nq, -1.5, 1.5), *dout = kc_random(no, -1, 1);
        float *d0 = kc_random(nq, -1, 1);
        float *out[2], *lse[2], *dqkv[2];
        for (int k = 0; k < 2; k++) {
            KC_WITH_THREADS(k + 1, {
                float *ws = workspace_for(s);
                out[k] = kc_floats(no), lse[k] = kc_floats(nl), dqkv[k] = kc_copy(d0, nq);
                pl_cpu_attention_fwd(out[k], lse[k], qkv, s, ws);
                pl_cpu_attention_bwd(dqkv[k], dout, qkv, out[k], lse[k], s, ws);
                free(ws);
            });
        }
        /* the second forward is also a recomputation: same mask, same bits */
        CHECK(kc_same_bits(out[0], out[1], no), "case %zu: out differs between 1 and 2 threads", i);
        CHECK(kc_same_bits(lse[0], lse[1], nl), "case %zu: lse differs between 1 and 2 threads", i);
        CHECK(kc_same_bits(dqkv[0], dqkv[1], nq), "case %zu: dqkv differs between 1 and 2 threads",
              i);
        for (int k = 0; k < 2; k++)
            free(out[k]), free(lse[k]), free(dqkv[k]);
        free(qkv), free(dout), free(d0);
    }
}

TEST(gqa_equals_mha_on_kv_heads_duplicated_per_query_head)
{
    static const amode modes[] = {{1, 0, 0.0f}, {0, 1, 0.5f}, {1, 1, 0.1f}};
    static const int64_t groups[] = {2, 1};
    for (size_t gi = 0; gi < 2; gi++)
        for (size_t m = 0; m < 3; m++) {
            acase c, cm;
            case_init(&c, 2, 70, 8, groups[gi], 8, modes[m]);
            case_init(&cm, 2, 70, 8, 8, 8, modes[m]);
            const pl_attn_shape *s = &c.s, *sm = &cm.s;
            const int64_t T = s->T, NH = s->NH, HS = s->HS, QG = NH / s->G;
            int64_t nq = qkv_n(s), nqm = qkv_n(sm), no = out_n(s), nl = lse_n(s);
            float *qkv = kc_random(nq, -1.5, 1.5), *dout = kc_random(no, -1, 1);
            /* the MHA copy: head h = its q, then its group's k and v */
            float *qkvm = kc_floats(nqm);
            for (int64_t b = 0; b < s->B; b++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t h = 0; h < NH; h++) {
                        float *dst = qkvm + ((b * T + t) * NH + h) * 3 * HS;
                        memcpy(dst, qkv + q_at(s, b, t, h), (size_t)HS * sizeof *dst);
                        memcpy(dst + HS, qkv + k_at(s, b, t, h), 2 * (size_t)HS * sizeof *dst);
                    }
            float *ws = workspace_for(s), *wsm = workspace_for(sm);
            for (int k = 0; k < 2; k++) {
                float *out = kc_floats(no), *lse = kc_floats(nl);
                float *outm = kc_floats(no), *lsem = kc_floats(nl);
                fwd_twin[k](out, lse, qkv, s, ws);
                fwd_twin[k](outm, lsem, qkvm, sm, wsm);
                /* a query row does the same arithmetic on the same values */
                CHECK(kc_same_bits(out, outm, no) && kc_same_bits(lse, lsem, nl),
                      "%s G=%lld mode %zu: forward differs from MHA", twin_name[k],
                      (long long)s->G, m);
                float *dq = kc_floats(nq), *dqm = kc_floats(nqm);
                memset(dq, 0, (size_t)nq * sizeof *dq);
                memset(dqm, 0, (size_t)nqm * sizeof *dqm);
                bwd_twin[k](dq, dout, qkv, out, lse, s, ws);
                bwd_twin[k](dqm, dout, qkvm, outm, lsem, sm, wsm);
                /* dq: the same bits; dk, dv: MHA's per-head gradients summed
                 * over the group, j ascending */
                float *sum = kc_floats(nq);
                memset(sum, 0, (size_t)nq * sizeof *sum);
                int dq_same = 1;
                for (int64_t b = 0; b < s->B; b++)
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t h = 0; h < NH; h++) {
                            const float *src = dqm + ((b * T + t) * NH + h) * 3 * HS;
                            dq_same &=
                                !memcmp(dq + q_at(s, b, t, h), src, (size_t)HS * sizeof *src);
                            memcpy(sum + q_at(s, b, t, h), src, (size_t)HS * sizeof *src);
                            float *kv = sum + k_at(s, b, t, h);
                            for (int64_t d = 0; d < 2 * HS; d++)
                                kv[d] += src[HS + d];
                        }
                CHECK(dq_same, "%s G=%lld mode %zu: dq differs from MHA", twin_name[k],
                      (long long)s->G, m);
                /* the sums of QG = 4 or 8 fp32 terms in another association
                 * than the kernel's: a few ulp of max |dk|, |dv| */
                double err =
                    kc_note(k ? "gqa dk,dv cpu vs summed mha" : "gqa dk,dv ref vs summed mha",
                            kc_rel_err(dq, sum, nq));
                CHECK(err < 1e-6, "%s G=%lld mode %zu: dk, dv rel err %.3g (QG %lld)",
                      twin_name[k], (long long)s->G, m, err, (long long)QG);
                free(out), free(lse), free(outm), free(lsem), free(dq), free(dqm), free(sum);
            }
            free(qkv), free(dout), free(qkvm), free(ws), free(wsm);
        }
}

TEST(dropout_keeps_each_probability_with_chance_one_minus_p_as_its_index_formula_says)
{
    /* q = 0 makes every score 0 (the one place where zero inputs are the
     * point): P = 1/T uniformly, and with v of key u the one-hot e_u
     * (HS = T), out(b, t, h)[u] = Z(b, h, t, u) / ((1-p) T): the mask, read
     * off the output. T = 70: rows start inside Philox blocks, two key tiles. */
    static const float ps[] = {0.1f, 0.5f};
    for (size_t pi = 0; pi < 2; pi++) {
        acase c;
        case_init(&c, 2, 70, 4, 2, 70, (amode){0, 0, ps[pi]});
        c.s.NHg = 12, c.s.h0 = 5; /* heads 5..8 of 12 */
        const pl_attn_shape *s = &c.s;
        const int64_t T = s->T, NH = s->NH, n = s->B * NH * T * T;
        float *qkv = kc_random(qkv_n(s), -1.5, 1.5), *ws = workspace_for(s);
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < NH; h++) {
                    memset(qkv + q_at(s, b, t, h), 0, (size_t)s->HS * sizeof(float));
                    float *v = qkv + k_at(s, b, t, h) + s->HS;
                    for (int64_t d = 0; d < s->HS; d++)
                        v[d] = d == t ? 1.0f : 0.0f;
                }
        double *z = drop_factors(s);
        const double keep_value = 1.0 / ((1.0 - (double)s->dropout) * (double)T);
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(out_n(s)), *lse = kc_floats(lse_n(s));
            fwd_twin[k](out, lse, qkv, s, ws);
            int64_t kept = 0, wrong = 0;
            double verr = 0.0;
            for (int64_t b = 0; b < s->B; b++)
                for (int64_t h = 0; h < NH; h++)
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t u = 0; u < T; u++) {
                            float o = out[((b * T + t) * NH + h) * s->HS + u];
                            int is_kept = o > 0.0f;
                            kept += is_kept;
                            wrong += is_kept != (z[((b * NH + h) * T + t) * T + u] > 0.0);
                            if (is_kept)
                                verr = fmax(verr, fabs(o - keep_value) / keep_value);
                        }
            /* kept ~ Binomial(n, 1-p) (the threshold is p to 2^-33) */
            double mean = (double)n * (1.0 - (double)s->dropout);
            double sigma = sqrt((double)n * (double)s->dropout * (1.0 - (double)s->dropout));
            CHECK(fabs((double)kept - mean) < 5.0 * sigma, "%s p=%.1f: kept %lld of %lld, "
                  "expected %.0f +- %.0f", twin_name[k], (double)s->dropout, (long long)kept,
                  (long long)n, mean, sigma);
            CHECK(wrong == 0, "%s p=%.1f: %lld mask elements differ from the index formula",
                  twin_name[k], (double)s->dropout, (long long)wrong);
            /* a kept value is 1/(1-p) (fp32) times 1/T (a 70-term sum of
             * exp(0) = 1, then a division): a few ulp */
            kc_note("kept value vs 1/((1-p)T)", verr);
            CHECK(verr < 1e-6, "%s p=%.1f: kept value rel err %.3g", twin_name[k],
                  (double)s->dropout, verr);
            free(out), free(lse);
        }
        free(qkv), free(ws), free(z);
    }
}

TEST(dropout_mask_of_a_tensor_parallel_slice_equals_those_heads_of_the_full_call)
{
    /* Full: 8 heads in 2 groups. Rank 1 of TP 2: heads 4..7 (group 1),
     * NHg = 8, h0 = 4, its qkv the group's columns. */
    acase full, part, wrong;
    const amode m = {1, 1, 0.3f};
    case_init(&full, 2, 70, 8, 2, 8, m);
    case_init(&part, 2, 70, 4, 1, 8, m);
    part.s.NHg = 8, part.s.h0 = 4;
    case_init(&wrong, 2, 70, 4, 1, 8, m); /* h0 = 0: heads 0..3's mask */
    const pl_attn_shape *s = &full.s, *sp = &part.s;
    const int64_t B = s->B, T = s->T, HS = s->HS, gw = 6 * HS; /* a group's width: 4 q, k, v */
    int64_t nq = qkv_n(s), nqp = qkv_n(sp), no = out_n(s), nop = out_n(sp);
    float *qkv = kc_random(nq, -1.5, 1.5), *dout = kc_random(no, -1, 1);
    float *qkvp = kc_floats(nqp), *doutp = kc_floats(nop);
    for (int64_t r = 0; r < B * T; r++) {
        memcpy(qkvp + r * gw, qkv + r * 2 * gw + gw, (size_t)gw * sizeof(float));
        memcpy(doutp + r * 4 * HS, dout + r * 8 * HS + 4 * HS, 4 * (size_t)HS * sizeof(float));
    }
    float *ws = workspace_for(s), *wsp = workspace_for(sp);
    for (int k = 0; k < 2; k++) {
        float *out = kc_floats(no), *lse = kc_floats(lse_n(s)), *dq = kc_floats(nq);
        float *outp = kc_floats(nop), *lsep = kc_floats(lse_n(sp)), *dqp = kc_floats(nqp);
        float *outw = kc_floats(nop), *lsew = kc_floats(lse_n(sp));
        memset(dq, 0, (size_t)nq * sizeof *dq);
        memset(dqp, 0, (size_t)nqp * sizeof *dqp);
        fwd_twin[k](out, lse, qkv, s, ws);
        fwd_twin[k](outp, lsep, qkvp, sp, wsp);
        fwd_twin[k](outw, lsew, qkvp, &wrong.s, wsp);
        bwd_twin[k](dq, dout, qkv, out, lse, s, ws);
        bwd_twin[k](dqp, doutp, qkvp, outp, lsep, sp, wsp);
        /* per row, per group: the same arithmetic on the same values and mask */
        int same_out = 1, same_grad = 1, same_lse = 1;
        for (int64_t r = 0; r < B * T; r++) {
            same_out &= !memcmp(outp + r * 4 * HS, out + r * 8 * HS + 4 * HS,
                                4 * (size_t)HS * sizeof(float));
            same_grad &= !memcmp(dqp + r * gw, dq + r * 2 * gw + gw, (size_t)gw * sizeof(float));
        }
        for (int64_t b = 0; b < B; b++)
            same_lse &= !memcmp(lsep + b * 4 * T, lse + (b * 8 + 4) * T,
                                4 * (size_t)T * sizeof(float));
        CHECK(same_out && same_lse,
              "%s: the slice's forward differs from heads 4..7 of the full call", twin_name[k]);
        CHECK(same_grad, "%s: the slice's dqkv differs from group 1 of the full call",
              twin_name[k]);
        CHECK(!kc_same_bits(outw, outp, nop), "%s: h0 does not change the mask", twin_name[k]);
        free(out), free(lse), free(dq), free(outp), free(lsep), free(dqp), free(outw), free(lsew);
    }
    free(qkv), free(dout), free(qkvp), free(doutp), free(ws), free(wsp);
}

TEST(dropout_with_nothing_dropped_is_bit_identical_to_no_dropout)
{
    /* p = 0 ignores the mask's key; p = 1e-12 has threshold 0 (nothing is
     * dropped) and 1/(1-p) = 1 in fp32, so the dropout path multiplies by 1
     * exactly: both must give the bits of the plain call. */
    static const float ps[] = {0.0f, 1e-12f};
    for (int causal = 0; causal < 2; causal++) {
        acase plain;
        case_init(&plain, 2, 130, 6, 2, 16, (amode){causal, 1, 0.0f});
        plain.s.sample = NULL, plain.s.drop_seed = 0, plain.s.drop_stream = 0;
        const pl_attn_shape *s = &plain.s;
        int64_t nq = qkv_n(s), no = out_n(s), nl = lse_n(s);
        float *qkv = kc_random(nq, -1.5, 1.5), *dout = kc_random(no, -1, 1);
        float *d0 = kc_random(nq, -1, 1), *ws = workspace_for(s);
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(no), *lse = kc_floats(nl), *dq = kc_copy(d0, nq);
            fwd_twin[k](out, lse, qkv, s, ws);
            bwd_twin[k](dq, dout, qkv, out, lse, s, ws);
            for (int pi = 0; pi < 2; pi++) {
                acase c;
                case_init(&c, 2, 130, 6, 2, 16, (amode){causal, 1, ps[pi]});
                CHECK(pl_dropout_threshold(c.s.dropout) == 0, "p=%g: threshold not 0",
                      (double)ps[pi]);
                float *out2 = kc_floats(no), *lse2 = kc_floats(nl), *dq2 = kc_copy(d0, nq);
                fwd_twin[k](out2, lse2, qkv, &c.s, ws);
                bwd_twin[k](dq2, dout, qkv, out2, lse2, &c.s, ws);
                CHECK(kc_same_bits(out, out2, no) && kc_same_bits(lse, lse2, nl) &&
                          kc_same_bits(dq, dq2, nq),
                      "%s causal=%d p=%g: differs from no dropout", twin_name[k], causal,
                      (double)ps[pi]);
                free(out2), free(lse2), free(dq2);
            }
            free(out), free(lse), free(dq);
        }
        free(qkv), free(dout), free(d0), free(ws);
    }
}

TEST(padded_keys_never_influence_outputs_and_get_no_gradient)
{
    /* k and v of padded keys set to NaN: any read of them that reaches a
     * result (even times a zero probability) shows. */
    static const amode modes[] = {{1, 1, 0.0f}, {0, 1, 0.1f}};
    for (size_t m = 0; m < 2; m++) {
        acase c;
        case_init(&c, 2, 130, 6, 2, 16, modes[m]);
        const pl_attn_shape *s = &c.s;
        const int64_t T = s->T, HS = s->HS;
        int64_t nq = qkv_n(s), no = out_n(s), nl = lse_n(s);
        float *qkv = kc_random(nq, -1.5, 1.5), *dout = kc_random(no, -1, 1);
        float *qkv_nan = kc_copy(qkv, nq), *ws = workspace_for(s);
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t u = c.kv_len[b]; u < T; u++)
                for (int64_t h = 0; h < s->NH; h++) {
                    float *kv = qkv_nan + k_at(s, b, u, h);
                    for (int64_t d = 0; d < 2 * HS; d++)
                        kv[d] = NAN;
                }
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(no), *lse = kc_floats(nl), *dq = kc_floats(nq);
            float *out2 = kc_floats(no), *lse2 = kc_floats(nl), *dq2 = kc_floats(nq);
            memset(dq, 0, (size_t)nq * sizeof *dq);
            memset(dq2, 0, (size_t)nq * sizeof *dq2);
            fwd_twin[k](out, lse, qkv, s, ws);
            fwd_twin[k](out2, lse2, qkv_nan, s, ws);
            bwd_twin[k](dq, dout, qkv, out, lse, s, ws);
            bwd_twin[k](dq2, dout, qkv_nan, out2, lse2, s, ws);
            CHECK(kc_same_bits(out, out2, no) && kc_same_bits(lse, lse2, nl),
                  "%s mode %zu: padded keys change the forward", twin_name[k], m);
            CHECK(kc_same_bits(dq, dq2, nq), "%s mode %zu: padded keys change the gradients",
                  twin_name[k], m);
            int zero = 1;
            for (int64_t b = 0; b < s->B; b++)
                for (int64_t u = c.kv_len[b]; u < T; u++)
                    for (int64_t h = 0; h < s->NH; h++) {
                        const float *dkv = dq + k_at(s, b, u, h);
                        for (int64_t d = 0; d < 2 * HS; d++)
                            zero &= dkv[d] == 0.0f;
                    }
            CHECK(zero, "%s mode %zu: padded keys get a gradient", twin_name[k], m);
            free(out), free(lse), free(dq), free(out2), free(lse2), free(dq2);
        }
        free(qkv), free(dout), free(qkv_nan), free(ws);
    }
}

/* ---- decoding over a KV cache (generation) ------------------------------- */

/* The last query row of the fused causal attention over T positions is what
 * decoding that row against a cache of the T keys and values gives: both twins,
 * grouped and multi-head. Rounding: the fused kernel's online softmax and the
 * decoder's two-pass one sum T terms in other orders, ~T u relative. */
TEST(decoding_the_last_row_against_the_cache_equals_the_fused_attention)
{
    static const int64_t groups[3] = {4, 2, 1};
    for (int gi = 0; gi < 3; gi++) {
        const pl_attn_shape s = {.B = 1, .T = 37, .NH = 4, .G = groups[gi], .HS = 16, .causal = 1,
                                 .NHg = 4};
        const int64_t T = s.T, G = s.G, QG = s.NH / G, HS = s.HS, row = (QG + 2) * G * HS;
        float *qkv = kc_floats(qkv_n(&s)), *out = kc_floats(out_n(&s)), *lse = kc_floats(lse_n(&s));
        float *ws = workspace_for(&s), *kc = kc_floats(T * G * HS), *vc = kc_floats(T * G * HS);
        float *dec = kc_floats(s.NH * HS), *scores = kc_floats(s.NH * T);
        kc_fill(qkv, qkv_n(&s), -1, 1);
        pl_cpu_attention_fwd(out, lse, qkv, &s, ws);
        for (int64_t t = 0; t < T; t++)
            for (int64_t g = 0; g < G; g++)
                for (int64_t d = 0; d < HS; d++) {
                    kc[(t * G + g) * HS + d] = qkv[t * row + (g * (QG + 2) + QG) * HS + d];
                    vc[(t * G + g) * HS + d] = qkv[t * row + (g * (QG + 2) + QG + 1) * HS + d];
                }
        for (int k = 0; k < 2; k++) {
            (k ? pl_cpu_attention_decode : pl_ref_attention_decode)(
                dec, qkv + (T - 1) * row, kc, vc, T, s.NH, G, HS, 1.0f / sqrtf((float)HS), NULL, 0,
                scores);
            double e = kc_note(k ? "decode cpu vs fused" : "decode ref vs fused",
                               kc_rel_err(dec, out + (T - 1) * s.NH * HS, s.NH * HS));
            CHECK(e < 2e-6, "%s, %lld groups: %.3g", twin_name[k], (long long)G, e);
        }
        free(qkv), free(out), free(lse), free(ws), free(kc), free(vc), free(dec), free(scores);
    }
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(4);
        RUN(attention_with_g_equal_nh_matches_naive_per_head_causal_attention);
        RUN(attention_backward_cpu_matches_reference_for_gpt_shapes);
        RUN(attention_forward_twins_match_naive_for_gqa_masks_and_dropout);
        RUN(attention_backward_cpu_matches_reference_for_gqa_masks_and_dropout);
        RUN(attention_backward_matches_finite_differences_for_gqa_masks_and_dropout);
        RUN(attention_results_do_not_depend_on_thread_count);
        RUN(gqa_equals_mha_on_kv_heads_duplicated_per_query_head);
        RUN(dropout_keeps_each_probability_with_chance_one_minus_p_as_its_index_formula_says);
        RUN(dropout_mask_of_a_tensor_parallel_slice_equals_those_heads_of_the_full_call);
        RUN(dropout_with_nothing_dropped_is_bit_identical_to_no_dropout);
        RUN(padded_keys_never_influence_outputs_and_get_no_gradient);
        RUN(decoding_the_last_row_against_the_cache_equals_the_fused_attention);
        kc_print_notes();
    }
    return test_summary("kernels_attention");
}
