/* Decoding an encoder-decoder model (T5, BART, MegaMolBART): the source through
 * the encoder once (model/model.h, one sample, no dropout), then the decoder one
 * token at a time through the same blocks as training with a KV cache of its
 * self-attention and, per layer, of the encoder output's keys and values
 * (model/generate.h). Greedy: each step takes the most likely token, from
 * [BOS] until [EOS] or max_new tokens.
 *
 * One process or a TP group (every rank the same source, the same tokens);
 * memory is allocated at init (the encoder's activations for one sample, the
 * decoder's caches), nothing per token. Not here: beam search, sampling
 * (pl_sample_logits on g->dec.logits does it), batches of sources. */
#ifndef PL_MODEL_ENCDEC_GENERATE_H
#define PL_MODEL_ENCDEC_GENERATE_H

#include "model/generate.h"

typedef struct pl_encdec_generator {
    pl_model_config cfg; /* the whole model */
    pl_model enc;        /* the encoder, B = 1 */
    int enc_up;
    pl_generator dec;    /* the decoder, with cross-attention to enc.lnf */
} pl_encdec_generator;

/* params: this rank's flat parameters laid out by reg for cfg (an
 * encoder-decoder, TP size tp's). Kept by pointer. */
pl_status pl_encdec_generator_init(pl_encdec_generator *g, const pl_model_config *cfg,
                                   const pl_registry *reg, const float *params, pl_comm *tp,
                                   pl_gemm *gemm);
void pl_encdec_generator_free(pl_encdec_generator *g);

/* Greedy decoding of src (len tokens, 1..the encoder's seq_length): writes up to
 * max_new tokens after bos into out (without bos, without eos) and their count to
 * *n; stops at eos or at the decoder's positions. Collective over tp. */
pl_status pl_encdec_greedy(pl_encdec_generator *g, const int32_t *src, int64_t len, int32_t bos,
                           int32_t eos, int64_t max_new, int32_t *out, int64_t *n);

#endif
