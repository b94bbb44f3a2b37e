/* An encoder-decoder model (T5) on one rank: two pl_models over one registry
 * and one pair of flat buffers, the encoder's stack and the decoder's
 * (pl_model_encdec_parts), sharing the word and position embeddings.
 *
 *   forward:  enc.tokens (B, Te), enc.lengths (B) -> the encoder's layers and
 *             final norm -> enc.lnf (B Te, C), the decoder's cross-attention
 *             input (its keys beyond enc.lengths masked);
 *             dec.tokens (B, Td) -> the decoder's causal layers with
 *             cross-attention -> decoder final norm -> the LM head (with the
 *             output bias) -> dec.loss from dec.targets
 *   backward: the decoder's backward (each layer leaving its part of the
 *             encoder output's gradient), that gradient summed over TP once
 *             (pl_block_enc_grad), then the encoder's backward from it; the
 *             shared embeddings get both stacks' gradients.
 *
 * The caller fills enc.tokens, enc.lengths, dec.tokens, dec.targets, dec.dloss
 * (and the samples' dropout keys in both) of micro-batch slot 0. Dropout masks
 * are keyed by layer numbers 0..Le-1 for the encoder and Le.. for the decoder.
 * Either the pl_encdec owns both stacks (pl_encdec_init) or the caller does
 * (pl_encdec_link: the trainer, whose model is the encoder and whose ZeRO
 * hooks are set on both). Recomputation (cfg.recompute) is each stack's own:
 * a recomputed decoder layer reads enc.lnf again, which stays as the encoder's
 * forward left it until pl_encdec_backward's encoder backward. Not here yet:
 * pipelining (one stage holds both stacks), several micro-batch slots. */
#ifndef PL_MODEL_ENCDEC_H
#define PL_MODEL_ENCDEC_H

#include "model/model.h"

typedef struct pl_encdec {
    pl_model_config cfg;   /* the whole model */
    pl_model *enc, *dec;   /* the stacks: own_enc and own_dec, or the caller's */
    pl_model own_enc, own_dec;
    int owns;
    float *denc;           /* (B Te, C) the decoder's partial gradient of the encoder output */
    float *dlnf;           /* (B Te, C) its sum over TP (this rank's rows under sp) */
} pl_encdec;

/* params and grads: the rank's flat buffers laid out by reg (pl_model_register
 * of the whole cfg). */
pl_status pl_encdec_init(pl_encdec *e, const pl_model_config *cfg, const pl_registry *reg,
                         float *params, float *grads, int64_t B, pl_comm *tp, pl_gemm *gemm);
/* Wires the caller's enc and dec, initialised with pl_model_init on the two
 * parts of cfg (pl_model_encdec_parts) and the same micro-batch size, which
 * stay the caller's (pl_encdec_free leaves them). */
pl_status pl_encdec_link(pl_encdec *e, const pl_model_config *cfg, pl_model *enc, pl_model *dec);
void pl_encdec_free(pl_encdec *e);
/* Training mode, iteration and seed (dropout) for both stacks. */
void pl_encdec_set_pass(pl_encdec *e, int training, int64_t iteration, uint64_t seed);
pl_status pl_encdec_forward(pl_encdec *e);
/* ready (may be NULL) is told each layer's flat range as it is final, as
 * pl_model_backward does, the decoder's layers first; the ranges outside the
 * layers (embeddings, both final norms, the output bias) are the caller's to
 * mark after this returns. */
pl_status pl_encdec_backward(pl_encdec *e, pl_grad_ready_fn ready, void *ctx);

#endif
