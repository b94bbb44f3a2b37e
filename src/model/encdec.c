/* An encoder-decoder model: the encoder's stack feeding the decoder's
 * cross-attention (model/encdec.h). */
#include "model/encdec.h"

#include "base/alloc.h"

#include <string.h>

pl_status pl_encdec_init(pl_encdec *e, const pl_model_config *cfg, const pl_registry *reg,
                         float *params, float *grads, int64_t B, pl_comm *tp, pl_gemm *gemm)
{
    pl_status st = PL_OK;
    memset(e, 0, sizeof *e);
    e->cfg = *cfg;
    if (!pl_model_is_encdec(cfg))
        return pl_errorf(PL_ERR_INTERNAL, "pl_encdec_init: not an encoder-decoder model");
    pl_model_config enc, dec;
    pl_model_encdec_parts(cfg, &enc, &dec);
    PL_TRY(pl_model_init(&e->enc, &enc, reg, params, grads, B, NULL, tp, gemm));
    PL_TRY(pl_model_init(&e->dec, &dec, reg, params, grads, B, NULL, tp, gemm));
    e->dec.layer_id0 = enc.num_layers;
    const size_t n = (size_t)(e->enc.N * e->enc.C);
    e->denc = pl_calloc(n, sizeof(float));
    e->dlnf = pl_calloc(n, sizeof(float));
    if (!e->denc || !e->dlnf) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the encoder output's gradient");
        goto fail;
    }
    /* the decoder reads the encoder's output and padding; the encoder's backward
     * starts from the summed gradient */
    e->dec.blk.enc = e->enc.lnf;
    e->dec.blk.enc_len = e->enc.lengths;
    e->dec.blk.denc = e->denc;
    e->enc.dlnf_in = e->dlnf;
    return PL_OK;
fail:
    pl_encdec_free(e);
    return st;
}

void pl_encdec_free(pl_encdec *e)
{
    pl_model_free(&e->enc);
    pl_model_free(&e->dec);
    pl_free(e->denc);
    pl_free(e->dlnf);
    memset(e, 0, sizeof *e);
}

void pl_encdec_set_pass(pl_encdec *e, int training, int64_t iteration, uint64_t seed)
{
    pl_model *m[2] = {&e->enc, &e->dec};
    for (int k = 0; k < 2; k++) {
        m[k]->training = training;
        m[k]->iteration = iteration;
        m[k]->seed = seed;
    }
}

pl_status pl_encdec_forward(pl_encdec *e)
{
    pl_status st = pl_model_forward(&e->enc);
    return st ? st : pl_model_forward(&e->dec);
}

pl_status pl_encdec_backward(pl_encdec *e)
{
    pl_status st = PL_OK;
    memset(e->denc, 0, (size_t)(e->enc.N * e->enc.C) * sizeof(float));
    PL_TRY(pl_model_backward(&e->dec, NULL, NULL));
    PL_TRY(pl_block_enc_grad(&e->dec.blk, e->dlnf, e->denc));
    PL_TRY(pl_model_backward(&e->enc, NULL, NULL));
fail:
    return st;
}
