/* kernels: cross-attention (queries from the decoder, keys and values from the
 * encoder: q (B,T,NH,HS), kv (B,Tk,G,2,HS)).
 *
 * Both twins against a naive float64 cross-attention written here (padding
 * of the encoder's keys, dropout factors from kernels.h's index formula with
 * Tk keys per row); the cpu backward against the reference's; and the
 * structural check that ties cross-attention to the self-attention kernels
 * (tested at length in test_kernels_attention.c): with Tk = T, no causal
 * mask, and q, k, v copied out of a qkv buffer, cross-attention gives exactly
 * the bits of self-attention, forward and backward, dropout included. Shapes
 * cover Tk < T, Tk > T, Tk = 1, several key and query tiles, grouped and
 * multi-head. */
#include "kernel_check.h"
#include "kernels/kernels.h"

#include "base/rng.h"

typedef void (*cross_fwd_fn)(float *, float *, const float *, const float *,
                             const pl_attn_shape *, float *);
typedef void (*cross_bwd_fn)(float *, float *, const float *, const float *, const float *,
                             const float *, const float *, const pl_attn_shape *, float *);
static const cross_fwd_fn fwd_twin[2] = {pl_ref_attention_cross_fwd, pl_cpu_attention_cross_fwd};
static const char *twin_name[2] = {"ref", "cpu"};

static float *zeros(int64_t n)
{
    float *p = kc_floats(n);
    memset(p, 0, (size_t)n * sizeof *p);
    return p;
}

static int64_t q_n(const pl_attn_shape *s) { return s->B * s->T * s->NH * s->HS; }
static int64_t kv_n(const pl_attn_shape *s) { return s->B * s->Tk * s->G * 2 * s->HS; }
static int64_t lse_n(const pl_attn_shape *s) { return s->B * s->NH * s->T; }

/* A shape with its arrays (s points into it: not to be copied). Padded
 * samples keep about 2/3 (even b) or 1/3 (odd b) of the encoder's keys. */
typedef struct xcase {
    pl_attn_shape s;
    int32_t kv_len[4];
    int64_t sample[4];
} xcase;

static void case_init(xcase *c, int64_t B, int64_t T, int64_t Tk, int64_t NH, int64_t G,
                      int64_t HS, int pad, float p)
{
    memset(c, 0, sizeof *c);
    for (int64_t b = 0; b < B && b < 4; b++) {
        int64_t keep = b % 2 == 0 ? 2 * Tk / 3 + 1 : Tk / 3 + 1;
        c->kv_len[b] = (int32_t)(keep > Tk ? Tk : keep);
        c->sample[b] = 3000000019LL + 7919 * b;
    }
    c->s = (pl_attn_shape){.B = B, .T = T, .NH = NH, .G = G, .HS = HS, .causal = 0,
                           .kv_len = pad ? c->kv_len : NULL, .dropout = p,
                           .drop_seed = 0x0123456789abcdefull, .drop_stream = 0xfedcba9876543ull,
                           .sample = c->sample, .NHg = NH, .h0 = 0, .Tk = Tk};
}

static void case_str(char *buf, size_t n, const pl_attn_shape *s)
{
    snprintf(buf, n, "B=%lld T=%lld Tk=%lld NH=%lld G=%lld HS=%lld pad=%d p=%.2f",
             (long long)s->B, (long long)s->T, (long long)s->Tk, (long long)s->NH,
             (long long)s->G, (long long)s->HS, s->kv_len != NULL, (double)s->dropout);
}

/* Naive float64 cross-attention; z from the formula of kernels.h. */
static void naive_cross(double *out, double *lse, const double *q, const double *kv,
                        const pl_attn_shape *s)
{
    const int64_t T = s->T, Tk = s->Tk, NH = s->NH, HS = s->HS, QG = s->NH / s->G;
    const uint32_t thr = pl_dropout_threshold(s->dropout);
    double *sc = kc_doubles(Tk);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t n = s->kv_len ? s->kv_len[b] : Tk, g = h / QG;
                const double *qr = q + ((b * T + t) * NH + h) * HS;
                double mx = -INFINITY, sum = 0.0;
                for (int64_t u = 0; u < n; u++) {
                    const double *k = kv + ((b * Tk + u) * s->G + g) * 2 * HS;
                    double d = 0.0;
                    for (int64_t i = 0; i < HS; i++)
                        d += qr[i] * k[i];
                    sc[u] = d / sqrt((double)HS);
                    mx = fmax(mx, sc[u]);
                }
                for (int64_t u = 0; u < n; u++)
                    sum += exp(sc[u] - mx);
                double *o = out + ((b * T + t) * NH + h) * HS;
                for (int64_t i = 0; i < HS; i++)
                    o[i] = 0.0;
                for (int64_t u = 0; u < n; u++) {
                    uint64_t head = (uint64_t)s->sample[b] * (uint64_t)s->NHg + (uint64_t)h;
                    uint64_t idx = (head * (uint64_t)T + (uint64_t)t) * (uint64_t)Tk + (uint64_t)u;
                    double z = s->dropout == 0.0f || pl_rng_u32(s->drop_seed, s->drop_stream,
                                                                idx) >= thr
                                   ? 1.0 / (1.0 - (double)s->dropout)
                                   : 0.0;
                    const double *v = kv + ((b * Tk + u) * s->G + g) * 2 * HS + HS;
                    double w = exp(sc[u] - mx) / sum * z;
                    for (int64_t i = 0; i < HS; i++)
                        o[i] += w * v[i];
                }
                lse[(b * NH + h) * T + t] = mx + log(sum);
            }
    free(sc);
}

