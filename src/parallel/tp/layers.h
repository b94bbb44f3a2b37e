/* Tensor-parallel layers, communicating exactly where Megatron-LM does
 * (megatron/core/tensor_parallel/{layers,mappings,cross_entropy}.py):
 *
 *   column-parallel linear  W split by output rows. forward: f = identity;
 *                           backward: dx all-reduced over TP (f's backward).
 *   row-parallel linear     W split by input columns. forward: partial y
 *                           all-reduced over TP (g), then the bias added once;
 *                           backward: identity.
 *   vocab-parallel embedding rank r holds vocabulary rows [v0, v0+V); ids
 *                           outside give zero rows; all-reduce over TP.
 *   vocab-parallel cross-entropy: max (all-reduce MAX), sum of exp (SUM) and
 *                           target logit (SUM) combined across TP ranks.
 *   sequence parallelism (sp): each rank holds N/tp consecutive rows of the
 *                           residual stream (rows [rank N/tp, (rank+1) N/tp) of
 *                           (N, C)). g becomes a reduce-scatter to those rows, f's
 *                           backward too; the input of a column-parallel layer
 *                           is all-gathered first (the caller's job: it writes
 *                           its rows in place and calls pl_tp_gather_rows).
 * With a TP group of one rank (or tp NULL), every collective is skipped. Shapes as in
 * kernels.h; gradient outputs named "must be zero" are overwritten with the
 * full gradient, the others are added into. */
#ifndef PL_PARALLEL_TP_LAYERS_H
#define PL_PARALLEL_TP_LAYERS_H

#include "kernels/kernels.h"
#include "parallel/comm.h"
#include "parallel/commq.h"

/* The rows of this rank under sequence parallelism: [n0, n0 + Nl) of N. */
static inline int64_t pl_tp_rows(const pl_comm *tp, int sp, int64_t N)
{
    return sp && tp && tp->size > 1 ? N / tp->size : N;
}
static inline int64_t pl_tp_row0(const pl_comm *tp, int sp, int64_t N)
{
    return sp && tp && tp->size > 1 ? N / tp->size * tp->rank : 0;
}

/* Sums partial (N, C) over the TP group: all-reduce in place (out must be
 * partial), or with sp a reduce-scatter leaving this rank's rows in out. */
pl_status pl_tp_reduce_rows(pl_comm *tp, int sp, float *out, float *partial, int64_t N, int64_t C);
/* full (N, C) = every rank's rows, this rank's already in place at their rows
 * (sequence parallelism's all-gather). */
pl_status pl_tp_gather_rows(pl_comm *tp, float *full, int64_t N, int64_t C);

/* y (N, OCl) = x (N, IC) . W^T + b, W (OCl, IC), b (OCl). */
pl_status pl_tp_column_linear_fwd(pl_comm *tp, pl_gemm *g, float *y, const float *x,
                                  const float *w, const float *b, int64_t N, int64_t IC,
                                  int64_t OCl);
/* dx (N, IC) must be zero on entry and holds the input gradient on exit: all of
 * it, or with sp this rank's rows at dx[0, N/tp * IC). dw, db are added into. */
pl_status pl_tp_column_linear_bwd(pl_comm *tp, int sp, pl_gemm *g, float *dx, float *dw,
                                  float *db, const float *dy, const float *x, const float *w,
                                  int64_t N, int64_t IC, int64_t OCl);

/* The same, with the input gradient's reduction on the communication queue q
 * while the weight-gradient GEMM runs (Megatron's --tp-comm-overlap for the
 * input gradient). op: the caller's operation slot. overlap (may be NULL)
 * accumulates the collective's seconds in busy and the time this thread
 * waited for it after the GEMM in wait. q NULL or a one-rank group: as above. */
typedef struct pl_tp_overlap {
    double busy, wait;
    int64_t ops;
} pl_tp_overlap;
pl_status pl_tp_column_linear_bwd_overlap(pl_comm *tp, int sp, pl_commq *q, pl_commq_op *op,
                                          pl_tp_overlap *overlap, pl_gemm *g, float *dx,
                                          float *dw, float *db, const float *dy, const float *x,
                                          const float *w, int64_t N, int64_t IC, int64_t OCl);

