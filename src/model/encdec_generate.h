/* Decoding an encoder-decoder model (T5, BART, MegaMolBART): the source through
 * the encoder once (model/model.h, one sample, no dropout), then the decoder one
 * token at a time through the same blocks as training with a KV cache of its
 * self-attention and, per layer, of the encoder output's keys and values
 * (model/generate.h), from [BOS] until [EOS] or max_new tokens: greedy (each
 * step the most likely token) or sampled (temperature, top-k, top-p: the
 * generator's pl_sample_logits, one uniform per step from (seed, source, step)).
 *
 * One process or a TP group (every rank the same source, the same tokens);
 * memory is allocated at init (the encoder's activations for one sample, the
 * decoder's caches, the sampler's scratch), nothing per token. Beam search is
 * model/beam.h, over the same generator (it also searches batches of sources);
 * greedy and sampled decoding go one source at a time. */
#ifndef PL_MODEL_ENCDEC_GENERATE_H
#define PL_MODEL_ENCDEC_GENERATE_H

#include "model/generate.h"

typedef struct pl_encdec_generator {
    pl_model_config cfg; /* the whole model */
    pl_model enc;        /* the encoder, B = 1 */
    int enc_up;
    pl_generator dec;    /* the decoder, with cross-attention to enc.lnf */
    float *scratch;      /* (2 V) the sampler's */
} pl_encdec_generator;

/* How each token is chosen: temperature 0 is greedy; top_k 0 and top_p 1 are off.
 * The uniform of step i of source `source` is pl_rng_uniform(seed, source, i). */
typedef struct pl_decode_opts {
    double temperature, top_p;
    int64_t top_k;
    uint64_t seed, source;
} pl_decode_opts;

/* params: this rank's flat parameters laid out by reg for cfg (an
 * encoder-decoder, TP size tp's). Kept by pointer. rows: the decoder's rows a step
 * (pl_generator_init_rows; beam search's beams times sources, else 1). */
pl_status pl_encdec_generator_init(pl_encdec_generator *g, const pl_model_config *cfg,
                                   const pl_registry *reg, const float *params, pl_comm *tp,
                                   pl_gemm *gemm, int64_t rows);
void pl_encdec_generator_free(pl_encdec_generator *g);

/* Decoding of src (len tokens, 1..the encoder's seq_length): writes up to max_new
 * tokens after bos into out (without bos, without eos) and their count to *n;
 * stops at eos or at the decoder's positions. opts NULL: greedy. Collective over
 * tp (every rank draws the same token: the logits are the same bits). */
pl_status pl_encdec_decode(pl_encdec_generator *g, const int32_t *src, int64_t len, int32_t bos,
                           int32_t eos, int64_t max_new, const pl_decode_opts *opts, int32_t *out,
                           int64_t *n);
/* The source src (len tokens, 1..the encoder's seq_length) through the encoder,
 * and every decoder layer's cross-attention keys and values of it: the decoder
 * then steps from position 0. Collective over tp. */
pl_status pl_encdec_encode(pl_encdec_generator *g, const int32_t *src, int64_t len);
/* Positions the decoder can step: its seq_length, at most its position table. */
int64_t pl_encdec_positions(const pl_encdec_generator *g);

/* pl_encdec_decode, greedy. */
pl_status pl_encdec_greedy(pl_encdec_generator *g, const int32_t *src, int64_t len, int32_t bos,
                           int32_t eos, int64_t max_new, int32_t *out, int64_t *n);

#endif
