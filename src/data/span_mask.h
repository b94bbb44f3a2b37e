/* MegaMolBART's span masking of the encoder input, as a pure function.
 *
 * The algorithm is MolEncTokenizer._mask_span (MolBART
 * megatron_molbart/tokenizer.py, carried into NeMo's MegaMolBART
 * tokenizer), on the chemical tokens of one SMILES (before the begin and end
 * tokens are added):
 *
 *     sampled[i] = (u_i < mask_prob)             for every input position i
 *     i = 0
 *     while i < n:
 *         if sampled[i]:
 *             len = Poisson(span_lambda)         # may be 0
 *             emit <MASK> (masked = 1); i += len
 *         else:
 *             emit token i (masked = 0); i += 1
 *
 * A span of len tokens collapses into one <MASK>; a draw of 0 inserts a
 * <MASK> without consuming a token, and the same position draws again, so
 * the output may be longer than the input. MegaMolBART v0.2 uses
 * mask_prob 0.1 and span_lambda 3.
 *
 * The randomness differs: MolBART draws the positions with Python's
 * random.choices and the lengths with torch.poisson; here every draw is
 * plait's counter-based Philox (base/rng.h) for (seed, stream): u_i =
 * pl_rng_uniform(seed, stream, i) for i < n, and the Poisson lengths use the
 * uniforms at indices n, n+1, ... (Knuth's product method), so one
 * (seed, stream) gives the same output on every machine and in any order.
 * tests/scripts/span_mask.sh checks the loop against MolBART's, draw for
 * draw, and the statistics against MolBART's own code with its own RNGs. */
#ifndef PL_DATA_SPAN_MASK_H
#define PL_DATA_SPAN_MASK_H

#include "base/status.h"

#include <stdint.h>

typedef struct pl_span_mask_cfg {
    double mask_prob;   /* [0, 1] */
    double span_lambda; /* Poisson mean, (0, 30] */
    int32_t mask_id;    /* <MASK> (4 in MegaMolBART's vocabulary) */
} pl_span_mask_cfg;

/* Masks ids[0..n) into out[0..cap) with is_mask[0..cap) (1 where out holds a
 * <MASK>); *n_out is the output length, at most cap: a longer output is cut
 * to its first cap tokens (MegaMolBART truncates to the sequence length
 * afterwards) and *truncated says so. PL_ERR_ARG for a configuration outside
 * the ranges above or cap < 0. Allocates nothing. */
pl_status pl_span_mask(const int32_t *ids, int64_t n, const pl_span_mask_cfg *cfg, uint64_t seed,
                       uint64_t stream, int32_t *out, uint8_t *is_mask, int64_t cap, int64_t *n_out,
                       int *truncated);

/* The Poisson draw pl_span_mask makes for (seed, stream), starting at
 * uniform index *index and advancing it past the uniforms used. */
int64_t pl_span_mask_poisson(double lambda, uint64_t seed, uint64_t stream, uint64_t *index);

#endif
