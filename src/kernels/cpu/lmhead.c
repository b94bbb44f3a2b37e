/* Fast twin: LM head fused with softmax cross-entropy, chunked over the vocabulary.
 *
 * For each chunk of `chunk` vocabulary rows, one GEMM writes the chunk's
 * logits x . w_chunk^T into the workspace (N, chunk); then, in parallel over
 * rows:
 *   stats: the running row max and sum of exp are updated online
 *          (s = s exp(m - m') + sum exp(l - m'));
 *   bwd:   the logits become dlogits = (exp(l - lse) - onehot) * dloss in
 *          place, and two GEMMs add dx += dlogits . w_chunk and
 *          dw_chunk += dlogits^T . x.
 * The workspace is N * chunk floats: logits (N, V) never exist whole unless
 * chunk >= V, when the stats pass leaves them all there and the backward may
 * take them (logits_kept) instead of recomputing: then dlogits are formed in
 * place and dx, dw are one GEMM each over the whole vocabulary slice. Each
 * chunk shape (full, and the last one if V % chunk != 0) is a cached GEMM
 * primitive, created on the first call. Row work is independent per row and
 * the GEMMs run serially in chunk order, so results do not depend on the
 * OpenMP thread count (given oneDNN's fixed partitioning for fixed shapes). */
#include "kernels/kernels.h"

#include "base/status.h"
#include "kernels/cpu/simd.h"

#include <math.h>

/* Rows per parallel work item: amortizes scheduling over chunk-wide rows. */
#define LM_ROWS 8

size_t pl_lmhead_workspace(int64_t N, int64_t chunk) { return (size_t)N * (size_t)chunk; }

pl_status pl_lmhead_prepare(pl_gemm *g, int64_t N, int64_t C, int64_t V, int64_t chunk)
{
    pl_status st = PL_OK;
    const int64_t sizes[2] = {chunk < V ? chunk : V, V % chunk};
    for (int k = 0; k < 2 && !st; k++) {
        int64_t cs = sizes[k];
        if (cs == 0)
            continue;
        st = pl_gemm_prepare(g, 0, 1, N, cs, C, C, C, chunk, 0.0f);
        if (!st)
            st = pl_gemm_prepare(g, 0, 0, N, C, cs, chunk, C, C, 1.0f);
        if (!st)
            st = pl_gemm_prepare(g, 1, 0, cs, C, N, chunk, C, C, 1.0f);
    }
    return st;
}

static void add_bias(float *restrict row, const float *restrict bias, int64_t n)
{
#pragma omp simd
    for (int64_t v = 0; v < n; v++)
        row[v] += bias[v];
}

/* db (cs) += column sums of a (N, cs) with row stride lda: each column summed
 * over n in order, columns split among threads (the same bits for any count). */
static void column_sums(float *db, const float *a, int64_t N, int64_t cs, int64_t lda)
{
    enum { COLS = 256 };
#pragma omp parallel for schedule(static) if (N * cs > 32768)
    for (int64_t v0 = 0; v0 < cs; v0 += COLS) {
        const int64_t v1 = v0 + COLS < cs ? v0 + COLS : cs;
        for (int64_t n = 0; n < N; n++) {
            const float *restrict r = a + n * lda;
            float *restrict d = db;
#pragma omp simd
            for (int64_t v = v0; v < v1; v++)
                d[v] += r[v];
        }
    }
}

static pl_status check(const char *fn, int64_t N, int64_t C, int64_t V, int64_t chunk)
{
    if (N < 0 || C < 1 || V < 1 || chunk < 1)
        return pl_errorf(PL_ERR_ARG,
                         "%s: need N >= 0 and C, V, chunk >= 1 (got N=%lld C=%lld V=%lld "
                         "chunk=%lld)",
                         fn, (long long)N, (long long)C, (long long)V, (long long)chunk);
    return PL_OK;
}

