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
 * With a TP group of one rank (or tp NULL), every all-reduce is skipped. Shapes as in
 * kernels.h; gradient outputs named "must be zero" are overwritten with the
 * full gradient, the others are added into. */
#ifndef PL_PARALLEL_TP_LAYERS_H
#define PL_PARALLEL_TP_LAYERS_H

#include "kernels/kernels.h"
#include "parallel/comm.h"

/* y (N, OCl) = x (N, IC) . W^T + b, W (OCl, IC), b (OCl). */
pl_status pl_tp_column_linear_fwd(pl_comm *tp, pl_gemm *g, float *y, const float *x,
                                  const float *w, const float *b, int64_t N, int64_t IC,
                                  int64_t OCl);
/* dx (N, IC) must be zero on entry and holds the full input gradient on exit;
 * dw, db are added into. */
pl_status pl_tp_column_linear_bwd(pl_comm *tp, pl_gemm *g, float *dx, float *dw, float *db,
                                  const float *dy, const float *x, const float *w, int64_t N,
                                  int64_t IC, int64_t OCl);

/* y (N, OC) = all-reduce(x (N, ICl) . W^T) + b, W (OC, ICl), b (OC) replicated. */
pl_status pl_tp_row_linear_fwd(pl_comm *tp, pl_gemm *g, float *y, const float *x, const float *w,
                               const float *b, int64_t N, int64_t ICl, int64_t OC);
/* dx (N, ICl), dw, db added into. */
pl_status pl_tp_row_linear_bwd(pl_comm *tp, pl_gemm *g, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int64_t N,
                               int64_t ICl, int64_t OC);

/* out (B*T, C) = word embeddings of ids (vocab-parallel, all-reduced) + positions
 * (wpe, dwpe NULL: none, as with rotary embeddings). */
pl_status pl_tp_embedding_fwd(pl_comm *tp, float *out, const int32_t *ids, const float *wte,
                              const float *wpe, int64_t B, int64_t T, int64_t C, int64_t v0,
                              int64_t V);
void pl_tp_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *ids,
                         int64_t B, int64_t T, int64_t C, int64_t v0, int64_t V);

/* Cross-entropy of the tied LM head: logits = x (N, C) . wte^T over the
 * vocab-parallel rows. Writes loss (N) and lse (N, log-sum-exp over the whole
 * vocabulary, kept for backward). rows: scratch of 3 N floats. */
pl_status pl_tp_lmhead_loss(pl_comm *tp, pl_gemm *g, float *loss, float *lse, const float *x,
                            const float *wte, const int32_t *targets, int64_t N, int64_t C,
                            int64_t v0, int64_t V, int64_t chunk, float *workspace, float *rows);
/* dx (N, C) must be zero on entry (full gradient on exit); dwte added into.
 * dloss (N): d objective / d loss[n]. logits_kept: the workspace still holds
 * the logits pl_tp_lmhead_loss left there with chunk >= V (kernels.h). */
pl_status pl_tp_lmhead_bwd(pl_comm *tp, pl_gemm *g, float *dx, float *dwte, const float *x,
                           const float *wte, const int32_t *targets, const float *lse,
                           const float *dloss, int64_t N, int64_t C, int64_t v0, int64_t V,
                           int64_t chunk, float *workspace, int logits_kept);

#endif