/* B, T, Tk, NH, G, HS */
static const int64_t shapes[][6] = {{2, 70, 33, 4, 4, 12}, {1, 20, 130, 8, 2, 16},
                                    {2, 9, 1, 2, 2, 8},    {1, 130, 70, 4, 1, 5}};
#define N_SHAPES (sizeof shapes / sizeof *shapes)
static const float probs[] = {0.0f, 0.1f, 0.5f};

TEST(cross_attention_twins_match_naive_with_padding_and_dropout)
{
    for (size_t sh = 0; sh < N_SHAPES; sh++)
        for (int pad = 0; pad < 2; pad++)
            for (size_t pi = 0; pi < 3; pi++) {
                const int64_t *d = shapes[sh];
                xcase c;
                case_init(&c, d[0], d[1], d[2], d[3], d[4], d[5], pad, probs[pi]);
                const pl_attn_shape *s = &c.s;
                float *q = kc_random(q_n(s), -1.5, 1.5), *kv = kc_random(kv_n(s), -1.5, 1.5);
                float *ws = kc_floats((int64_t)pl_attention_workspace(s));
                double *qd = kc_to_double(q, q_n(s)), *kvd = kc_to_double(kv, kv_n(s));
                double *od = kc_doubles(q_n(s)), *ld = kc_doubles(lse_n(s));
                naive_cross(od, ld, qd, kvd, s);
                for (int k = 0; k < 2; k++) {
                    float *out = kc_floats(q_n(s)), *lse = kc_floats(lse_n(s));
                    fwd_twin[k](out, lse, q, kv, s, ws);
                    /* the self-attention tolerance: a few ulp of max |out| */
                    double eo = kc_rel_err_d(out, od, q_n(s)), el = kc_rel_err_d(lse, ld, lse_n(s));
                    kc_note(k ? "cross fwd cpu vs naive" : "cross fwd ref vs naive", fmax(eo, el));
                    char what[160];
                    case_str(what, sizeof what, s);
                    CHECK(eo < 5e-6 && el < 5e-6, "%s %s: out %.3g lse %.3g", twin_name[k], what,
                          eo, el);
                    free(out), free(lse);
                }
                free(q), free(kv), free(ws), free(qd), free(kvd), free(od), free(ld);
            }
}

TEST(cross_attention_backward_cpu_matches_reference)
{
    for (size_t sh = 0; sh < N_SHAPES; sh++)
        for (int pad = 0; pad < 2; pad++)
            for (size_t pi = 0; pi < 3; pi++) {
                const int64_t *d = shapes[sh];
                xcase c;
                case_init(&c, d[0], d[1], d[2], d[3], d[4], d[5], pad, probs[pi]);
                const pl_attn_shape *s = &c.s;
                const int64_t nq = q_n(s), nkv = kv_n(s);
                float *q = kc_random(nq, -1.5, 1.5), *kv = kc_random(nkv, -1.5, 1.5);
                float *ws = kc_floats((int64_t)pl_attention_workspace(s));
                float *out = kc_floats(nq), *lse = kc_floats(lse_n(s)), *dout = kc_random(nq, -1, 1);
                pl_ref_attention_cross_fwd(out, lse, q, kv, s, ws);
                /* both add into what is there */
                float *dq0 = kc_random(nq, -1, 1), *dkv0 = kc_random(nkv, -1, 1);
                float *dqc = kc_copy(dq0, nq), *dqr = kc_copy(dq0, nq);
                float *dkvc = kc_copy(dkv0, nkv), *dkvr = kc_copy(dkv0, nkv);
                pl_cpu_attention_cross_bwd(dqc, dkvc, dout, q, kv, out, lse, s, ws);
                pl_ref_attention_cross_bwd(dqr, dkvr, dout, q, kv, out, lse, s, ws);
                for (int64_t j = 0; j < nq; j++)
                    dqc[j] -= dq0[j], dqr[j] -= dq0[j];
                for (int64_t j = 0; j < nkv; j++)
                    dkvc[j] -= dkv0[j], dkvr[j] -= dkv0[j];
                double eq = kc_rel_err(dqc, dqr, nq), ekv = kc_rel_err(dkvc, dkvr, nkv);
                kc_note("cross bwd cpu vs ref", fmax(eq, ekv));
                char what[160];
                case_str(what, sizeof what, s);
                CHECK(eq < 2e-5 && ekv < 2e-5, "%s: dq %.3g dkv %.3g", what, eq, ekv);
                /* padded keys get no gradient */
                for (int64_t b = 0; pad && b < s->B; b++)
                    for (int64_t u = c.kv_len[b]; u < s->Tk; u++)
                        for (int64_t i = 0; i < s->G * 2 * s->HS; i++)
                            CHECK(dkvc[(b * s->Tk + u) * s->G * 2 * s->HS + i] == 0.0f,
                                  "%s: padded key %lld of sample %lld has a gradient", what,
                                  (long long)u, (long long)b);
                free(q), free(kv), free(ws), free(out), free(lse), free(dout), free(dq0), free(dkv0);
                free(dqc), free(dqr), free(dkvc), free(dkvr);
            }
}

