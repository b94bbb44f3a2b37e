/* Autoregressive inference, one token at a time, with a KV cache, through the
 * same transformer blocks as training (pl_block_decode): each new token costs
 * one pass over the weights plus attention over the cached keys and values, not
 * a forward over the whole prefix. Any family of model/spec.c (grouped-query
 * attention caches G key/value heads), and the decoder of an encoder-decoder
 * (pl_model_encdec_parts' decoder part: cross-attention to an encoder output
 * given by pl_generator_set_source, whose keys and values every layer computes
 * once and caches; the LM head's output bias added).
 *
 * Tensor parallelism (Megatron's layout, no sequence parallelism): on a TP
 * group of T ranks each rank holds its registry slice (model/registry.h) and
 * runs the blocks on the TP communicator, so the column-parallel GEMMs produce
 * its heads and MLP columns and the row-parallel outputs are all-reduced
 * (parallel/tp/layers.h). Its KV cache holds its G/T key/value groups. The
 * word embeddings are vocab-parallel (rank r: padded-vocabulary rows
 * [r V/T, (r+1) V/T), summed over TP), and so is the LM head: each rank
 * computes its slice of the logits and an all-gather leaves the whole padded
 * vocabulary's logits, bit-identical, on every rank, so that every rank draws
 * the same next token from the same uniform. Collectives per token: 1 + 2 L
 * all-reduces of C floats and one all-gather of V floats.
 *
 * Rows (pl_generator_init_rows, pl_generator_step_rows): up to `rows` tokens of
 * different sequences in one step, each with its own KV cache (the caller's),
 * position and, for a decoder, source: every GEMM runs once over the rows, so the
 * weights are read once a step instead of once a token (beam search's beams and
 * batched sources: model/beam.h). A row's logits are the bits pl_generator_step
 * gives it alone when the GEMM's rows do not depend on the row count (oneDNN's
 * fp32 here: tests/scripts/beam.sh compares).
 *
 * Memory: caches, one layer's activations, the block scratch and the logits
 * are one allocation made by pl_generator_init, which also creates every GEMM
 * primitive a step uses; pl_generator_step allocates nothing. */
#ifndef PL_MODEL_GENERATE_H
#define PL_MODEL_GENERATE_H

#include "kernels/kernels.h"
#include "model/model.h"
#include "parallel/comm.h"

typedef struct pl_generator {
    pl_model_config cfg;
    pl_block_ctx blk;          /* one row: B = T = 1 */
    pl_step_prof prof;
    pl_comm *tp;               /* NULL when the whole model is on this rank */
    int64_t v0, Vl;            /* this rank's padded-vocabulary rows [v0, v0 + Vl) */
    const float *wte, *wpe, *lnf_w, *lnf_b, *out_w; /* wte, out_w: rows [v0, v0 + Vl) */
    const float *eln_w, *eln_b; /* a post-LN stack's norm of the embeddings (no lnf) */
    const float *out_b;        /* the output layer's bias (rows [v0, v0 + Vl)), or NULL */
    pl_block_weights *w;       /* [L] views into the parameters */
    float *mem;                /* caches, activations and scratch, one block */
    float *k_cache, *v_cache;  /* (L, max_positions, G/T or 1 when shared, HS) */
    float *xkv_cache;          /* cross-attention: (L, Tk, 2 A/T) the encoder output's */
    int32_t enc_len;           /* cross-attention: the source's tokens (its padding masked) */
    pl_block_acts acts;        /* one layer's, reused by every layer */
    int64_t rows;              /* the most rows a step feeds (1: pl_generator_init) */
    float *x, *lnf, *lnf_mean, *lnf_rstd, *scores;
    float *logits;             /* (rows, padded_vocab): row r's next-token logits */
    float *gathered;           /* (rows, the head's columns) a step's LM head; TP: (tp, rows,
                                * Vl) the all-gathered slices */
    float **kl, **vl;          /* [rows] a step's per-row cache pointers of one layer */
    const float **xl;          /* [rows] its per-row cross-attention caches of one layer */
    pl_gemm *gemm;
} pl_generator;

/* params: this rank's flat parameter buffer laid out by reg, whose TP size and
 * rank must be tp's (tp NULL or of one rank: reg is TP = 1). The generator
 * keeps pointers into params; reg is not kept. Communicates nothing, so a rank
 * can fail here alone: agree on the status (pl_comm_agree) before stepping.
 * Errors: a registry that does not match tp, sizes that do not divide by the
 * TP size, memory. */
pl_status pl_generator_init(pl_generator *g, const pl_model_config *cfg, const pl_registry *reg,
                            const float *params, pl_comm *tp, pl_gemm *gemm);
/* The same, for steps of up to rows (>= 1) rows (pl_generator_step_rows). */
pl_status pl_generator_init_rows(pl_generator *g, const pl_model_config *cfg,
                                 const pl_registry *reg, const float *params, pl_comm *tp,
                                 pl_gemm *gemm, int64_t rows);
/* Creates the GEMM primitives of steps of n rows (1 <= n <= rows; init creates
 * those of 1 and of rows), so that steps of n rows allocate nothing. */
pl_status pl_generator_prepare_rows(pl_generator *g, int64_t n);
void pl_generator_free(pl_generator *g);

/* Feeds token at position pos (0-based, < max_positions; positions 0..pos-1
 * fed before) and writes the logits of the next token to g->logits: the true
 * vocabulary's (cfg.vocab_size) entries are valid, on every TP rank.
 * Collective over tp: every rank feeds the same token and position. */
pl_status pl_generator_step(pl_generator *g, int32_t token, int64_t pos);

/* One step of n rows (1 <= n <= g->rows): row r feeds tokens[r] at position pos[r]
 * into the caches k[r], v[r] ((L, max_positions, G/T, HS) each, positions
 * 0..pos[r]-1 filled before), with cross-attention (a decoder) against xkv[r], the
 * layout of g->xkv_cache for a source of enc_len[r] tokens (xkv, enc_len NULL
 * without it). Writes row r's logits to g->logits + r * padded_vocab (the true
 * vocabulary's entries valid, on every TP rank). g's own caches are not touched.
 * Collective over tp. */
pl_status pl_generator_step_rows(pl_generator *g, int64_t n, const int32_t *tokens,
                                 const int64_t *pos, float *const *k, float *const *v,
                                 const float *const *xkv, const int32_t *enc_len);

/* Cross-attention (a decoder part): the encoder output enc (Tk, C) of a source of
 * len tokens (the rest padding), kept by pointer, and every layer's keys and values
 * of it computed now. Collective over tp. Then pl_generator_step from position 0. */
pl_status pl_generator_set_source(pl_generator *g, const float *enc, int64_t len);

/* Samples from logits (V): temperature 0 is greedy; top_k 0 and top_p 1 are
 * off. u is a uniform draw in (0, 1). scratch holds 2 V floats. A pure
 * function of its inputs, so equal logits and u give the same id on every rank. */
int32_t pl_sample_logits(const float *logits, int64_t V, double temperature, int64_t top_k,
                         double top_p, double u, float *scratch);

#endif
