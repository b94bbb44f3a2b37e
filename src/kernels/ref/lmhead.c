/* Reference twin: LM head fused with softmax cross-entropy, one logit at a time.
 *
 * Each logit is a dot product x[n] . w[v]; nothing is chunked or stored, so the
 * workspace and the GEMM context are ignored. */
#include "kernels/kernels.h"

#include "base/status.h"

#include <math.h>

static float logit(const float *x, const float *w, const float *bias, int64_t n, int64_t v,
                   int64_t C)
{
    float dot = 0.0f;
    for (int64_t c = 0; c < C; c++)
        dot += x[n * C + c] * w[v * C + c];
    return bias ? dot + bias[v] : dot;
}

pl_status pl_ref_lmhead_stats(float *row_max, float *row_sumexp, float *target_logit,
                              const float *x, const float *w, const float *bias,
                              const int32_t *targets, int64_t N, int64_t C, int64_t v0, int64_t V,
                              int64_t chunk, float *workspace, pl_gemm *g)
{
    (void)workspace, (void)g;
    if (chunk < 1 || V < 1)
        return pl_errorf(PL_ERR_ARG, "lmhead_stats: chunk %lld and V %lld must be >= 1",
                         (long long)chunk, (long long)V);
    for (int64_t n = 0; n < N; n++) {
        float mx = -INFINITY;
        for (int64_t v = 0; v < V; v++)
            mx = fmaxf(mx, logit(x, w, bias, n, v, C));
        float sum = 0.0f;
        for (int64_t v = 0; v < V; v++)
            sum += expf(logit(x, w, bias, n, v, C) - mx);
        int64_t tv = (int64_t)targets[n] - v0;
        row_max[n] = mx;
        row_sumexp[n] = sum;
        target_logit[n] = (tv >= 0 && tv < V) ? logit(x, w, bias, n, tv, C) : 0.0f;
    }
    return PL_OK;
}

pl_status pl_ref_lmhead_bwd(float *dx, float *dw, float *dbias, const float *x, const float *w,
                            const float *bias, const int32_t *targets, const float *lse,
                            const float *dloss, int64_t N, int64_t C, int64_t v0, int64_t V,
                            int64_t chunk, float *workspace, int logits_kept, pl_gemm *g)
{
    (void)workspace, (void)logits_kept, (void)g;
    if (chunk < 1 || V < 1)
        return pl_errorf(PL_ERR_ARG, "lmhead_bwd: chunk %lld and V %lld must be >= 1",
                         (long long)chunk, (long long)V);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t v = 0; v < V; v++) {
            float p = expf(logit(x, w, bias, n, v, C) - lse[n]);
            float dl = (p - (v + v0 == targets[n] ? 1.0f : 0.0f)) * dloss[n];
            if (dbias)
                dbias[v] += dl;
            for (int64_t c = 0; c < C; c++) {
                dx[n * C + c] += dl * w[v * C + c];
                dw[v * C + c] += dl * x[n * C + c];
            }
        }
    }
    return PL_OK;
}
