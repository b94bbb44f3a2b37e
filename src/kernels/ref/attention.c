/* Reference twin: causal self-attention, one query row at a time.
 *
 * For each (b, t, h) the scores of keys 0..t are formed in the workspace (T
 * floats), softmaxed in two passes and applied to v. Backward recomputes the
 * probabilities from lse and uses dS = P (dP - sum_j P_j dP_j). Workspace: 2T
 * floats (within pl_attention_workspace()). */
#include "kernels/kernels.h"

#include <math.h>

/* Pointer to the q (which = 0), k (1) or v (2) row of (b, t, h). */
static inline int64_t qkv_at(int64_t b, int64_t t, int64_t h, int which, int64_t T, int64_t NH,
                             int64_t HS)
{
    return (((b * T + t) * NH + h) * 3 + which) * HS;
}

void pl_ref_attention_fwd(float *out, float *lse, const float *qkv, int64_t B, int64_t T,
                          int64_t NH, int64_t HS, float *workspace)
{
    float scale = 1.0f / sqrtf((float)HS);
    float *p = workspace; /* (T) */
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NH; h++) {
                const float *q = qkv + qkv_at(b, t, h, 0, T, NH, HS);
                float mx = -INFINITY;
                for (int64_t s = 0; s <= t; s++) {
                    const float *k = qkv + qkv_at(b, s, h, 1, T, NH, HS);
                    float dot = 0.0f;
                    for (int64_t d = 0; d < HS; d++)
                        dot += q[d] * k[d];
                    p[s] = dot * scale;
                    mx = fmaxf(mx, p[s]);
                }
                float sum = 0.0f;
                for (int64_t s = 0; s <= t; s++) {
                    p[s] = expf(p[s] - mx);
                    sum += p[s];
                }
                float *o = out + ((b * T + t) * NH + h) * HS;
                for (int64_t d = 0; d < HS; d++)
                    o[d] = 0.0f;
                for (int64_t s = 0; s <= t; s++) {
                    const float *v = qkv + qkv_at(b, s, h, 2, T, NH, HS);
                    for (int64_t d = 0; d < HS; d++)
                        o[d] += p[s] / sum * v[d];
                }
                lse[(b * NH + h) * T + t] = mx + logf(sum);
            }
}

void pl_ref_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                          const float *lse, int64_t B, int64_t T, int64_t NH, int64_t HS,
                          float *workspace)
{
    (void)out;
    float scale = 1.0f / sqrtf((float)HS);
    float *p = workspace, *dp = workspace + T; /* (T) each */
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < NH; h++) {
                const float *q = qkv + qkv_at(b, t, h, 0, T, NH, HS);
                const float *dy = dout + ((b * T + t) * NH + h) * HS;
                float l = lse[(b * NH + h) * T + t];
                float pdp = 0.0f;
                for (int64_t s = 0; s <= t; s++) {
                    const float *k = qkv + qkv_at(b, s, h, 1, T, NH, HS);
                    const float *v = qkv + qkv_at(b, s, h, 2, T, NH, HS);
                    float dot = 0.0f, dyv = 0.0f;
                    for (int64_t d = 0; d < HS; d++) {
                        dot += q[d] * k[d];
                        dyv += dy[d] * v[d];
                    }
                    p[s] = expf(dot * scale - l);
                    dp[s] = dyv;
                    pdp += p[s] * dp[s];
                }
                float *dq = dqkv + qkv_at(b, t, h, 0, T, NH, HS);
                for (int64_t s = 0; s <= t; s++) {
                    const float *k = qkv + qkv_at(b, s, h, 1, T, NH, HS);
                    float *dk = dqkv + qkv_at(b, s, h, 1, T, NH, HS);
                    float *dv = dqkv + qkv_at(b, s, h, 2, T, NH, HS);
                    float ds = p[s] * (dp[s] - pdp) * scale;
                    for (int64_t d = 0; d < HS; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += p[s] * dy[d];
                    }
                }
            }
}