pl_status pl_cpu_lmhead_stats(float *row_max, float *row_sumexp, float *target_logit,
                              const float *x, const float *w, const float *bias,
                              const int32_t *targets, int64_t N, int64_t C, int64_t v0, int64_t V,
                              int64_t chunk, float *workspace, pl_gemm *g)
{
    PL_DISPATCH_RET(lmhead_stats, row_max, row_sumexp, target_logit, x, w, bias, targets, N, C,
                    v0, V, chunk, workspace, g);
    pl_status st = check("lmhead_stats", N, C, V, chunk);
    if (st != PL_OK || N == 0)
        return st;
    for (int64_t c0 = 0; c0 < V; c0 += chunk) {
        const int64_t cs = V - c0 < chunk ? V - c0 : chunk;
        st = pl_gemm_run(g, 0, 1, N, cs, C, x, C, w + c0 * C, C, 0.0f, workspace, chunk);
        if (st != PL_OK)
            return pl_error_wrap(st, "lmhead_stats: logits of vocabulary rows %lld..%lld",
                                 (long long)(v0 + c0), (long long)(v0 + c0 + cs));
#pragma omp parallel for schedule(static) if (N * cs > 32768)
        for (int64_t n0 = 0; n0 < N; n0 += LM_ROWS) {
            int64_t n1 = n0 + LM_ROWS < N ? n0 + LM_ROWS : N;
            for (int64_t n = n0; n < n1; n++) {
                float *row = workspace + n * chunk;
                if (bias)
                    add_bias(row, bias + c0, cs);
                float mx = c0 == 0 ? -INFINITY : row_max[n];
#pragma omp simd reduction(max : mx)
                for (int64_t v = 0; v < cs; v++)
                    mx = row[v] > mx ? row[v] : mx;
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (int64_t v = 0; v < cs; v++)
                    sum += pl_vexpf(row[v] - mx);
                if (c0 == 0) {
                    row_sumexp[n] = sum;
                    target_logit[n] = 0.0f;
                } else {
                    row_sumexp[n] = row_sumexp[n] * expf(row_max[n] - mx) + sum;
                }
                row_max[n] = mx;
                int64_t tv = (int64_t)targets[n] - v0 - c0;
                if (tv >= 0 && tv < cs)
                    target_logit[n] = row[tv];
            }
        }
    }
    return PL_OK;
}

pl_status pl_cpu_lmhead_bwd(float *dx, float *dw, float *dbias, const float *x, const float *w,
                            const float *bias, const int32_t *targets, const float *lse,
                            const float *dloss, int64_t N, int64_t C, int64_t v0, int64_t V,
                            int64_t chunk, float *workspace, int logits_kept, pl_gemm *g)
{
    PL_DISPATCH_RET(lmhead_bwd, dx, dw, dbias, x, w, bias, targets, lse, dloss, N, C, v0, V,
                    chunk, workspace, logits_kept, g);
    pl_status st = check("lmhead_bwd", N, C, V, chunk);
    if (st == PL_OK && logits_kept && chunk < V)
        st = pl_errorf(PL_ERR_ARG,
                       "lmhead_bwd: logits_kept needs the whole slice in one chunk (chunk %lld < "
                       "V %lld)",
                       (long long)chunk, (long long)V);
    if (st != PL_OK || N == 0)
        return st;
    for (int64_t c0 = 0; c0 < V; c0 += chunk) {
        const int64_t cs = V - c0 < chunk ? V - c0 : chunk;
        const float *wc = w + c0 * C;
        if (!logits_kept)
            st = pl_gemm_run(g, 0, 1, N, cs, C, x, C, wc, C, 0.0f, workspace, chunk);
        if (st == PL_OK) {
#pragma omp parallel for schedule(static) if (N * cs > 32768)
            for (int64_t n0 = 0; n0 < N; n0 += LM_ROWS) {
                int64_t n1 = n0 + LM_ROWS < N ? n0 + LM_ROWS : N;
                for (int64_t n = n0; n < n1; n++) {
                    float *row = workspace + n * chunk;
                    const float l = lse[n], d = dloss[n];
                    if (bias && !logits_kept)
                        add_bias(row, bias + c0, cs);
#pragma omp simd
                    for (int64_t v = 0; v < cs; v++)
                        row[v] = pl_vexpf(row[v] - l) * d;
                    int64_t tv = (int64_t)targets[n] - v0 - c0;
                    if (tv >= 0 && tv < cs)
                        row[tv] -= d; /* (p - 1) d */
                }
            }
        }
        if (st == PL_OK && dbias)
            column_sums(dbias + c0, workspace, N, cs, chunk);
        /* dx (N, C) += dlogits (N, cs) . w_chunk (cs, C) */
        if (st == PL_OK)
            st = pl_gemm_run(g, 0, 0, N, C, cs, workspace, chunk, wc, C, 1.0f, dx, C);
        /* dw_chunk (cs, C) += dlogits^T (cs, N) . x (N, C) */
        if (st == PL_OK)
            st = pl_gemm_run(g, 1, 0, cs, C, N, workspace, chunk, x, C, 1.0f, dw + c0 * C, C);
        if (st != PL_OK)
            return pl_error_wrap(st, "lmhead_bwd: vocabulary rows %lld..%lld",
                                 (long long)(v0 + c0), (long long)(v0 + c0 + cs));
    }
    return PL_OK;
}
