/* Megatron's T5 in `plait train` (pretrain_t5.py): the encoder is the trainer's
 * model (t->model: its embeddings, its layers, its final norm), the decoder a
 * second pl_model on the same flat buffers (model/encdec.h wires the two), and
 * a micro-batch is T5 samples (data/t5_dataset.h through bert_data.c): the
 * encoder's tokens and lengths, the decoder's tokens and targets. The loss is
 * pretrain_t5.py's: the mean over the decoder's target tokens of a micro-batch.
 *
 * The registry lays the whole model out as: embeddings, the encoder's final
 * norm, the encoder's layers, the decoder's layers, the decoder's final norm,
 * the output bias. The trainer's machinery works on that as on one stack of
 * Le + Ld layers: the DP buckets and ZeRO's regions are the embeddings (with
 * the encoder's final norm: final when the encoder's backward ends, as the
 * embeddings are), each layer, and the tail (final when the decoder's last
 * layer is); ZeRO 2-3's hooks see the decoder as a chunk whose layers are
 * Le..Le+Ld-1, which a recomputed decoder layer's rerun forward gathers again
 * as the encoder's do. Recomputation: each stack plans and reruns its own
 * layers (pl_model_encdec_parts); the encoder output the decoder's
 * cross-attention reads is the encoder's final norm output, kept until the
 * encoder's backward. Pipelined (--pipeline-model-parallel-split-rank), each
 * stage holds one stack's part and encdec_pipe.c does the rest. Not here:
 * --mock-data. Part of the trainer
 * (trainer_internal.h). */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "data/encdec_sample.h"
#include "model/encdec.h"

#include <string.h>

typedef struct pl_train_encdec {
    pl_model dec;
    int dec_up;
    pl_encdec e;
    pl_zero_chunk zc; /* ZeRO 2-3: the decoder's layers in the hooks' numbering */
} pl_train_encdec;

pl_model *pl_train_encdec_decoder(pl_trainer *t) { return t->edpp ? &t->model : &t->ed->dec; }

pl_status pl_train_encdec_config(const pl_train_args *a, pl_model_config *c)
{
    if (!pl_model_is_encdec(c))
        return PL_OK;
    c->dec_layers = a->decoder_num_layers;
    c->dec_seq_length = a->decoder_seq_length;
    c->pp_split = a->pipeline_model_parallel_split_rank;
    if (c->dec_layers < 1 || c->dec_seq_length < 1)
        return pl_errorf(PL_ERR_ARG, "--model %s: --decoder-num-layers %lld and "
                         "--decoder-seq-length %lld must be positive", a->model,
                         (long long)c->dec_layers, (long long)c->dec_seq_length);
    return PL_OK;
}

pl_status pl_train_encdec_layer_lo(const pl_trainer *t, int64_t l, int64_t *lo)
{
    pl_model_config part[2];
    pl_model_encdec_parts(&t->cfg, &part[0], &part[1]);
    int k = l >= t->cfg.num_layers;
    int64_t j = k ? l - t->cfg.num_layers : l;
    const int P = t->grid.layout.pp, r = t->grid.pp_rank;
    if (t->cfg.pp_split > 0 && P > 1) { /* pipelined: the stage's l-th layer of its stack */
        int s0, ns;
        int64_t l0, nl;
        k = pl_model_encdec_stage_stack(&t->cfg, P, r, &s0, &ns);
        pl_status st = pl_model_stage_layers(&part[k], P, r, &l0, &nl);
        if (st)
            return st;
        j = l0 + l;
    }
    pl_block_weights tmp;
    int64_t hi;
    return pl_model_layer_bind(&t->reg, &part[k], NULL, j, &tmp, lo, &hi);
}

