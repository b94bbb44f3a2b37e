/* BERT's heads on the final norm's output (Megatron core's BertLMHead, Pooler
 * and binary_head; models/bert/), and the fine-tuning heads:
 *
 *   lm transform:  out = LayerNorm(gelu(x Wd^T + bd))             x, out (N, C)
 *                  gelu exact (erf), as torch.nn.functional.gelu; the output
 *                  layer (the LM head's cross-entropy, kernels.h) reads out
 *   pooled head:   pooled = tanh(x[b T] Wp^T + bp)                 (B, C), position 0
 *                  logits = pooled Wc^T + bc                       (B, K)
 *                  loss[b] = cross-entropy(logits[b], label[b]), 0 where label is -1
 *                  K = 2: BERT's binary_head; K classes: Megatron's classification_head
 *   regression:    the pooled head with K = 1: y = pooled Wc^T + bc (B, 1),
 *                  loss[b] = (y[b] - target[b])^2, 0 where the target is NaN (the mean
 *                  over samples is the caller's: NeMo's MSELoss on STS-B; Megatron's
 *                  classification_head with num_classes 1). The targets are floats
 *                  carried bit for bit in the int32 labels (pl_head_target).
 *   token head:    logits = x Wt^T + bt                            (N, K)
 *                  token classification: loss[n] = cross-entropy(logits[n], label[n])
 *                  (NeMo's TokenClassifier, one layer: classifier.mlp.layer0)
 *   span head:     the token head with K = 2: start and end logits (N) per position;
 *                  loss[b] = (CE over the sample's T positions of the start logits at
 *                  start[b] + the same of the end logits at end[b]) / 2 (NeMo's and
 *                  Hugging Face's BertForQuestionAnswering)
 *
 * Task-head dropout (pl_head_drop, training only): the pooled heads of a fine-tuning
 * task drop the pooled output before the linear layer (Megatron's Classification:
 * classification_dropout, p = --hidden-dropout), the token and span heads their input
 * x (NeMo's TokenClassifier: dropout on the hidden states before the MLP); BERT's
 * pretraining binary head has none (Megatron's BertModel). The mask is kernels.h's
 * dropout keyed by each row's global sample, so it does not depend on the layout.
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
 * lm_head.layer_norm, pooler.dense, the pooled head's linear layer (binary_head
 * or classification_head), the token head's (classifier.mlp.layer0). */
typedef struct pl_head_weights {
    float *dense_w, *dense_b, *ln_w, *ln_b, *pool_w, *pool_b, *bin_w, *bin_b, *tok_w, *tok_b;
} pl_head_weights;

/* A task head's input dropout: probability p (0: none) and the mask's key as
 * kernels.h's dropout kernel takes it: seed, stream, sample (B) the global sample
 * index of each row of the batch, T its positions (the token and span heads' rows
 * per sample; the pooled heads drop one row per sample). NULL: none. */
typedef struct pl_head_drop {
    float p;
    uint64_t seed, stream;
    const int64_t *sample;
    int64_t T;
} pl_head_drop;

/* The dropout stream site (pl_block_dropout_stream) of a task head's input. */
#define PL_HEAD_DROPOUT_SITE 6

/* What forward keeps for backward, per micro-batch. */
typedef struct pl_head_acts {
    float *dense;       /* (N, C) x Wd^T + bd */
    float *act;         /* (N, C) gelu(dense), the LayerNorm's input */
    float *mean, *rstd; /* (N) */
    float *out;         /* (N, C) the output layer's input */
    float *pooled;      /* (B, C) */
    float *pdrop;       /* (B, C) the pooled output after dropout (pl_head_set.drop) */
    float *tdrop;       /* (N, C) the token or span head's input after dropout (.drop) */
    float *logits;      /* (B, K) the pooled head's */
    float *tlogits;     /* (N, K) the token or span head's */
    float *lse;         /* (N) the token head's log-sum-exp; span: (2 B) start's, end's */
} pl_head_acts;

