/* Beam search over the KV-cached decoder steps of model/generate.h: the decoder
 * of an encoder-decoder model (T5, BART, MegaMolBART; the source set by
 * pl_encdec_encode, model/encdec_generate.h, the prefix [BOS]) or a causal model
 * (GPT, Llama; the prefix is the prompt).
 *
 * The search is Hugging Face transformers' (generate(num_beams=W,
 * length_penalty=A, early_stopping=...), BeamSearchScorer and BeamHypotheses of
 * generation/beam_search.py, v4.3x), step for step:
 * - the beams start as W copies of the prefix (Hugging Face's input_ids: the
 *   decoder start token, or the prompt) with sums of log-probabilities 0 for
 *   beam 0 and -1e9 for the others (so the first step expands beam 0 only);
 * - each step, every beam's candidates score sum + log_softmax(logits), and the
 *   2W best of all W V candidates are taken in order: an [EOS] among the first W
 *   closes its beam into a finished hypothesis (an [EOS] ranked W or later is
 *   skipped), any other token extends a beam, until W beams are extended;
 * - a finished hypothesis of n new tokens (without [EOS]) after a prefix of m
 *   scores sum / lp(m + n), lp(x) = x^A (PL_BEAM_HF) or NeMo's / GNMT's ((5 + x) / 6)^A
 *   (PL_BEAM_GNMT; the penalty only, the search stays Hugging Face's). The W best
 *   finished are kept (the worst dropped; equal scores: the earliest dropped);
 * - the search is done when W hypotheses are finished and (early_stopping) or
 *   (not early_stopping and the worst kept scores at least best candidate sum /
 *   lp(m + step)), or when the decoder's positions or max_new tokens are used:
 *   then the W open beams join the finished ones with their n tokens;
 * - results in order of score, best first (equal scores: the later added first,
 *   as Python's sorted() and pop() give them).
 * Tie-break of the candidates (where torch.topk leaves it open): a higher sum
 * first, equal sums by the lower beam * V + token. Sums and log-probabilities in
 * double. With W = 1 the tokens are greedy decoding's.
 *
 * Caches: each beam has its own self-attention KV cache (allocated at init); the
 * encoder output's cross-attention keys and values are computed once per source
 * and shared by every beam. After each step a beam inherits its parent's cache:
 * the first child of a parent takes the parent's cache as it is (a pointer), any
 * further child copies the parent's filled positions into the cache of a beam
 * that had no child. Nothing is allocated per source or per step.
 *
 * Batching: a step feeds the W beams as rows of one generator step
 * (pl_generator_step_rows: the generator needs W rows at least), and
 * pl_beam_batch searches S sources together, their S W beams the rows of one
 * step (sources whose search is over drop out of the step). Each source's search
 * is the one above; its results equal a search of it alone bit for bit when the
 * GEMM's rows do not depend on the row count (model/generate.h; beam.sh compares
 * batches of 1 and 3 sources byte for byte).
 *
 * Tensor parallelism: every rank of the TP group computes the same logits bits
 * (model/generate.h), and the selection is a deterministic function of them, so
 * every rank keeps the same beams; no extra communication. */
#ifndef PL_MODEL_BEAM_H
#define PL_MODEL_BEAM_H

#include "model/generate.h"

typedef enum { PL_BEAM_HF = 0, PL_BEAM_GNMT = 1 } pl_beam_penalty;

typedef struct pl_beam_opts {
    int64_t width;          /* W, 1..vocab_size */
    double length_penalty;  /* A (Hugging Face's default 1.0) */
    int early_stopping;     /* Hugging Face's early_stopping=True */
    pl_beam_penalty form;
} pl_beam_opts;

