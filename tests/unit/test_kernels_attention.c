/* kernels: causal self-attention (flash-style cpu twin, row-wise reference).
 *
 * Both twins are compared with a naive float64 O(T^2) softmax attention
 * written here, which is also the forward of the finite-difference checks of
 * the backward (L = sum(out * R), so dout = R). Shapes cover T = 1, T not a
 * multiple of the 64-row tiles, several tiles, HS = 1, odd and not a power of
 * two. */
#include "kernel_check.h"
#include "kernels/kernels.h"

typedef struct ashape {
    int64_t B, T, NH, HS;
} ashape;

/* The GPT case of the kernels' shape: multi-head, causal, no padding, no dropout. */
static pl_attn_shape gpt_shape(ashape s)
{
    return (pl_attn_shape){.B = s.B, .T = s.T, .NH = s.NH, .G = s.NH, .HS = s.HS, .causal = 1,
                           .NHg = s.NH};
}

static int64_t qkv_len(ashape s) { return s.B * s.T * s.NH * 3 * s.HS; }
static int64_t out_len(ashape s) { return s.B * s.T * s.NH * s.HS; }

/* Naive float64 causal attention: out (B,T,NH,HS), lse (B,NH,T) (lse may be NULL). */
static void naive_attention(double *out, double *lse, const double *qkv, ashape s)
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
                if (lse)
                    lse[(b * NH + h) * T + t] = mx + log(z);
            }
    free(sc);
}

typedef struct att_ctx {
    const double *qkv;
    double *out;
    const float *R;
    ashape s;
} att_ctx;

static double att_objective(void *p)
{
    att_ctx *c = p;
    naive_attention(c->out, NULL, c->qkv, c->s);
    return kc_dot(c->out, c->R, out_len(c->s));
}

static float *workspace_for(ashape s)
{
    /* exactly the promised size, so AddressSanitizer catches any overrun */
    pl_attn_shape as = gpt_shape(s);
    return kc_floats((int64_t)pl_attention_workspace(&as));
}

typedef void (*att_fwd_fn)(float *, float *, const float *, const pl_attn_shape *, float *);
typedef void (*att_bwd_fn)(float *, const float *, const float *, const float *, const float *,
                           const pl_attn_shape *, float *);

TEST(attention_forward_matches_naive_softmax_attention)
{
    static const ashape shapes[] = {{1, 1, 1, 1},    {1, 7, 2, 5},  {2, 70, 3, 12},  {1, 130, 2, 64},
                                    {2, 64, 1, 3},   {1, 200, 1, 80}, {1, 256, 2, 64}};
    static const att_fwd_fn fwd[2] = {pl_ref_attention_fwd, pl_cpu_attention_fwd};
    static const char *names[2] = {"attention fwd ref vs naive", "attention fwd cpu vs naive"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        ashape s = shapes[i];
        pl_attn_shape as = gpt_shape(s);
        float *qkv = kc_random(qkv_len(s), -1.5, 1.5), *ws = workspace_for(s);
        double *qkv_d = kc_to_double(qkv, qkv_len(s));
        double *out_d = kc_doubles(out_len(s)), *lse_d = kc_doubles(s.B * s.NH * s.T);
        naive_attention(out_d, lse_d, qkv_d, s);
        for (int k = 0; k < 2; k++) {
            float *out = kc_floats(out_len(s)), *lse = kc_floats(s.B * s.NH * s.T);
            fwd[k](out, lse, qkv, &as, ws);
            /* fp32 scores are HS-term dot products (|q.k| <~ 2 HS); softmax
             * weights and the weighted sum of up to T values add a few ulp:
             * ~1e-6 of max |out| and of max |lse| seen; a misplaced mask or
             * tile gives O(0.1). */
            double eo = kc_rel_err_d(out, out_d, out_len(s));
            double el = kc_rel_err_d(lse, lse_d, s.B * s.NH * s.T);
            kc_note(names[k], fmax(eo, el));
            CHECK(eo < 5e-6 && el < 5e-6, "%s B=%lld T=%lld NH=%lld HS=%lld: out %.3g lse %.3g",
                  names[k], (long long)s.B, (long long)s.T, (long long)s.NH, (long long)s.HS, eo,
                  el);
            free(out), free(lse);
        }
        free(qkv), free(ws), free(qkv_d), free(out_d), free(lse_d);
    }
}

