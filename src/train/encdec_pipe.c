/* A pipelined encoder-decoder in `plait train` (--model t5 | bart with
 * --pipeline-model-parallel-split-rank S), as Megatron's encoder-and-decoder
 * pipeline runs it (schedules.py's get_tensor_shapes, parallel_state's split rank):
 *
 *   stages 0..S-1: the encoder's layers, shared evenly; stage 0 embeds, stage S-1
 *                  ends with the encoder's final norm and sends its output
 *                  (B Te, C), whole, to stage S;
 *   stages S..P-1: the decoder's layers; stage S embeds the decoder's tokens with
 *                  its own copy of the embeddings, stage P-1 holds the final norm
 *                  and the LM head (the output layer: a copy of the word embeddings,
 *                  or stage S's own when S = P-1). A decoder stage receives the
 *                  encoder output with the decoder's hidden state and passes both on.
 *
 * Backward, each decoder stage adds its cross-attention's gradient of the encoder
 * output (its TP rank's partial sum) into the one it received from the next stage,
 * so the split stage holds every decoder layer's, summed in the order one process
 * sums them; it reduces that over TP (pl_block_enc_grad) and sends it to the
 * encoder's last stage, whose backward starts from it. Megatron adds the next
 * stage's gradient after the stage's backward instead: the same sum in another
 * order. The copies of the embeddings take the sum of every copy's gradient,
 * Megatron's embedding group (stages 0, S and P-1) and position-embedding group
 * (stages 0 and S); with relative positions every stage of a stack holds its bias
 * table (the original on its first stage, config.c), summed over the stack's stages.
 *
 * t->model is this stage's part of the stack it is in (t->ed has no second
 * model); every stage loads every micro-batch (its own stack's tokens, and the
 * decoder's stages the encoder's lengths, its padding mask). This file holds the
 * per-slot buffers the transfers need and is called by pipeline.c's interpreter
 * and by encdec_train.c; ZeRO 2-3's regions are trainer.c's (what precedes a stage's
 * first layer is its region outside the layers). ZB-H1: the encoder output's
 * gradient is an input's, formed by the input half. Not here: interleaving (refused
 * at registration and in pipeline.c). */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "data/encdec_sample.h"

#include <string.h>

typedef struct pl_train_encdec_pp {
    int stack;          /* 0: an encoder stage, 1: a decoder stage */
    int split;          /* S */
    int64_t slots;      /* micro-batches in flight */
    int64_t ne, nel;    /* floats of the encoder output (B Te x C) and of this TP rank's rows */
    float *enc_out;     /* decoder: [slots] (B Te, C) each micro-batch's encoder output */
    float *denc;        /* decoder: [slots] (B Te, C) its gradient's partial sum on this rank */
    float *dsum;        /* stage S: [slots] that summed over TP (this rank's rows under sp) */
    float *dlnf;        /* stage S-1: the encoder output's gradient received (its rows) */
    int32_t *enc_len;   /* decoder: [slots] (B) the encoder's lengths */
    int32_t *scratch;   /* the other stack's tokens of one sample */
    pl_comm embd, posd; /* the embedding and position-embedding groups (members only) */
    pl_comm relg;       /* relative positions: the stages of this stage's stack */
} pl_train_encdec_pp;

