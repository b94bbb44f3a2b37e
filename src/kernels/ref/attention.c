/* Reference twin: self-attention, one query row at a time.
 *
 * For each (b, t, h) the scores of the keys query t sees (a prefix: keys <= t
 * if causal, keys < kv_len[b] if padded, both if both) are formed in the
 * workspace, softmaxed in two passes and applied to v, each probability times
 * its dropout factor Z/(1-p), drawn with pl_rng_u32 one element at a time.
 * Backward recomputes the probabilities from lse and uses
 * dS = P (dP~ - sum_j P_j dP~_j), dP~ = Z/(1-p) dout.v (the sum is
 * rowsum(dout * out), FlashAttention's D, formed the other way round).
 * Workspace: 3T floats (within pl_attention_workspace()). */
#include "kernels/kernels.h"

#include "base/rng.h"
#include "base/status.h"

#include <math.h>

void pl_attention_check(const pl_attn_shape *s)
{
    PL_ASSERT(s->B >= 0 && s->T >= 0 && s->NH >= 1 && s->G >= 1 && s->HS >= 1);
    PL_ASSERT(s->NH % s->G == 0);
    PL_ASSERT(s->causal == 0 || s->causal == 1);
    PL_ASSERT(s->dropout >= 0.0f && s->dropout < 1.0f);
    for (int64_t b = 0; s->kv_len && b < s->B; b++)
        PL_ASSERT(s->kv_len[b] >= 1 && s->kv_len[b] <= s->T);
    if (s->dropout > 0.0f) {
        PL_ASSERT(s->sample != NULL && s->h0 >= 0 && s->h0 + s->NH <= s->NHg);
        for (int64_t b = 0; b < s->B; b++)
            PL_ASSERT(s->sample[b] >= 0);
    }
}

/* Offset in qkv of query head h's q (which = 0), or of its group's k (1) or
 * v (2), at (b, t). */
static int64_t qkv_at(const pl_attn_shape *s, int64_t b, int64_t t, int64_t h, int which)
{
    const int64_t QG = s->NH / s->G, g = h / QG;
    const int64_t slot = which == 0 ? h % QG : QG + which - 1;
    return (((b * s->T + t) * s->G + g) * (QG + 2) + slot) * s->HS;
}

/* Number of keys query t of sample b sees: they are keys 0 .. n-1. */
static int64_t keys_seen(const pl_attn_shape *s, int64_t b, int64_t t)
{
    int64_t n = s->causal ? t + 1 : s->T;
    if (s->kv_len && s->kv_len[b] < n)
        n = s->kv_len[b];
    return n;
}

/* Z(b, h, t, u) / (1 - p): the dropout factor of one probability (1 without dropout). */
static float drop_factor(const pl_attn_shape *s, int64_t b, int64_t h, int64_t t, int64_t u)
{
    if (s->dropout == 0.0f)
        return 1.0f;
    const uint64_t T = (uint64_t)s->T;
    uint64_t row = ((uint64_t)s->sample[b] * (uint64_t)s->NHg + (uint64_t)(s->h0 + h)) * T;
    uint32_t r = pl_rng_u32(s->drop_seed, s->drop_stream, (row + (uint64_t)t) * T + (uint64_t)u);
    return r >= pl_dropout_threshold(s->dropout) ? 1.0f / (1.0f - s->dropout) : 0.0f;
}

void pl_ref_attention_fwd(float *out, float *lse, const float *qkv, const pl_attn_shape *s,
                          float *workspace)
{
    pl_attention_check(s);
    const int64_t T = s->T, NH = s->NH, HS = s->HS;
    float scale = 1.0f / sqrtf((float)HS);
    float *p = workspace; /* (T) */
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NH; h++) {
                const float *q = qkv + qkv_at(s, b, t, h, 0);
                const int64_t n = keys_seen(s, b, t);
                float mx = -INFINITY;
                for (int64_t u = 0; u < n; u++) {
                    const float *k = qkv + qkv_at(s, b, u, h, 1);
                    float dot = 0.0f;
                    for (int64_t d = 0; d < HS; d++)
                        dot += q[d] * k[d];
                    p[u] = dot * scale;
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
                    const float *v = qkv + qkv_at(s, b, u, h, 2);
                    float w = p[u] / sum * drop_factor(s, b, h, t, u);
                    for (int64_t d = 0; d < HS; d++)
                        o[d] += w * v[d];
                }
                lse[(b * NH + h) * T + t] = mx + logf(sum);
            }
}

void pl_ref_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, const pl_attn_shape *s, float *workspace)
{
    (void)out;
    pl_attention_check(s);
    const int64_t T = s->T, NH = s->NH, HS = s->HS;
    float scale = 1.0f / sqrtf((float)HS);
    float *p = workspace, *dp = p + T, *z = dp + T; /* (T) each */
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NH; h++) {
                const float *q = qkv + qkv_at(s, b, t, h, 0);
                const float *dy = dout + ((b * T + t) * NH + h) * HS;
                const int64_t n = keys_seen(s, b, t);
                float l = lse[(b * NH + h) * T + t];
                float pdp = 0.0f;
                for (int64_t u = 0; u < n; u++) {
                    const float *k = qkv + qkv_at(s, b, u, h, 1);
                    const float *v = qkv + qkv_at(s, b, u, h, 2);
                    float dot = 0.0f, dyv = 0.0f;
                    for (int64_t d = 0; d < HS; d++) {
                        dot += q[d] * k[d];
                        dyv += dy[d] * v[d];
                    }
                    z[u] = drop_factor(s, b, h, t, u);
                    p[u] = expf(dot * scale - l);
                    dp[u] = dyv * z[u];
                    pdp += p[u] * dp[u];
                }
                float *dq = dqkv + qkv_at(s, b, t, h, 0);
                for (int64_t u = 0; u < n; u++) {
                    const float *k = qkv + qkv_at(s, b, u, h, 1);
                    float *dk = dqkv + qkv_at(s, b, u, h, 1);
                    float *dv = dqkv + qkv_at(s, b, u, h, 2);
                    float ds = p[u] * (dp[u] - pdp) * scale, pz = p[u] * z[u];
                    for (int64_t d = 0; d < HS; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += pz * dy[d];
                    }
                }
            }
}