/* y = reduce(x (N, ICl) . W^T) + b, W (OC, ICl), b (OC) replicated: y (N, OC),
 * or with sp this rank's rows (N/tp, OC), the product then going through
 * partial (N x OC floats of scratch; without sp partial is y). */
pl_status pl_tp_row_linear_fwd(pl_comm *tp, int sp, pl_gemm *g, float *y, float *partial,
                               const float *x, const float *w, const float *b, int64_t N,
                               int64_t ICl, int64_t OC);
/* dx (N, ICl), dw, db added into; dy (N, OC) whole (gathered under sp). */
pl_status pl_tp_row_linear_bwd(pl_comm *tp, pl_gemm *g, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int64_t N,
                               int64_t ICl, int64_t OC);

/* out = word embeddings of ids (vocab-parallel, reduced) + positions (wpe NULL:
 * none, as with rotary embeddings): (B*T, C), or with sp this rank's rows, the
 * word embeddings then going through partial (B*T x C floats of scratch;
 * without sp partial is out). */
pl_status pl_tp_embedding_fwd(pl_comm *tp, int sp, float *out, float *partial, const int32_t *ids,
                              const float *wte, const float *wpe, int64_t B, int64_t T, int64_t C,
                              int64_t v0, int64_t V);
/* dout (B*T, C) whole (gathered under sp): every rank's gradients are whole. */
void pl_tp_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *ids,
                         int64_t B, int64_t T, int64_t C, int64_t v0, int64_t V);

/* Cross-entropy of the tied LM head: logits = x (N, C) . wte^T (+ bias, this
 * rank's rows of the output layer's bias, or NULL) over the vocab-parallel rows. Writes loss (N) and lse (N, log-sum-exp over the whole
 * vocabulary, kept for backward). rows: scratch of 3 N floats. */
pl_status pl_tp_lmhead_loss(pl_comm *tp, pl_gemm *g, float *loss, float *lse, const float *x,
                            const float *wte, const float *bias, const int32_t *targets,
                            int64_t N, int64_t C,
                            int64_t v0, int64_t V, int64_t chunk, float *workspace, float *rows);
/* dx (N, C) must be zero on entry (the input gradient on exit: all of it, or
 * with sp this rank's rows at dx[0, N/tp * C)); dwte and dbias (or NULL) added into.
 * dloss (N): d objective / d loss[n]. logits_kept: the workspace still holds
 * the logits pl_tp_lmhead_loss left there with chunk >= V (kernels.h). */
pl_status pl_tp_lmhead_bwd(pl_comm *tp, int sp, pl_gemm *g, float *dx, float *dwte, float *dbias,
                           const float *x, const float *wte, const float *bias,
                           const int32_t *targets, const float *lse,
                           const float *dloss, int64_t N, int64_t C, int64_t v0, int64_t V,
                           int64_t chunk, float *workspace, int logits_kept);

/* The LM head and its cross-entropy with the gradient formed in the forward
 * (--lm-head-logits fused): dloss is known before the forward (the loss is the
 * objective's last operation), so for each block of `rows` rows the rows'
 * logits over the whole vocabulary slice are computed once into the workspace
 * (rows x V floats, pl_tp_lmhead_fused_workspace), give the rows' loss and lse
 * (the log-sum-exp all-reduced over tp per block, as pl_tp_lmhead_loss), become
 * dlogits in place, and add into dx (N, C) and dwte / dbias: three GEMMs of
 * N x V x C, no N x V buffer. dx NULL: the loss alone (no gradient). Otherwise
 * dx is written (zeroed first) and, as pl_tp_lmhead_bwd leaves it, reduced over
 * tp (with sp this rank's rows first). rowbuf: 3 rows floats. */
size_t pl_tp_lmhead_fused_workspace(int64_t rows, int64_t V);
pl_status pl_tp_lmhead_fused(pl_comm *tp, int sp, pl_gemm *g, float *loss, float *lse, float *dx,
                             float *dwte, float *dbias, const float *x, const float *wte,
                             const float *bias, const int32_t *targets, const float *dloss,
                             int64_t N, int64_t C, int64_t v0, int64_t V, int64_t rows,
                             float *workspace, float *rowbuf);

#endif