/* n floats, zeroed: their pages faulted in now, not in the first step */
static float *touched(size_t n)
{
    float *p = pl_malloc((n ? n : 1) * sizeof(float));
    if (p)
        memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

/* The groups of pipeline stages over the PP group: this stage's is color (< 0: none). */
static pl_status group_split_color(pl_trainer *t, int color, const char *name, pl_comm *out)
{
    pl_comm *pp = pl_grid_comm(&t->grid, PL_GRID_PP);
    MPI_Comm c;
    if (MPI_Comm_split(pp->mpi, color >= 0 ? color : MPI_UNDEFINED, t->grid.pp_rank, &c) !=
        MPI_SUCCESS)
        return pl_errorf(PL_ERR_IO, "MPI_Comm_split for the %s group on pipeline stage %d failed",
                         name, t->grid.pp_rank);
    return pl_comm_init(out, c, name, 1);
}

/* The members of one group of pipeline stages (a stage in it: member). */
static pl_status group_split(pl_trainer *t, int member, const char *name, pl_comm *out)
{
    return group_split_color(t, member ? 0 : -1, name, out);
}

pl_status pl_train_encdec_pp_setup(pl_trainer *t)
{
    pl_status st = PL_OK;
    const int P = t->grid.layout.pp, r = t->grid.pp_rank, S = (int)t->cfg.pp_split;
    pl_train_encdec_pp *e = pl_calloc(1, sizeof *e);
    if (!e)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    t->edpp = e;
    pl_model *m = &t->model;
    int s0, ns;
    e->stack = pl_model_encdec_stage_stack(&t->cfg, P, r, &s0, &ns);
    e->split = S;
    e->slots = t->pp_slots;
    const int64_t B = t->mbs, Te = t->cfg.seq_length, Td = t->cfg.dec_seq_length, C = m->C;
    e->ne = B * Te * C;
    e->nel = m->blk.sp ? e->ne / t->grid.layout.tp : e->ne; /* sp: the rows of this TP rank */
    const size_t slots = (size_t)e->slots;
    e->scratch = pl_calloc((size_t)(Te > 2 * Td ? Te : 2 * Td), sizeof(int32_t));
    if (e->stack) {
        m->layer_id0 = t->cfg.num_layers; /* the dropout masks' layer numbers, as one process's */
        e->enc_out = touched(slots * (size_t)e->ne);
        e->denc = touched(slots * (size_t)e->ne);
        e->enc_len = pl_calloc(slots * (size_t)B, sizeof(int32_t));
        if (r == S)
            e->dsum = touched(slots * (size_t)e->nel);
        if (!e->enc_out || !e->denc || !e->enc_len || (r == S && !e->dsum))
            return pl_errorf(PL_ERR_NOMEM, "out of memory for the encoder output's slots");
        for (int64_t i = 0; i < (int64_t)slots * B; i++)
            e->enc_len[i] = (int32_t)Te;
        pl_train_encdec_pp_bind(t, m, 0);
    } else if (r == S - 1) {
        e->dlnf = touched((size_t)e->nel);
        if (!e->dlnf)
            return pl_errorf(PL_ERR_NOMEM, "out of memory for the encoder output's gradient");
        m->dlnf_in = e->dlnf;
    }
    if (!e->scratch)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    /* Megatron's groups: the word embeddings on stages 0 and S, and the last stage's
     * output layer when it is a copy (tied, S < P-1); the position embeddings on 0 and S */
    const int tied_last = !t->cfg.untie && t->cfg.head.lm_head && S < P - 1;
    PL_TRY(group_split(t, r == 0 || r == S || (tied_last && r == P - 1), "embd", &e->embd));
    if (t->cfg.block.pos == PL_POS_LEARNED)
        PL_TRY(group_split(t, r == 0 || r == S, "posd", &e->posd));
    /* relative positions: each stack's stages hold its bias table (config.c's copies) */
    if (t->cfg.block.pos == PL_POS_RELATIVE)
        PL_TRY(group_split_color(t, e->stack, "relpos", &e->relg));
fail:
    return st;
}

void pl_train_encdec_pp_free(pl_trainer *t)
{
    pl_train_encdec_pp *e = t->edpp;
    if (!e)
        return;
    pl_comm_free(&e->embd);
    pl_comm_free(&e->posd);
    pl_comm_free(&e->relg);
    pl_free(e->enc_out);
    pl_free(e->denc);
    pl_free(e->dsum);
    pl_free(e->dlnf);
    pl_free(e->enc_len);
    pl_free(e->scratch);
    pl_free(e);
    t->edpp = NULL;
}

size_t pl_train_encdec_pp_bytes(const pl_trainer *t)
{
    const pl_train_encdec_pp *e = t->edpp;
    if (!e)
        return 0;
    size_t n = 0;
    if (e->enc_out)
        n += 2 * (size_t)e->slots * (size_t)e->ne * sizeof(float);
    if (e->dsum)
        n += (size_t)e->slots * (size_t)e->nel * sizeof(float);
    if (e->dlnf)
        n += (size_t)e->nel * sizeof(float);
    return n;
}

void pl_train_encdec_pp_bind(pl_trainer *t, pl_model *m, int64_t k)
{
    pl_train_encdec_pp *e = t->edpp;
    if (!e->stack)
        return;
    m->blk.enc = e->enc_out + k * e->ne;
    m->blk.denc = e->denc + k * e->ne;
    m->blk.enc_len = e->enc_len + k * m->B;
}

pl_status pl_train_encdec_pp_load(pl_trainer *t, pl_split s, const int64_t *idx, double scale,
                                  int64_t *n_loss)
{
    pl_train_encdec_pp *e = t->edpp;
    pl_model *m = &t->model;
    const int64_t T = m->T, Td = t->cfg.dec_seq_length;
    *n_loss = 0;
    for (int64_t b = 0; b < t->mbs; b++) {
        pl_encdec_sample x = {0};
        if (e->stack) {
            x.enc_tokens = e->scratch;
            x.dec_tokens = m->tokens + b * T;
            x.labels = m->targets + b * T;
        } else {
            x.enc_tokens = m->tokens + b * T;
            x.dec_tokens = e->scratch;
            x.labels = e->scratch + Td;
        }
        pl_status st = pl_train_encdec_sample(t, s, idx[b], &x);
        if (st)
            return st;
        if (e->stack)
            e->enc_len[m->cur * m->B + b] = (int32_t)x.enc_length;
        else
            m->lengths[b] = (int32_t)x.enc_length;
        m->sample[b] = idx[b]; /* the dropout masks' key */
    }
    if (e->stack)
        pl_train_loss_weights(m, scale, n_loss);
    return PL_OK;
}

void pl_train_encdec_pp_backward_begin(pl_trainer *t, pl_model *m)
{
    pl_train_encdec_pp *e = t->edpp;
    pl_train_encdec_pp_bind(t, m, m->cur);
    if (e->stack && m->stage.last) /* the last decoder stage starts the sum */
        memset(e->denc + m->cur * e->ne, 0, (size_t)e->ne * sizeof(float));
}

pl_status pl_train_encdec_pp_backward_end(pl_trainer *t, pl_model *m)
{
    pl_train_encdec_pp *e = t->edpp;
    if (!e->stack || t->grid.pp_rank != e->split)
        return PL_OK;
    return pl_block_enc_grad(&m->blk, e->dsum + m->cur * e->nel, e->denc + m->cur * e->ne);
}

int pl_train_encdec_pp_tensors(pl_trainer *t, pl_model *m, int64_t k, pl_pp_op op,
                               float *buf[2], int64_t n[2])
{
    pl_train_encdec_pp *e = t->edpp;
    const int r = t->grid.pp_rank, S = e->split;
    const int64_t nl = m->blk.Nl * m->C;
    pl_model_mb *mb = &m->mb[k];
    float *eo = e->stack ? e->enc_out + k * e->ne : NULL, *de = e->stack ? e->denc + k * e->ne
                                                                            : NULL;
    int c = 0;
    switch (op) {
    case PL_PP_RECV_ACT: /* the split stage embeds: the encoder output alone */
        if (!m->stage.first)
            buf[c] = mb->x0, n[c++] = nl;
        if (e->stack)
            buf[c] = eo, n[c++] = e->ne;
        break;
    case PL_PP_SEND_ACT:
        if (r == S - 1) {
            buf[c] = mb->lnf, n[c++] = e->ne;
        } else if (!m->stage.last) {
            buf[c] = pl_model_output(m), n[c++] = nl;
            if (e->stack)
                buf[c] = eo, n[c++] = e->ne;
        }
        break;
    case PL_PP_RECV_GRAD:
        if (r == S - 1) {
            buf[c] = e->dlnf, n[c++] = e->nel;
        } else if (!m->stage.last) {
            buf[c] = mb->dout, n[c++] = nl;
            if (e->stack)
                buf[c] = de, n[c++] = e->ne;
        }
        break;
    case PL_PP_SEND_GRAD:
        if (r == S) {
            buf[c] = e->dsum + k * e->nel, n[c++] = e->nel;
        } else if (!m->stage.first) {
            buf[c] = mb->dx0, n[c++] = nl;
            if (e->stack)
                buf[c] = de, n[c++] = e->ne;
        }
        break;
    default:
        break;
    }
    return c;
}

pl_status pl_train_encdec_pp_tied_grads(pl_trainer *t)
{
    pl_status st = PL_OK;
    pl_train_encdec_pp *e = t->edpp;
    pl_model *m = &t->model;
    if (pl_comm_is_member(&e->embd)) {
        float *g = m->stage.first ? m->d.wte : m->d.out_w;
        PL_TRY(pl_comm_allreduce_f32(&e->embd, g, m->Vl * m->C, PL_COMM_SUM));
    }
    if (pl_comm_is_member(&e->posd))
        PL_TRY(pl_comm_allreduce_f32(&e->posd, m->d.wpe, t->cfg.max_positions * m->C,
                                     PL_COMM_SUM));
    if (pl_comm_is_member(&e->relg) && e->relg.size > 1)
        PL_TRY(pl_comm_allreduce_f32(&e->relg, m->d.relpos, t->cfg.rel_buckets * t->cfg.heads,
                                     PL_COMM_SUM));
fail:
    return st;
}