TEST(attention_backward_cpu_matches_reference)
{
    static const ashape shapes[] = {{1, 1, 1, 1},    {1, 7, 2, 5},   {2, 70, 3, 12},
                                    {1, 130, 2, 64}, {1, 200, 1, 80}, {1, 256, 2, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        ashape s = shapes[i];
        pl_attn_shape as = gpt_shape(s);
        int64_t nq = qkv_len(s), no = out_len(s);
        float *qkv = kc_random(nq, -1.5, 1.5), *ws = workspace_for(s);
        float *out = kc_floats(no), *lse = kc_floats(s.B * s.NH * s.T), *dout = kc_random(no, -1, 1);
        pl_ref_attention_fwd(out, lse, qkv, &as, ws);
        float *d0 = kc_random(nq, -1, 1), *dc = kc_copy(d0, nq), *dr = kc_copy(d0, nq);
        pl_cpu_attention_bwd(dc, dout, qkv, out, lse, &as, ws);
        pl_ref_attention_bwd(dr, dout, qkv, out, lse, &as, ws);
        /* Compare the increments (the random initial gradient is added by both). */
        for (int64_t j = 0; j < nq; j++)
            dc[j] -= d0[j], dr[j] -= d0[j];
        /* D = rowsum(dout * out) (cpu) versus sum_j P_j dP_j (ref) and tiled
         * versus row-wise sums over up to T keys: ~1e-6 of max |dqkv|. */
        double err = kc_note("attention bwd cpu vs ref", kc_rel_err(dc, dr, nq));
        CHECK(err < 2e-5, "B=%lld T=%lld NH=%lld HS=%lld: rel err %.3g", (long long)s.B,
              (long long)s.T, (long long)s.NH, (long long)s.HS, err);
        free(qkv), free(ws), free(out), free(lse), free(dout), free(d0), free(dc), free(dr);
    }
}

TEST(attention_backward_matches_finite_differences_for_q_k_and_v)
{
    static const ashape shapes[] = {{1, 1, 1, 3}, {2, 7, 2, 5}, {1, 70, 1, 6}};
    static const att_bwd_fn bwd[2] = {pl_ref_attention_bwd, pl_cpu_attention_bwd};
    static const char *names[2][3] = {
        {"attention dq ref vs FD", "attention dk ref vs FD", "attention dv ref vs FD"},
        {"attention dq cpu vs FD", "attention dk cpu vs FD", "attention dv cpu vs FD"}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        ashape s = shapes[i];
        pl_attn_shape as = gpt_shape(s);
        int64_t nq = qkv_len(s), no = out_len(s);
        float *qkv = kc_random(nq, -1.5, 1.5), *ws = workspace_for(s), *R = kc_random(no, -1, 1);
        float *out = kc_floats(no), *lse = kc_floats(s.B * s.NH * s.T);
        pl_ref_attention_fwd(out, lse, qkv, &as, ws);
        double *qkv_d = kc_to_double(qkv, nq), *out_d = kc_doubles(no);
        att_ctx ctx = {qkv_d, out_d, R, s};
        /* FD of each entry of qkv, split by which of q, k, v it belongs to. */
        double *fd = kc_doubles(nq);
        for (int64_t j = 0; j < nq; j++) {
            double x0 = qkv_d[j];
            qkv_d[j] = x0 + 1e-3;
            double fp = att_objective(&ctx);
            qkv_d[j] = x0 - 1e-3;
            double fm = att_objective(&ctx);
            qkv_d[j] = x0;
            fd[j] = (fp - fm) / 2e-3;
        }
        for (int k = 0; k < 2; k++) {
            float *g = kc_floats(nq);
            memset(g, 0, (size_t)nq * sizeof *g);
            bwd[k](g, R, qkv, out, lse, &as, ws);
            double den_all = 0.0;
            for (int64_t j = 0; j < nq; j++)
                den_all = fmax(den_all, fabs(fd[j]));
            for (int which = 0; which < 3; which++) {
                double num = 0.0, den = 1e-3 * den_all; /* floor: dq, dk vanish at T = 1 */
                for (int64_t j = 0; j < nq; j++) {
                    if ((j / s.HS) % 3 != which)
                        continue;
                    num = fmax(num, fabs(g[j] - fd[j]));
                    den = fmax(den, fabs(fd[j]));
                }
                double err = kc_note(names[k][which], num / den);
                /* fp32 gradients of softmax attention: ~3e-7 relative seen; the
                 * FD truncation h^2 f''' / 6 is ~1e-7. A missing term (e.g.
                 * the -D of the softmax backward) is O(1). With T = 1, dq and
                 * dk are zero (one key: the softmax is constant), hence the
                 * floor on the denominator. */
                CHECK(err < 2e-5, "%s B=%lld T=%lld NH=%lld HS=%lld: rel err %.3g",
                      names[k][which], (long long)s.B, (long long)s.T, (long long)s.NH,
                      (long long)s.HS, err);
            }
            free(g);
        }
        free(qkv), free(ws), free(R), free(out), free(lse), free(qkv_d), free(out_d), free(fd);
    }
}

TEST(attention_results_do_not_depend_on_thread_count)
{
    ashape s = {2, 130, 3, 24};
    pl_attn_shape as = gpt_shape(s);
    int64_t nq = qkv_len(s), no = out_len(s), nl = s.B * s.NH * s.T;
    float *qkv = kc_random(nq, -1.5, 1.5), *dout = kc_random(no, -1, 1), *d0 = kc_random(nq, -1, 1);
    float *out[2], *lse[2], *dqkv[2];
    for (int k = 0; k < 2; k++) {
        KC_WITH_THREADS(k + 1, {
            float *ws = workspace_for(s);
            out[k] = kc_floats(no), lse[k] = kc_floats(nl), dqkv[k] = kc_copy(d0, nq);
            pl_cpu_attention_fwd(out[k], lse[k], qkv, &as, ws);
            pl_cpu_attention_bwd(dqkv[k], dout, qkv, out[k], lse[k], &as, ws);
            free(ws);
        });
    }
    CHECK(kc_same_bits(out[0], out[1], no), "out differs between 1 and 2 threads");
    CHECK(kc_same_bits(lse[0], lse[1], nl), "lse differs between 1 and 2 threads");
    CHECK(kc_same_bits(dqkv[0], dqkv[1], nq), "dqkv differs between 1 and 2 threads");
    for (int k = 0; k < 2; k++)
        free(out[k]), free(lse[k]), free(dqkv[k]);
    free(qkv), free(dout), free(d0);
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(4);
        RUN(attention_forward_matches_naive_softmax_attention);
        RUN(attention_backward_cpu_matches_reference);
        RUN(attention_backward_matches_finite_differences_for_q_k_and_v);
        RUN(attention_results_do_not_depend_on_thread_count);
        kc_print_notes();
    }
    return test_summary("kernels_attention");
}
