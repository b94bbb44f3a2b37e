/* Reference twin: self- and cross-attention, one query row at a time.
 *
 * For each (b, t, h) the scores of the keys query t sees (a prefix: keys <= t
 * if causal, keys < kv_len[b] if padded, both if both) are formed in the
 * workspace, softmaxed in two passes and applied to v, each probability times
 * its dropout factor Z/(1-p), drawn with pl_rng_u32 one element at a time.
 * Backward recomputes the probabilities from lse and uses
 * dS = P (dP~ - sum_j P_j dP~_j), dP~ = Z/(1-p) dout.v (the sum is
 * rowsum(dout * out), FlashAttention's D, formed the other way round).
 * A relative position bias is added to each scaled score; its gradient is
 * the score's unscaled dS, P (dP~ - sum_j P_j dP~_j), added in (b, t, h) order.
 * Workspace: 3 max(T, Tk) floats (within pl_attention_workspace()). */
#include "kernels/kernels.h"

#include "base/rng.h"
#include "base/status.h"

#include <math.h>

void pl_attention_check(const pl_attn_shape *s, int cross)
{
    PL_ASSERT(s->B >= 0 && s->T >= 0 && s->NH >= 1 && s->G >= 1 && s->HS >= 1);
    PL_ASSERT(s->NH % s->G == 0);
    PL_ASSERT(s->causal == 0 || s->causal == 1);
    PL_ASSERT(!cross || (s->causal == 0 && s->Tk >= 1));
    PL_ASSERT(s->dropout >= 0.0f && s->dropout < 1.0f);
    PL_ASSERT(!cross || !s->rel_bias);
    PL_ASSERT(s->scale >= 0.0f);
    const int64_t keys = cross ? s->Tk : s->T;
    for (int64_t b = 0; s->kv_len && b < s->B; b++)
        PL_ASSERT(s->kv_len[b] >= 1 && s->kv_len[b] <= keys);
    if (s->dropout > 0.0f) {
        PL_ASSERT(s->sample != NULL && s->h0 >= 0 && s->h0 + s->NH <= s->NHg);
        for (int64_t b = 0; b < s->B; b++)
            PL_ASSERT(s->sample[b] >= 0);
    }
}

/* Where the kernels read: self-attention's qkv (B,T,G,QG+2,HS), or
 * cross-attention's q (B,T,NH,HS) and kv (B,Tk,G,2,HS). */
typedef struct layout {
    const pl_attn_shape *s;
    int cross;
    int64_t Tk; /* keys per sample */
} layout;

/* Offset of query head h's q (which = 0) at query t, or of its group's k (1)
 * or v (2) at key t, of sample b. */
static int64_t at(const layout *l, int64_t b, int64_t t, int64_t h, int which)
{
    const pl_attn_shape *s = l->s;
    const int64_t QG = s->NH / s->G, g = h / QG;
    if (l->cross)
        return which == 0 ? ((b * s->T + t) * s->NH + h) * s->HS
                          : (((b * l->Tk + t) * s->G + g) * 2 + which - 1) * s->HS;
    const int64_t slot = which == 0 ? h % QG : QG + which - 1;
    return (((b * s->T + t) * s->G + g) * (QG + 2) + slot) * s->HS;
}

/* Number of keys query t of sample b sees: they are keys 0 .. n-1. */
static int64_t keys_seen(const layout *l, int64_t b, int64_t t)
{
    const pl_attn_shape *s = l->s;
    int64_t n = s->causal ? t + 1 : l->Tk;
    if (s->kv_len && s->kv_len[b] < n)
        n = s->kv_len[b];
    return n;
}

/* The score scale: the shape's, or 1/sqrt(HS). */
static float scale_of(const pl_attn_shape *s)
{
    return s->scale > 0.0f ? s->scale : 1.0f / sqrtf((float)s->HS);
}

/* The relative position bias of query t and key u of head h (0 without). */
static float rel_bias(const pl_attn_shape *s, int64_t h, int64_t t, int64_t u)
{
    return s->rel_bias ? s->rel_bias[h * (2 * s->T - 1) + s->T - 1 + u - t] : 0.0f;
}

/* Z(b, h, t, u) / (1 - p): the dropout factor of one probability (1 without dropout). */
static float drop_factor(const layout *l, int64_t b, int64_t h, int64_t t, int64_t u)
{
    const pl_attn_shape *s = l->s;
    if (s->dropout == 0.0f)
        return 1.0f;
    const uint64_t T = (uint64_t)s->T, Tk = (uint64_t)l->Tk;
    uint64_t row = ((uint64_t)s->sample[b] * (uint64_t)s->NHg + (uint64_t)(s->h0 + h)) * T;
    uint32_t r = pl_rng_u32(s->drop_seed, s->drop_stream, (row + (uint64_t)t) * Tk + (uint64_t)u);
    return r >= pl_dropout_threshold(s->dropout) ? 1.0f / (1.0f - s->dropout) : 0.0f;
}