/* Which heads a model has, and their classes. */
typedef struct pl_head_set {
    int lm;             /* the lm transform */
    int64_t pooled;     /* classes of the pooled head (0: none) */
    int64_t token;      /* classes of the token head (0: none) */
    int span;           /* the token head (2 classes) is the span head */
    int regression;     /* the pooled head (1 class) is the regression head */
    int drop;           /* a task head with input dropout: its dropped input kept */
} pl_head_set;

/* Lays out a's buffers on b for the heads h. */
void pl_head_take_acts(pl_plan *b, pl_head_acts *a, const pl_head_set *h, int64_t B, int64_t T,
                       int64_t C);
/* Floats of scratch pl_head_*_bwd need. */
int64_t pl_head_scratch(const pl_head_set *h, int64_t B, int64_t T, int64_t C);
/* Creates the GEMM primitives of the heads h, before the step loop. */
pl_status pl_head_prepare(pl_gemm *g, const pl_head_set *h, int64_t B, int64_t T, int64_t C);

pl_status pl_head_lm_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a, const float *x,
                         int64_t N, int64_t C, float eps);
/* dout (N, C): the gradient of a->out, spent (overwritten); dx (N, C) and dw's
 * lm views added into; scratch of pl_head_scratch floats. */
pl_status pl_head_lm_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                         const pl_head_acts *a, const float *x, float *dout, float *dx,
                         float *scratch, int64_t N, int64_t C);

/* The pooled head with K classes; labels (B): 0..K-1 or -1 (ignored: loss 0).
 * loss (B) written. */
pl_status pl_head_pooled_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                             const float *x, const int32_t *labels, const pl_head_drop *drop,
                             float *loss, float *scratch, int64_t B, int64_t T, int64_t C,
                             int64_t K);
/* dloss (B): d objective / d loss[b]; dx (N, C) (its rows b T) and dw's pooler
 * and pooled-head views added into. */
pl_status pl_head_pooled_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                             const pl_head_acts *a, const float *x, const int32_t *labels,
                             const pl_head_drop *drop, const float *dloss, float *dx,
                             float *scratch, int64_t B, int64_t T, int64_t C, int64_t K);

/* The regression head: labels (B) the targets' float bits (pl_head_set_target),
 * NaN: ignored (loss 0); loss (B) written. */
pl_status pl_head_regress_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                              const float *x, const int32_t *labels, const pl_head_drop *drop,
                              float *loss, float *scratch, int64_t B, int64_t T, int64_t C);
/* dloss (B); dx (N, C) and dw's pooler and head views added into. */
pl_status pl_head_regress_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                              const pl_head_acts *a, const float *x, const int32_t *labels,
                              const pl_head_drop *drop, const float *dloss, float *dx,
                              float *scratch, int64_t B, int64_t T, int64_t C);
/* A regression target in and out of an int32 label (its bits). */
void pl_head_set_target(int32_t *label, float target);
float pl_head_target(const int32_t *label);

/* The token head with K classes: labels (N) 0..K-1 or -1 (ignored); loss (N). */
pl_status pl_head_token_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                            const float *x, const int32_t *labels, const pl_head_drop *drop,
                            float *loss, float *scratch, int64_t N, int64_t C, int64_t K);
/* dloss (N); dx (N, C) and dw's token-head views added into. */
pl_status pl_head_token_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                            const pl_head_acts *a, const float *x, const int32_t *labels,
                            const pl_head_drop *drop, const float *dloss, float *dx,
                            float *scratch, int64_t N, int64_t C, int64_t K);

/* The span head: spans (2 B) the start positions of the B samples, then their
 * end positions (0..T-1, or -1: ignored); loss (B). */
pl_status pl_head_span_fwd(pl_gemm *g, const pl_head_weights *w, pl_head_acts *a,
                           const float *x, const int32_t *spans, const pl_head_drop *drop,
                           float *loss, int64_t B, int64_t T, int64_t C);
/* dloss (B); dx (N, C) and dw's token-head views added into. */
pl_status pl_head_span_bwd(pl_gemm *g, const pl_head_weights *w, pl_head_weights *dw,
                           const pl_head_acts *a, const float *x, const int32_t *spans,
                           const pl_head_drop *drop, const float *dloss, float *dx,
                           float *scratch, int64_t B, int64_t T, int64_t C);

#endif