typedef struct pl_beam {
    pl_beam_opts opts;
    int64_t W, V, P;       /* width, vocabulary, positions of the caches */
    int64_t L, cache;      /* decoder layers, floats of one layer's K (or V) cache */
    float *mem;            /* the W beams' K and V caches, one block */
    float **k, **v;        /* [W] beam b's caches (L, P, G/T, HS) */
    float **k2, **v2;      /* [W] the next step's assignment */
    double *logp;          /* (W, V) this step's log-probabilities per beam */
    double *sum, *sum2;    /* [W] each open beam's sum of log-probabilities */
    int32_t *ints;         /* hist, hist2, hyp and next, one block */
    int32_t *hist, *hist2; /* (W, P) each open beam's tokens after the prefix (swapped) */
    double *cand_s;        /* [2W] candidates: sum */
    int64_t *cand_i;       /* [2W] candidates: beam * V + token */
    int64_t *parent;       /* [W] */
    int32_t *next;         /* [W] */
    int *taken;            /* [W] */
    int64_t n_hyp;         /* finished (then the results), <= W + 1 while adding */
    int64_t m;             /* the prefix's tokens, counted in every length */
    int32_t *hyp;          /* (W + 1, P) their tokens */
    int64_t *hyp_len;      /* [W + 1] */
    double *hyp_score;     /* [W + 1] */
    double worst;          /* the worst kept score (1e9 when none) */
    int64_t *order;        /* [W + 1] results, best first: indices into hyp */
    int32_t eos;
    int64_t steps, s;      /* steps allowed, the current one */
    int done;              /* search_done was reached */
    int32_t *row_tok;      /* [W] a step's rows: token, position, caches, cross-attention */
    int64_t *row_pos;
    float **row_k, **row_v;
    const float **row_x;
    int32_t *row_len;
} pl_beam;

/* For searching with g (not kept: pass it to every call).
 * Errors: width outside 1..vocab_size, a length penalty that is not finite
 * (both named by their flags), memory. */
/* The beam flags of plait generate and plait seq2seq against the sampling ones:
 * --beam-size W >= 1, --num-return 1..W, and no sampling (temperature > 0, top_k >
 * 0 or top_p < 1): an error naming the flags, else PL_OK. */
pl_status pl_beam_check_flags(int64_t width, int64_t num_return, double temperature,
                              int64_t top_k, double top_p);
pl_status pl_beam_init(pl_beam *b, const pl_generator *g, const pl_beam_opts *opts);
/* --beam-size against the vocabulary (1..vocab): before sizing a generator by it. */
pl_status pl_beam_check_width(int64_t width, int64_t vocab);
void pl_beam_free(pl_beam *b);

/* Beam search after prefix (n >= 1 tokens, fed from position 0) until eos, at
 * most max_new tokens and the positions P (g's max_positions, or less): steps
 * feed positions n - 1 .. n - 2 + max_new, below P, the beams as rows of one step
 * (g->rows >= W, else an error). Then pl_beam_result. Collective over g's TP
 * group. Leaves g's own caches as they were. */
pl_status pl_beam_search(pl_beam *b, pl_generator *g, const int32_t *prefix, int64_t n,
                         int32_t eos, int64_t max_new, int64_t P);

/* S sources searched together (see above): their searches, and a decoder's
 * cross-attention keys and values of each source. */
typedef struct pl_beam_batch {
    int64_t S;             /* sources at most */
    pl_beam *src;          /* [S] each source's search and beams' caches */
    int64_t xkv_n;         /* floats of one source's cross-attention cache (0: none) */
    float *xkv;            /* (S, xkv_n) */
    int32_t *enc_len;      /* [S] */
    int32_t *tok;          /* [S W] a step's rows */
    int64_t *pos, *row;    /* [S W] position; [S] each source's first row */
    float **k, **v;        /* [S W] */
    const float **x;       /* [S W] */
    int32_t *len;          /* [S W] */
} pl_beam_batch;

/* For S >= 1 sources with g, whose rows must hold S W (pl_generator_init_rows);
 * creates g's GEMM primitives of the step sizes the search uses (1..S and multiples
 * of W). Errors as pl_beam_init's, memory. */
pl_status pl_beam_batch_init(pl_beam_batch *bb, pl_generator *g, const pl_beam_opts *opts,
                             int64_t S);
void pl_beam_batch_free(pl_beam_batch *bb);
/* A decoder: takes g's current source (pl_encdec_encode / pl_generator_set_source
 * just run: its cross-attention cache and length) as source i's. */
pl_status pl_beam_batch_take_source(pl_beam_batch *bb, int64_t i, const pl_generator *g);
/* Searches sources 0..n-1 (n <= S) together, source i after prefix[i] (len[i]
 * tokens) as pl_beam_search; then pl_beam_result(&bb->src[i], ...). Collective over
 * g's TP group. */
pl_status pl_beam_batch_search(pl_beam_batch *bb, pl_generator *g, int64_t n,
                               const int32_t *const *prefix, const int64_t *len, int32_t eos,
                               int64_t max_new, int64_t P);

/* The i-th best hypothesis (0 <= i < b->n_hyp, which is W after a search): its
 * new tokens (without the prefix and eos), their count and its score. */
void pl_beam_result(const pl_beam *b, int64_t i, const int32_t **tokens,
                           int64_t *n, double *score);

#endif
