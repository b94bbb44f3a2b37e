/* Tensor-parallel linear layers, embedding and cross-entropy. */
#include "parallel/tp/layers.h"

#include "base/log.h"
#include "nn/linear.h"

#include <math.h>
#include <string.h>

static int tp_many(const pl_comm *tp) { return tp && tp->size > 1; }

pl_status pl_tp_reduce_rows(pl_comm *tp, int sp, float *out, float *partial, int64_t N, int64_t C)
{
    if (!tp_many(tp))
        return out == partial ? PL_OK : pl_errorf(PL_ERR_INTERNAL, "pl_tp_reduce_rows: no TP group "
                                                  "but out is not the partial buffer");
    if (sp)
        return pl_comm_reduce_scatter_f32(tp, partial, out, N / tp->size * C);
    return pl_comm_allreduce_f32(tp, partial, N * C, PL_COMM_SUM);
}

pl_status pl_tp_gather_rows(pl_comm *tp, float *full, int64_t N, int64_t C)
{
    if (!tp_many(tp))
        return PL_OK;
    const int64_t block = N / tp->size * C;
    return pl_comm_allgather_f32(tp, full + tp->rank * block, full, block);
}

pl_status pl_tp_column_linear_fwd(pl_comm *tp, pl_gemm *g, float *y, const float *x,
                                  const float *w, const float *b, int64_t N, int64_t IC,
                                  int64_t OCl)
{
    (void)tp; /* f: identity in forward */
    return pl_nn_linear_fwd(g, y, x, w, b, N, IC, OCl);
}

pl_status pl_tp_column_linear_bwd(pl_comm *tp, int sp, pl_gemm *g, float *dx, float *dw,
                                  float *db, const float *dy, const float *x, const float *w,
                                  int64_t N, int64_t IC, int64_t OCl)
{
    pl_status st = pl_nn_linear_bwd(g, dx, dw, db, dy, x, w, N, IC, OCl);
    return st ? st : pl_tp_reduce_rows(tp, sp, dx, dx, N, IC); /* f's backward */
}

pl_status pl_tp_column_linear_bwd_overlap(pl_comm *tp, int sp, pl_commq *q, pl_commq_op *op,
                                          pl_tp_overlap *overlap, pl_gemm *g, float *dx,
                                          float *dw, float *db, const float *dy, const float *x,
                                          const float *w, int64_t N, int64_t IC, int64_t OCl)
{
    if (!q || !tp_many(tp))
        return pl_tp_column_linear_bwd(tp, sp, g, dx, dw, db, dy, x, w, N, IC, OCl);
    /* dx (N,IC) += dy (N,OCl) . W (OCl,IC), then its reduction goes to the queue */
    pl_status st = pl_gemm_run(g, 0, 0, N, IC, OCl, dy, OCl, w, IC, 1.0f, dx, IC);
    if (st)
        return st;
    *op = (pl_commq_op){.kind = sp ? PL_COMMQ_REDUCE_SCATTER : PL_COMMQ_ALLREDUCE,
                        .comm = tp, .buf = dx, .n = N * IC, .scale = 1.0f, .recv = dx};
    if ((st = pl_commq_post(q, op)))
        return st;
    pl_status gst = pl_nn_linear_bwd(g, NULL, dw, db, dy, x, w, N, IC, OCl); /* dW, db */
    double t0 = pl_time_now();
    st = pl_commq_wait(q, op); /* always, even after a failed GEMM: the queue owns dx */
    if (overlap) {
        overlap->wait += pl_time_now() - t0;
        overlap->busy += op->t_end - op->t_start;
        overlap->ops++;
    }
    return gst ? gst : st;
}

pl_status pl_tp_row_linear_fwd(pl_comm *tp, int sp, pl_gemm *g, float *y, float *partial,
                               const float *x, const float *w, const float *b, int64_t N,
                               int64_t ICl, int64_t OC)
{
    if (!sp)
        partial = y;
    pl_status st = pl_nn_linear_fwd(g, partial, x, w, NULL, N, ICl, OC);
    if (!st)
        st = pl_tp_reduce_rows(tp, sp, y, partial, N, OC); /* g */
    if (!st && b)
        pl_cpu_bias_fwd(y, b, pl_tp_rows(tp, sp, N), OC);
    return st;
}

pl_status pl_tp_row_linear_bwd(pl_comm *tp, pl_gemm *g, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int64_t N,
                               int64_t ICl, int64_t OC)
{
    (void)tp; /* g's backward: identity */
    return pl_nn_linear_bwd(g, dx, dw, db, dy, x, w, N, ICl, OC);
}

