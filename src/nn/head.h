/* BERT's heads on the final norm's output (Megatron core's BertLMHead, Pooler
 * and binary_head; models/bert/):
 *
 *   lm transform:  out = LayerNorm(gelu(x Wd^T + bd))             x, out (N, C)
 *                  gelu exact (erf), as torch.nn.functional.gelu; the output
 *                  layer (the LM head's cross-entropy, kernels.h) reads out
 *   binary head:   pooled = tanh(x[b T] Wp^T + bp)                 (B, C), position 0
 *                  logits = pooled Wb^T + bb                       (B, 2)
 *                  loss[b] = cross-entropy(logits[b], label[b]), 0 where label is -1
 *
 * x is whole (N = B T rows) on every tensor-parallel rank and each rank computes
 * the heads whole: their parameters are replicated and, since every rank sees
 * the same x and the same (reduced) gradient, their gradients agree on every
 * rank without a reduction. (Megatron computes the lm transform on a rank's
 * rows under sequence parallelism and sums its gradients over TP: the same
 * sums, split differently.) Nothing is allocated here: the caller plans the
 * saved activations (pl_head_take_acts) and the scratch. */
#ifndef PL_NN_HEAD_H
#define PL_NN_HEAD_H

#include "kernels/kernels.h"
#include "nn/plan.h"

/* Views of the heads' parameters (absent ones NULL): lm_head.dense,
 * lm_head.layer_norm, pooler.dense, binary_head. */
typedef struct pl_head_weights {
    float *dense_w, *dense_b, *ln_w, *ln_b, *pool_w, *pool_b, *bin_w, *bin_b;
} pl_head_weights;

/* What forward keeps for backward, per micro-batch. */
typedef struct pl_head_acts {
    float *dense;       /* (N, C) x Wd^T + bd */
    float *act;         /* (N, C) gelu(dense), the LayerNorm's input */
    float *mean, *rstd; /* (N) */
    float *out;         /* (N, C) the output layer's input */
    float *pooled;      /* (B, C) */
    float *logits;      /* (B, 2) */
} pl_head_acts;

/* Lays out a's buffers on b: the lm transform's (lm), the binary head's (binary). */
void pl_head_take_acts(pl_plan *b, pl_head_acts *a, int lm, int binary, int64_t B, int64_t T,
                       int64_t C);
/* Floats of scratch pl_head_*_bwd need: (N, C) for the lm transform, 3 (B, C) +
 * 2 B for the binary head. */
int64_t pl_head_scratch(int lm, int binary, int64_t B, int64_t T, int64_t C);
/* Creates the GEMM primitives both heads use, before the step loop. */
pl_status pl_head_prepare(pl_gemm *g, int lm, int binary, int64_t B, int64_t T, int64_t C);

pl_status pl_head_lm_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a, const float *x,
                         int64_t N, int64_t C, float eps);
/* dout (N, C): the gradient of a->out, spent (overwritten); dx (N, C) and dw's
 * lm views added into; scratch of pl_head_scratch floats. */
pl_status pl_head_lm_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                         const pl_head_acts *a, const float *x, float *dout, float *dx,
                         float *scratch, int64_t N, int64_t C);

/* labels (B): 0, 1 or -1 (ignored: loss 0). loss (B) written. */
pl_status pl_head_binary_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                             const float *x, const int32_t *labels, float *loss, float *scratch,
                             int64_t B, int64_t T, int64_t C);
/* dloss (B): d objective / d loss[b]; dx (N, C) (its rows b T) and dw's binary
 * views added into. */
pl_status pl_head_binary_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                             const pl_head_acts *a, const float *x, const int32_t *labels,
                             const float *dloss, float *dx, float *scratch, int64_t B, int64_t T,
                             int64_t C);

#endif