TEST(cross_attention_on_qkv_copied_apart_is_bit_identical_to_unmasked_self_attention)
{
    const int64_t cases[][5] = {{2, 70, 4, 4, 12}, {1, 130, 8, 2, 16}}; /* B, T, NH, G, HS */
    for (size_t ci = 0; ci < 2; ci++)
        for (size_t pi = 0; pi < 3; pi++)
            for (int pad = 0; pad < 2; pad++) {
                const int64_t B = cases[ci][0], T = cases[ci][1], NH = cases[ci][2];
                const int64_t G = cases[ci][3], HS = cases[ci][4], QG = NH / G;
                xcase c;
                case_init(&c, B, T, T, NH, G, HS, pad, probs[pi]);
                const pl_attn_shape *s = &c.s;
                const int64_t nqkv = B * T * G * (QG + 2) * HS, nq = q_n(s), nkv = kv_n(s);
                float *qkv = kc_random(nqkv, -1.5, 1.5), *q = kc_floats(nq), *kv = kc_floats(nkv);
                for (int64_t bt = 0; bt < B * T; bt++)
                    for (int64_t g = 0; g < G; g++) {
                        const float *src = qkv + (bt * G + g) * (QG + 2) * HS;
                        memcpy(q + (bt * G + g) * QG * HS, src, (size_t)(QG * HS) * sizeof(float));
                        memcpy(kv + (bt * G + g) * 2 * HS, src + QG * HS,
                               (size_t)(2 * HS) * sizeof(float));
                    }
                float *ws = kc_floats((int64_t)pl_attention_workspace(s));
                float *o1 = kc_floats(nq), *l1 = kc_floats(lse_n(s));
                float *o2 = kc_floats(nq), *l2 = kc_floats(lse_n(s));
                pl_cpu_attention_fwd(o1, l1, qkv, s, ws);
                pl_cpu_attention_cross_fwd(o2, l2, q, kv, s, ws);
                char what[160];
                case_str(what, sizeof what, s);
                CHECK(kc_same_bits(o1, o2, nq) && kc_same_bits(l1, l2, lse_n(s)),
                      "forward %s: cross differs from self", what);
                float *dout = kc_random(nq, -1, 1), *dqkv = zeros(nqkv);
                float *dq = zeros(nq), *dkv = zeros(nkv), *back = kc_floats(nqkv);
                pl_cpu_attention_bwd(dqkv, dout, qkv, o1, l1, s, ws);
                pl_cpu_attention_cross_bwd(dq, dkv, dout, q, kv, o2, l2, s, ws);
                for (int64_t bt = 0; bt < B * T; bt++)
                    for (int64_t g = 0; g < G; g++) {
                        float *dst = back + (bt * G + g) * (QG + 2) * HS;
                        memcpy(dst, dq + (bt * G + g) * QG * HS, (size_t)(QG * HS) * sizeof(float));
                        memcpy(dst + QG * HS, dkv + (bt * G + g) * 2 * HS,
                               (size_t)(2 * HS) * sizeof(float));
                    }
                CHECK(kc_same_bits(dqkv, back, nqkv), "backward %s: cross differs from self", what);
                free(qkv), free(q), free(kv), free(ws), free(o1), free(l1), free(o2), free(l2);
                free(dout), free(dqkv), free(dq), free(dkv), free(back);
            }
}

int main(void)
{
    for (int isa = PL_ISA_PORTABLE; isa <= PL_ISA_AVX512; isa++) {
        if (!kc_use_isa((pl_isa)isa))
            continue;
        kc_seed(5);
        RUN(cross_attention_twins_match_naive_with_padding_and_dropout);
        RUN(cross_attention_backward_cpu_matches_reference);
        RUN(cross_attention_on_qkv_copied_apart_is_bit_identical_to_unmasked_self_attention);
        kc_print_notes();
    }
    return test_summary("kernels_cross_attention");
}