static void attention_fwd(float *out, float *lse, const float *qsrc, const float *kvsrc,
                          const layout *l, float *workspace)
{
    const pl_attn_shape *s = l->s;
    pl_attention_check(s, l->cross);
    const int64_t T = s->T, NH = s->NH, HS = s->HS;
    const float scale = scale_of(s);
    float *p = workspace; /* (Tk) */
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NH; h++) {
                const float *q = qsrc + at(l, b, t, h, 0);
                const int64_t n = keys_seen(l, b, t);
                float mx = -INFINITY;
                for (int64_t u = 0; u < n; u++) {
                    const float *k = kvsrc + at(l, b, u, h, 1);
                    float dot = 0.0f;
                    for (int64_t d = 0; d < HS; d++)
                        dot += q[d] * k[d];
                    p[u] = dot * scale + rel_bias(s, h, t, u);
                    mx = fmaxf(mx, p[u]);
                }
                float sum = 0.0f;
                for (int64_t u = 0; u < n; u++) {
                    p[u] = expf(p[u] - mx);
                    sum += p[u];
                }
                float *o = out + ((b * T + t) * NH + h) * HS;
                for (int64_t d = 0; d < HS; d++)
                    o[d] = 0.0f;
                for (int64_t u = 0; u < n; u++) {
                    const float *v = kvsrc + at(l, b, u, h, 2);
                    float w = p[u] / sum * drop_factor(l, b, h, t, u);
                    for (int64_t d = 0; d < HS; d++)
                        o[d] += w * v[d];
                }
                lse[(b * NH + h) * T + t] = mx + logf(sum);
            }
}

static void attention_bwd(float *dqsrc, float *dkvsrc, const float *dout, const float *qsrc,
                          const float *kvsrc, const float *lse, const layout *l,
                          float *workspace)
{
    const pl_attn_shape *s = l->s;
    pl_attention_check(s, l->cross);
    const int64_t T = s->T, NH = s->NH, HS = s->HS;
    const float scale = scale_of(s);
    float *p = workspace, *dp = p + l->Tk, *z = dp + l->Tk; /* (Tk) each */
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NH; h++) {
                const float *q = qsrc + at(l, b, t, h, 0);
                const float *dy = dout + ((b * T + t) * NH + h) * HS;
                const int64_t n = keys_seen(l, b, t);
                float lrow = lse[(b * NH + h) * T + t];
                float pdp = 0.0f;
                for (int64_t u = 0; u < n; u++) {
                    const float *k = kvsrc + at(l, b, u, h, 1);
                    const float *v = kvsrc + at(l, b, u, h, 2);
                    float dot = 0.0f, dyv = 0.0f;
                    for (int64_t d = 0; d < HS; d++) {
                        dot += q[d] * k[d];
                        dyv += dy[d] * v[d];
                    }
                    z[u] = drop_factor(l, b, h, t, u);
                    p[u] = expf(dot * scale + rel_bias(s, h, t, u) - lrow);
                    dp[u] = dyv * z[u];
                    pdp += p[u] * dp[u];
                }
                float *dq = dqsrc + at(l, b, t, h, 0);
                for (int64_t u = 0; u < n; u++) {
                    const float *k = kvsrc + at(l, b, u, h, 1);
                    float *dk = dkvsrc + at(l, b, u, h, 1);
                    float *dv = dkvsrc + at(l, b, u, h, 2);
                    float dsu = p[u] * (dp[u] - pdp), ds = dsu * scale, pz = p[u] * z[u];
                    if (s->drel_bias)
                        s->drel_bias[h * (2 * T - 1) + T - 1 + u - t] += dsu;
                    for (int64_t d = 0; d < HS; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += pz * dy[d];
                    }
                }
            }
}

void pl_ref_attention_fwd(float *out, float *lse, const float *qkv, const pl_attn_shape *s,
                          float *workspace)
{
    const layout l = {s, 0, s->T};
    attention_fwd(out, lse, qkv, qkv, &l, workspace);
}

void pl_ref_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, const pl_attn_shape *s, float *workspace)
{
    (void)out;
    const layout l = {s, 0, s->T};
    attention_bwd(dqkv, dqkv, dout, qkv, qkv, lse, &l, workspace);
}

void pl_ref_attention_cross_fwd(float *out, float *lse, const float *q, const float *kv,
                                const pl_attn_shape *s, float *workspace)
{
    const layout l = {s, 1, s->Tk};
    attention_fwd(out, lse, q, kv, &l, workspace);
}

void pl_ref_attention_cross_bwd(float *dq, float *dkv, const float *dout, const float *q,
                                const float *kv, const float *out, const float *lse,
                                const pl_attn_shape *s, float *workspace)
{
    (void)out;
    const layout l = {s, 1, s->Tk};
    attention_bwd(dq, dkv, dout, q, kv, lse, &l, workspace);
}
