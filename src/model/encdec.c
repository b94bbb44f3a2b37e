/* An encoder-decoder model: the encoder's stack feeding the decoder's
 * cross-attention (model/encdec.h). */
#include "model/encdec.h"

#include "base/alloc.h"

#include <string.h>

pl_status pl_encdec_link(pl_encdec *e, const pl_model_config *cfg, pl_model *enc, pl_model *dec)
{
    e->cfg = *cfg;
    e->enc = enc;
    e->dec = dec;
    if (!pl_model_is_encdec(cfg))
        return pl_errorf(PL_ERR_INTERNAL, "pl_encdec_link: not an encoder-decoder model");
    if (enc->B != dec->B)
        return pl_errorf(PL_ERR_INTERNAL, "pl_encdec_link: micro-batches of %lld and %lld",
                         (long long)enc->B, (long long)dec->B);
    dec->layer_id0 = enc->cfg.num_layers;
    const size_t n = (size_t)(enc->N * enc->C);
    e->denc = pl_calloc(n, sizeof(float));
    e->dlnf = pl_calloc(n, sizeof(float));
    if (!e->denc || !e->dlnf)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for the encoder output's gradient");
    /* the decoder reads the encoder's output and padding; the encoder's backward
     * starts from the summed gradient */
    dec->blk.enc = enc->lnf;
    dec->blk.enc_len = enc->lengths;
    dec->blk.denc = e->denc;
    enc->dlnf_in = e->dlnf;
    return PL_OK;
}

pl_status pl_encdec_init(pl_encdec *e, const pl_model_config *cfg, const pl_registry *reg,
                         float *params, float *grads, int64_t B, pl_comm *tp, pl_gemm *gemm)
{
    pl_status st = PL_OK;
    memset(e, 0, sizeof *e);
    e->cfg = *cfg;
    e->owns = 1;
    if (!pl_model_is_encdec(cfg))
        return pl_errorf(PL_ERR_INTERNAL, "pl_encdec_init: not an encoder-decoder model");
    pl_model_config enc, dec;
    pl_model_encdec_parts(cfg, &enc, &dec);
    PL_TRY(pl_model_init(&e->own_enc, &enc, reg, params, grads, B, NULL, tp, gemm));
    PL_TRY(pl_model_init(&e->own_dec, &dec, reg, params, grads, B, NULL, tp, gemm));
    PL_TRY(pl_encdec_link(e, cfg, &e->own_enc, &e->own_dec));
    return PL_OK;
fail:
    pl_encdec_free(e);
    return st;
}

void pl_encdec_free(pl_encdec *e)
{
    if (e->owns) {
        pl_model_free(&e->own_enc);
        pl_model_free(&e->own_dec);
    }
    pl_free(e->denc);
    pl_free(e->dlnf);
    memset(e, 0, sizeof *e);
}

void pl_encdec_set_pass(pl_encdec *e, int training, int64_t iteration, uint64_t seed)
{
    pl_model *m[2] = {e->enc, e->dec};
    for (int k = 0; k < 2; k++) {
        m[k]->training = training;
        m[k]->iteration = iteration;
        m[k]->seed = seed;
    }
}

pl_status pl_encdec_forward(pl_encdec *e)
{
    pl_status st = pl_model_forward(e->enc);
    return st ? st : pl_model_forward(e->dec);
}

pl_status pl_encdec_backward(pl_encdec *e, pl_grad_ready_fn ready, void *ctx)
{
    pl_status st = PL_OK;
    memset(e->denc, 0, (size_t)(e->enc->N * e->enc->C) * sizeof(float));
    PL_TRY(pl_model_backward(e->dec, ready, ctx));
    PL_TRY(pl_block_enc_grad(&e->dec->blk, e->dlnf, e->denc));
    PL_TRY(pl_model_backward(e->enc, ready, ctx));
fail:
    return st;
}