pl_status pl_train_encdec_setup(pl_trainer *t)
{
    pl_status st = PL_OK;
    if (!pl_model_is_encdec(&t->cfg))
        return PL_OK;
    pl_train_encdec *ed = pl_calloc(1, sizeof *ed);
    if (!ed)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    t->ed = ed;
    if (t->grid.layout.pp > 1) /* t->model is this stage's part of one stack */
        return pl_train_encdec_pp_setup(t);
    pl_model_config enc, dec;
    pl_model_encdec_parts(&t->cfg, &enc, &dec);
    pl_model *m = &ed->dec;
    PL_TRY(pl_model_init(m, &dec, &t->reg, t->params, t->grads, t->mbs, NULL,
                         pl_grid_comm(&t->grid, PL_GRID_TP), t->gemm));
    ed->dec_up = 1;
    m->seed = t->model.seed;
    m->blk.tpq = t->model.blk.tpq;
    PL_TRY(pl_encdec_link(&ed->e, &t->cfg, &t->model, m));
    if (t->zero_stage >= 2) { /* as the trainer binds its chunks (setup_model) */
        if (t->zero_stage == 3)
            PL_TRY(pl_model_rebind(m, 0, pl_train_zero_locate, t));
        PL_TRY(pl_model_rebind(m, 1, pl_train_zero_locate, t));
        ed->zc = (pl_zero_chunk){t, enc.num_layers, dec.num_layers};
        m->fetch = pl_train_zero_fetch;
        m->fetch_ctx = &ed->zc;
    }
    /* A forward and backward of both stacks on a dummy micro-batch (every sample
     * whole, no loss): every GEMM primitive created, every buffer touched. */
    for (int64_t b = 0; b < t->mbs; b++)
        t->model.lengths[b] = (int32_t)enc.seq_length;
    memset(m->dloss, 0, (size_t)m->N * sizeof(float));
    PL_TRY(pl_encdec_forward(&ed->e));
    if (t->gnl)
        memset(t->gnl, 0, (size_t)t->nl_count * sizeof(float));
    PL_TRY(pl_encdec_backward(&ed->e, NULL, NULL));
fail:
    return st;
}

void pl_train_encdec_free(pl_trainer *t)
{
    pl_train_encdec *ed = t->ed;
    if (!ed)
        return;
    pl_train_encdec_data_free(t);
    pl_train_encdec_pp_free(t);
    pl_encdec_free(&ed->e);
    if (ed->dec_up)
        pl_model_free(&ed->dec);
    pl_free(ed);
    t->ed = NULL;
}

pl_status pl_train_encdec_load(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                               int64_t *n_loss)
{
    if (t->edpp)
        return pl_train_encdec_pp_load(t, s, idx, scale, n_loss);
    pl_model *enc = &t->model, *dec = &t->ed->dec;
    const int64_t Te = enc->T, Td = dec->T;
    for (int64_t b = 0; b < t->mbs; b++) {
        pl_encdec_sample x = {enc->tokens + b * Te, 0, dec->tokens + b * Td,
                              dec->targets + b * Td, 0};
        pl_status st = pl_train_encdec_sample(t, s, idx[b], &x);
        if (st)
            return st;
        enc->lengths[b] = (int32_t)x.enc_length;
        enc->sample[b] = dec->sample[b] = idx[b]; /* the dropout masks' key */
    }
    pl_train_loss_weights(dec, scale, n_loss);
    return PL_OK;
}

pl_status pl_train_forward(pl_trainer *t, pl_model *m)
{
    if (t->edpp) {
        pl_train_encdec_pp_bind(t, m, m->cur);
        return pl_model_forward(m);
    }
    if (!t->ed || m != &t->model)
        return pl_model_forward(m);
    pl_encdec_set_pass(&t->ed->e, m->training, m->iteration, m->seed);
    return pl_encdec_forward(&t->ed->e);
}

pl_status pl_train_backward(pl_trainer *t, pl_model *m, pl_grad_ready_fn ready, void *ctx)
{
    if (t->edpp) {
        pl_train_encdec_pp_backward_begin(t, m);
        pl_status st = pl_model_backward(m, ready, ctx);
        return st ? st : pl_train_encdec_pp_backward_end(t, m);
    }
    if (!t->ed || m != &t->model)
        return pl_model_backward(m, ready, ctx);
    return pl_encdec_backward(&t->ed->e, ready, ctx);
}