pl_status pl_tp_embedding_fwd(pl_comm *tp, int sp, float *out, float *partial, const int32_t *ids,
                              const float *wte, const float *wpe, int64_t B, int64_t T, int64_t C,
                              int64_t v0, int64_t V)
{
    const int64_t N = B * T, rows = pl_tp_rows(tp, sp, N), n0 = pl_tp_row0(tp, sp, N);
    if (!sp)
        partial = out;
    pl_cpu_embedding_fwd(partial, ids, wte, N, C, v0, V);
    pl_status st = pl_tp_reduce_rows(tp, sp, out, partial, N, C);
    if (st || !wpe)
        return st;
    if (rows == N) {
        pl_cpu_pos_embedding_fwd(out, wpe, B, T, C);
        return PL_OK;
    }
    for (int64_t i = 0; i < rows; i++) /* this rank's rows, position (n0 + i) mod T */
        pl_cpu_add(out + i * C, out + i * C, wpe + (n0 + i) % T * C, C);
    return PL_OK;
}

void pl_tp_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *ids,
                         int64_t B, int64_t T, int64_t C, int64_t v0, int64_t V)
{
    pl_cpu_embedding_bwd(dwte, dout, ids, B * T, C, v0, V);
    if (dwpe)
        pl_cpu_pos_embedding_bwd(dwpe, dout, B, T, C);
}

pl_status pl_tp_lmhead_loss(pl_comm *tp, pl_gemm *g, float *loss, float *lse, const float *x,
                            const float *wte, const float *bias, const int32_t *targets,
                            int64_t N, int64_t C,
                            int64_t v0, int64_t V, int64_t chunk, float *workspace, float *rows)
{
    float *mx = rows, *sumexp = rows + N, *tlogit = rows + 2 * N;
    pl_status st = pl_cpu_lmhead_stats(mx, sumexp, tlogit, x, wte, bias, targets, N, C, v0, V,
                                       chunk, workspace, g);
    if (st)
        return st;
    if (tp_many(tp)) {
        /* Megatron's _VocabParallelCrossEntropy: global max, then rescale local sums. */
        for (int64_t n = 0; n < N; n++)
            lse[n] = mx[n];
        if ((st = pl_comm_allreduce_f32(tp, mx, N, PL_COMM_MAX)))
            return st;
        for (int64_t n = 0; n < N; n++)
            sumexp[n] *= expf(lse[n] - mx[n]);
        if ((st = pl_comm_allreduce_f32(tp, sumexp, 2 * N, PL_COMM_SUM))) /* sumexp and tlogit */
            return st;
    }
    for (int64_t n = 0; n < N; n++) {
        lse[n] = mx[n] + logf(sumexp[n]);
        loss[n] = lse[n] - tlogit[n];
    }
    return PL_OK;
}

size_t pl_tp_lmhead_fused_workspace(int64_t rows, int64_t V) { return (size_t)rows * (size_t)V; }

pl_status pl_tp_lmhead_fused(pl_comm *tp, int sp, pl_gemm *g, float *loss, float *lse, float *dx,
                             float *dwte, float *dbias, const float *x, const float *wte,
                             const float *bias, const int32_t *targets, const float *dloss,
                             int64_t N, int64_t C, int64_t v0, int64_t V, int64_t rows,
                             float *workspace, float *rowbuf)
{
    if (dx)
        memset(dx, 0, (size_t)(N * C) * sizeof(float));
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
        const int64_t R = N - r0 < rows ? N - r0 : rows;
        /* the rows' logits over the whole slice stay in the workspace (chunk = V) */
        pl_status st = pl_tp_lmhead_loss(tp, g, loss + r0, lse + r0, x + r0 * C, wte, bias,
                                         targets + r0, R, C, v0, V, V, workspace, rowbuf);
        if (!st && dx)
            st = pl_cpu_lmhead_bwd(dx + r0 * C, dwte, dbias, x + r0 * C, wte, bias, targets + r0,
                                   lse + r0, dloss + r0, R, C, v0, V, V, workspace, 1, g);
        if (st)
            return pl_error_wrap(st, "LM head rows %lld..%lld", (long long)r0,
                                 (long long)(r0 + R));
    }
    return dx ? pl_tp_reduce_rows(tp, sp, dx, dx, N, C) : PL_OK;
}

pl_status pl_tp_lmhead_bwd(pl_comm *tp, int sp, pl_gemm *g, float *dx, float *dwte, float *dbias,
                           const float *x, const float *wte, const float *bias,
                           const int32_t *targets, const float *lse,
                           const float *dloss, int64_t N, int64_t C, int64_t v0, int64_t V,
                           int64_t chunk, float *workspace, int logits_kept)
{
    pl_status st = pl_cpu_lmhead_bwd(dx, dwte, dbias, x, wte, bias, targets, lse, dloss, N, C, v0,
                                     V, chunk, workspace, logits_kept, g);
    return st ? st : pl_tp_reduce_rows(tp, sp, dx, dx, N, C);
}
