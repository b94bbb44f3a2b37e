/* Autoregressive inference on one process, one token at a time, with a KV
 * cache, through the same transformer blocks as training (pl_block_decode):
 * each new token costs one pass over the weights plus attention over the
 * cached keys and values, not a forward over the whole prefix. Any family of
 * model/spec.c (grouped-query attention caches G key/value heads). */
#ifndef PL_MODEL_GENERATE_H
#define PL_MODEL_GENERATE_H

#include "kernels/kernels.h"
#include "model/model.h"

typedef struct pl_generator {
    pl_model_config cfg;
    pl_block_ctx blk;          /* one row: B = T = 1 */
    pl_step_prof prof;
    const float *wte, *wpe, *lnf_w, *lnf_b, *out_w;
    pl_block_weights *w;       /* [L] views into the parameters */
    float *mem;                /* caches, activations and scratch, one block */
    float *k_cache, *v_cache;  /* (L, max_positions, G, HS) */
    pl_block_acts acts;        /* one layer's, reused by every layer */
    float *x, *lnf, *lnf_mean, *lnf_rstd, *logits, *scores;
    pl_gemm *gemm;
} pl_generator;

/* params: a whole (TP = 1) flat parameter buffer laid out by reg. */
pl_status pl_generator_init(pl_generator *g, const pl_model_config *cfg, const pl_registry *reg,
                            const float *params, pl_gemm *gemm);
void pl_generator_free(pl_generator *g);

/* Feeds token at position pos (0-based, < max_positions; positions 0..pos-1
 * fed before) and writes the logits of the next token over the true
 * vocabulary to g->logits. */
pl_status pl_generator_step(pl_generator *g, int32_t token, int64_t pos);

/* Samples from logits (V): temperature 0 is greedy; top_k 0 and top_p 1 are
 * off. u is a uniform draw in (0, 1). scratch holds 2 V floats. */
int32_t pl_sample_logits(const float *logits, int64_t V, double temperature, int64_t top_k,
                         double top_p, double u, float *scratch);

#endif
