/* A rank's model: its stage's stack of blocks, with the embedding on the first
 * stage and the final norm and LM head on the last (one stage holds every layer
 * without pipelining), over the micro-batches it keeps in flight; tensor
 * parallelism inside the layers. */
#include "model/model.h"

#include "base/alloc.h"
#include "base/log.h"
#include "nn/plan.h"
#include "nn/relbias.h"
#include "parallel/tp/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Binds layer `layer`'s views: at flat + offset, or at locate(ctx, offset, grad);
 * parameters the spec does not have stay NULL. */
static pl_status layer_bind(const pl_registry *reg, const pl_model_config *c, const float *flat,
                            pl_flat_locate_fn locate, void *ctx, int grad, int64_t layer,
                            pl_block_weights *out, int64_t *lo, int64_t *hi)
{
    pl_block_param_name names[PL_BLOCK_MAX_PARAMS];
    const int np = pl_block_param_names(&c->block, names);
    memset(out, 0, sizeof *out);
    *lo = INT64_MAX;
    *hi = 0;
    for (int k = 0; k < np; k++) {
        char name[PL_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "%s.layers.%lld.%s", pl_model_stack(c), (long long)layer,
                 names[k].suffix);
        const pl_param *p = pl_registry_find(reg, name);
        if (!p || p->offset < 0)
            return pl_errorf(PL_ERR_INTERNAL, "parameter %s missing on this rank", name);
        float **slot = (float **)((char *)out + names[k].field);
        *slot = locate ? locate(ctx, p->offset, grad) : flat ? (float *)flat + p->offset : NULL;
        /* the range covers each tensor's alignment padding (registry.c): layers tile the
         * flat buffer, so a gradient bucket's elements are all marked ready */
        const int64_t end = p->offset + (p->numel + PL_PARAM_ALIGN - 1) / PL_PARAM_ALIGN *
                                            PL_PARAM_ALIGN;
        *lo = p->offset < *lo ? p->offset : *lo;
        *hi = end > *hi ? end : *hi;
    }
    return PL_OK;
}

pl_status pl_model_layer_bind(const pl_registry *reg, const pl_model_config *c, const float *flat,
                              int64_t layer, pl_block_weights *out, int64_t *lo, int64_t *hi)
{
    return layer_bind(reg, c, flat, NULL, NULL, 0, layer, out, lo, hi);
}

pl_status pl_model_top_bind(const pl_registry *reg, const pl_model_config *c, const float *flat,
                            pl_flat_locate_fn locate, void *ctx, int grad, pl_model_top *out)
{
    enum { NTOP = 25 };
    char lnf_w[PL_PARAM_NAME_MAX], lnf_b[PL_PARAM_NAME_MAX], relpos[PL_PARAM_NAME_MAX];
    char eln_w[PL_PARAM_NAME_MAX], eln_b[PL_PARAM_NAME_MAX];
    pl_model_relpos_name(c, relpos, sizeof relpos);
    /* the decoder's own names ("" for the other parts: found nowhere) */
    const int dec = c->part == PL_PART_DECODER;
    snprintf(lnf_w, sizeof lnf_w, "%s.final_layernorm.weight", pl_model_stack(c));
    snprintf(lnf_b, sizeof lnf_b, "%s.final_layernorm.bias", pl_model_stack(c));
    snprintf(eln_w, sizeof eln_w, "%s.initial_layernorm.weight", pl_model_stack(c));
    snprintf(eln_b, sizeof eln_b, "%s.initial_layernorm.bias", pl_model_stack(c));
    const char *const names[NTOP] = {
        "embedding.word_embeddings.weight", pl_model_position_name(c),
        "embedding.tokentype_embeddings.weight", lnf_w, lnf_b, "output_layer.weight",
        pl_model_output_bias_name(c), "lm_head.dense.weight", "lm_head.dense.bias",
        "lm_head.layer_norm.weight", "lm_head.layer_norm.bias", "pooler.dense.weight",
        "pooler.dense.bias", "binary_head.weight", "binary_head.bias",
        "classification_head.weight", "classification_head.bias", "classifier.mlp.layer0.weight",
        "classifier.mlp.layer0.bias",
        /* a pipelined encoder-decoder's decoder embeds with copies on its first stage */
        dec ? "decoder_embedding.word_embeddings.weight" : "",
        dec ? "decoder_embedding.position_embeddings.weight" : "", relpos, eln_w, eln_b, NULL};
    pl_head_weights *h = &out->head;
    float **dst[NTOP] = {&out->wte,   &out->wpe,   &out->tte,    &out->lnf_w,  &out->lnf_b,
                         &out->out_w, &out->out_b, &h->dense_w,  &h->dense_b,  &h->ln_w,
                         &h->ln_b,    &h->pool_w,  &h->pool_b,   &h->bin_w,    &h->bin_b,
                         &h->bin_w,   &h->bin_b,   &h->tok_w,    &h->tok_b,    &out->wte,
                         &out->wpe,   &out->relpos, &out->eln_w, &out->eln_b, NULL};
    memset(out, 0, sizeof *out);
    for (int k = 0; names[k]; k++) {
        const pl_param *p = pl_registry_find(reg, names[k]);
        if (!p || p->offset < 0) /* not in this family, or on another pipeline stage */
            continue;
        *dst[k] = locate ? locate(ctx, p->offset, grad) : flat ? (float *)flat + p->offset : NULL;
    }
    /* a pipelined stack's later stages: their copy of the stack's bias table */
    for (int i = 0; c->block.pos == PL_POS_RELATIVE && !out->relpos && i < reg->n; i++) {
        const pl_param *p = &reg->params[i];
        const char *orig = p->tied_copy ? pl_model_tied_original(p->name) : NULL;
        if (p->offset >= 0 && orig && strcmp(orig, relpos) == 0)
            out->relpos = locate ? locate(ctx, p->offset, grad) : flat ? (float *)flat + p->offset
                                                                      : NULL;
    }
    /* tied: the word embeddings, unless the last stage holds its own copy (pipelining) */
    if (c->head.lm_head && !c->untie && !out->out_w)
        out->out_w = out->wte;
    return PL_OK;
}

/* Points the model's top-level views of one buffer (grad 0: parameters, 1:
 * gradients). */
static pl_status bind_top(pl_model *m, int grad, const float *flat, pl_flat_locate_fn locate,
                          void *ctx)
{
    return pl_model_top_bind(m->reg, &m->cfg, flat, locate, ctx, grad, grad ? &m->d : &m->p);
}

/* Points the per-layer views of one flat buffer (the stage's layers). */
static pl_status bind_layers(pl_model *m, pl_block_weights *out, float *flat)
{
    for (int64_t j = 0; j < m->stage.nl; j++) {
        int64_t lo, hi;
        pl_status st = pl_model_layer_bind(m->reg, &m->cfg, flat, m->stage.l0 + j, &out[j], &lo,
                                           &hi);
        if (st)
            return st;
        m->layer_offset[j] = lo;
        m->layer_count[j] = hi - lo;
    }
    return PL_OK;
}

/* One micro-batch slot's saved activations on b: the stage's input (and the
 * gradients exchanged with its neighbours), each layer's (as plan() says), and
 * on the last stage the final norm's and the loss's. */
static void plan_mb(pl_model *m, pl_plan *b, pl_model_mb *mb, int recompute, int selective,
                    const pl_block_acts *shared, int alias_last)
{
    const int64_t N = m->N, Nl = m->blk.Nl, C = m->C, L = m->stage.nl;
    const pl_block_ctx *c = &m->blk;
    mb->x0 = pl_plan_take(b, Nl * C);
    mb->dx0 = m->stage.first ? NULL : pl_plan_take(b, Nl * C);
    mb->dout = m->stage.last ? NULL : pl_plan_take(b, Nl * C);
    if (m->stage.first && pl_model_post_ln(&m->cfg)) {
        mb->emb = pl_plan_take(b, Nl * C);
        mb->emb_mean = pl_plan_take(b, Nl);
        mb->emb_rstd = pl_plan_take(b, Nl);
    }
    mb->dloss = pl_plan_take(b, N);
    mb->dbin = pl_plan_take(b, m->B);
    for (int64_t l = 0; l < L; l++) {
        pl_block_acts *a = &mb->acts[l];
        int64_t g = recompute ? m->group_start[l] : -1;
        memset(a, 0, sizeof *a);
        if (alias_last && l + 1 == L) { /* the recompute slot, with a res2 of its own */
            *a = m->slots[0];
            a->res2 = pl_plan_take(b, Nl * C);
        } else if (g < 0) {
            pl_block_take_acts(c, b, a, !selective, 1);
            if (selective) {
                a->attn = shared->attn;
                a->lse = shared->lse;
                a->xattn = shared->xattn;
                a->xlse = shared->xlse;
            }
        } else if (l + 1 == L || m->group_start[l + 1] != g) {
            a->res2 = pl_plan_take(b, Nl * C);
        }
    }
    for (int64_t l = 0; l < L; l++) {
        int64_t g = recompute ? m->group_start[l] : -1;
        if (g >= 0) {
            float *res2 = mb->acts[l].res2;
            mb->acts[l] = m->slots[l - g];
            if (l + 1 == L || m->group_start[l + 1] != g)
                mb->acts[l].res2 = res2;
        }
    }
    if (m->stage.last) {
        mb->lnf = pl_plan_take(b, N * C); /* whole (gathered under sequence parallelism) */
        mb->lnf_mean = pl_plan_take(b, Nl);
        mb->lnf_rstd = pl_plan_take(b, Nl);
        mb->loss = pl_plan_take(b, N);
        mb->lse = pl_plan_take(b, N);
        if (m->cfg.head.lm_head && m->cfg.lm_logits == PL_LM_LOGITS_FUSED)
            mb->dlm = pl_plan_take(b, N * C);
        const pl_head_set hs = pl_model_head_set(&m->cfg);
        pl_head_take_acts(b, &mb->head, &hs, m->B, m->T, C);
        mb->bin_loss = pl_plan_take(b, m->B);
    }
}

/* Lays out every activation and scratch buffer; returns the floats needed.
 * With recompute = 0 it plans as if cfg.recompute were off (for the report).
 * Kept per layer and micro-batch in flight: the block's saved activations
 * (nn/block.h), attn + lse (and cross-attention's xattn + xlse) not under
 * selective. A fully recomputed layer uses
 * the buffers of its position in its group (slots, shared by the micro-batches:
 * one backward runs at a time), except the group's last output, which is the
 * next group's checkpointed input and is kept. With recompute = 0 nothing of
 * m->slots is used, so m->group_start may say anything. */
static size_t plan(pl_model *m, float *base, int recompute)
{
    const int64_t N = m->N, Nl = m->blk.Nl, C = m->C, L = m->stage.nl;
    const pl_recompute *rc = &m->cfg.recompute;
    const int selective = recompute && rc->granularity == PL_RECOMPUTE_SELECTIVE;
    pl_block_ctx *c = &m->blk;
    pl_plan b = {base, 0};
    pl_block_acts shared = {0}; /* selective: the attention outputs every layer rebuilds */
    if (selective) {
        shared.attn = pl_plan_take(&b, N * c->Al);
        shared.lse = pl_plan_take(&b, m->B * c->NHl * m->T);
        if (c->spec.cross_attention) {
            shared.xattn = pl_plan_take(&b, N * c->Al);
            shared.xlse = pl_plan_take(&b, m->B * c->NHl * m->T);
        }
    }
    int64_t nslots = 0;
    for (int64_t l = 0; recompute && l < L; l++)
        if (m->group_start[l] >= 0 && l - m->group_start[l] + 1 > nslots)
            nslots = l - m->group_start[l] + 1;
    /* Block: the recomputed layers come first, so when backward reaches them
     * the last layer's buffers are dead: its group slot is those (not its res2,
     * the final norm's input), with one micro-batch in flight. Uniform: the
     * slots are their own. */
    const int alias_last = nslots == 1 && m->group_start[L - 1] < 0 && m->stage.inflight == 1;
    for (int64_t k = 0; k < nslots && !alias_last; k++) { /* the last position ends its group */
        memset(&m->slots[k], 0, sizeof m->slots[k]);
        pl_block_take_acts(c, &b, &m->slots[k], 1, k + 1 < nslots);
    }
    if (alias_last) { /* the slot is the last layer's buffers (plan_mb), full recompute only */
        memset(&m->slots[0], 0, sizeof m->slots[0]);
        pl_block_take_acts(c, &b, &m->slots[0], 1, 0);
    }
    for (int64_t s = 0; s < m->stage.inflight; s++)
        plan_mb(m, &b, &m->mb[s], recompute, selective, &shared, alias_last);
    m->rows = pl_plan_take(&b, 3 * N);
    c->norm_out = pl_plan_take(&b, N * C);
    m->dres = pl_plan_take(&b, Nl * C);
    c->dnorm = pl_plan_take(&b, N * C);
    const int fused = m->cfg.lm_logits == PL_LM_LOGITS_FUSED;
    const size_t lm_ws = !m->stage.last || !m->cfg.head.lm_head ? 0
                         : fused ? pl_tp_lmhead_fused_workspace(m->lm_rows, m->Vl)
                                 : pl_lmhead_workspace(N, m->lm_chunk);
    m->lm_ws = pl_plan_take(&b, (int64_t)lm_ws);
    const pl_head_set hs = pl_model_head_set(&m->cfg);
    if (m->stage.last && (hs.lm || hs.pooled || hs.token)) {
        m->head_ws = pl_plan_take(&b, pl_head_scratch(&hs, m->B, m->T, C));
        m->dhead = hs.lm ? pl_plan_take(&b, N * C) : NULL;
    }
    /* Kept logits live from the LM head's forward to its backward, and the
     * fused head's rows only inside its forward, when every layer buffer below
     * is dead (forward is over, backward's layers have not started): those
     * buffers then share the logits' memory when they fit. */
    pl_plan probe = {NULL, 0}, inner = {m->lm_ws, 0};
    pl_block_take_scratch(c, &probe);
    pl_block_take_scratch(c, m->cfg.lm_logits != PL_LM_LOGITS_RECOMPUTE &&
                                     m->stage.inflight == 1 && probe.used <= lm_ws
                                 ? &inner : &b);
    pl_block_take_rope(c, &b, &m->cfg.rope);
    if (m->cfg.block.pos == PL_POS_RELATIVE) /* the table's gradient before its TP sum */
        m->rel_dtable = pl_plan_take(&b, m->cfg.rel_buckets * m->cfg.heads);
    return b.used;
}

/* Which group each layer is recomputed in (Megatron's TransformerBlock
 * _checkpointed_forward): uniform n: [0, n), [n, 2n), ..., the last group
 * shorter when n does not divide L; block n: each of layers 0..n-1 alone. */
static pl_status plan_groups(pl_model *m)
{
    const pl_recompute *rc = &m->cfg.recompute;
    const int64_t L = m->stage.nl, n = rc->num_layers;
    for (int64_t l = 0; l < L; l++)
        m->group_start[l] = -1;
    if (rc->granularity != PL_RECOMPUTE_FULL)
        return PL_OK;
    if (n < 1 || n > L)
        return pl_errorf(PL_ERR_ARG, "--recompute-num-layers %lld: must be between 1 and the "
                         "layers of the stage (%lld)", (long long)n, (long long)L);
    for (int64_t l = 0; l < L; l++)
        m->group_start[l] = rc->method == PL_RECOMPUTE_BLOCK ? (l < n ? l : -1) : l / n * n;
    return PL_OK;
}

const char *pl_recompute_name(const pl_recompute *rc, char *buf, size_t n)
{
    if (rc->granularity == PL_RECOMPUTE_FULL)
        snprintf(buf, n, "full, %s, %lld layer%s", rc->method == PL_RECOMPUTE_BLOCK ? "block"
                 : "uniform", (long long)rc->num_layers, rc->num_layers == 1 ? "" : "s");
    else
        snprintf(buf, n, "%s", rc->granularity == PL_RECOMPUTE_SELECTIVE ? "selective" : "none");
    return buf;
}

/* Rows per block of the fused LM head: cfg.lm_rows, or as many as make about
 * 100 MiB of logits (512 rows of GPT-2's 50304: fewer rows run the head's
 * GEMMs measurably slower, docs/performance.md), a multiple of 16, at least
 * 16; at most the micro-batch's. */
static int64_t lm_rows(int64_t want, int64_t N, int64_t V)
{
    int64_t r = want;
    if (r <= 0) {
        r = ((int64_t)25 << 20) / V / 16 * 16;
        r = r < 16 ? 16 : r;
    }
    return r < N ? r : N;
}

pl_status pl_model_init(pl_model *m, const pl_model_config *cfg, const pl_registry *reg,
                        float *params, float *grads, int64_t B, const pl_model_stage *stage,
                        pl_comm *tp, pl_gemm *gemm)
{
    pl_status st = PL_OK;
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->reg = reg;
    m->stage = stage ? *stage : (pl_model_stage){0, cfg->num_layers, 1, 1, 1, 0};
    const pl_model_stage *sg = &m->stage;
    if (sg->l0 < 0 || sg->nl < 1 || sg->l0 + sg->nl > cfg->num_layers || sg->inflight < 1)
        return pl_errorf(PL_ERR_INTERNAL, "pl_model_init: layers [%lld, +%lld) of %lld, %lld in "
                         "flight", (long long)sg->l0, (long long)sg->nl,
                         (long long)cfg->num_layers, (long long)sg->inflight);
    m->B = B;
    m->T = cfg->seq_length;
    m->N = B * m->T;
    m->C = cfg->hidden;
    m->tp = tp;
    m->gemm = gemm;
    const pl_block_dims dims = pl_model_block_dims(cfg);
    PL_TRY(pl_block_ctx_init(&m->blk, &cfg->block, &dims, cfg->ln_eps, B, m->T,
                             cfg->block.cross_attention ? cfg->cross_length : 0, tp, reg->tp_rank,
                             cfg->sequence_parallel, gemm, &m->prof));
    PL_TRY(pl_block_kv_comm(&m->kv_comm, tp, &dims));
    m->blk.kv = &m->kv_comm;
    m->blk.split_bwd = sg->split_bwd;
    m->blk.softmax_scale = cfg->softmax_scale;
    if (sg->split_bwd && cfg->recompute.granularity != PL_RECOMPUTE_NONE)
        return pl_errorf(PL_ERR_UNSUPPORTED, "a zero-bubble schedule (the backward in two "
                         "halves) with activation recomputation: the recomputed layers' buffers "
                         "are shared by the micro-batches, and a weight half runs after the next "
                         "micro-batch's; drop --recompute-* or choose another schedule");
    m->Vl = cfg->padded_vocab / reg->tp_size;
    m->v0 = m->Vl * reg->tp_rank;
    /* Kept logits need the whole vocabulary slice in one chunk (kernels.h). */
    m->lm_chunk = m->Vl < 2048 || cfg->lm_logits == PL_LM_LOGITS_KEEP ? m->Vl : 2048;
    m->lm_rows = lm_rows(cfg->lm_rows, m->N, m->Vl);
    const int64_t L = sg->nl, K = sg->inflight;
    m->w = pl_calloc((size_t)L, sizeof *m->w);
    m->g = pl_calloc((size_t)L, sizeof *m->g);
    m->slots = pl_calloc((size_t)L, sizeof *m->slots);
    m->group_start = pl_calloc((size_t)L, sizeof *m->group_start);
    m->layer_offset = pl_calloc((size_t)L, sizeof *m->layer_offset);
    m->layer_count = pl_calloc((size_t)L, sizeof *m->layer_count);
    m->mb = pl_calloc((size_t)K, sizeof *m->mb);
    m->mb_acts = pl_calloc((size_t)(K * L), sizeof *m->mb_acts);
    const int64_t ids = 3 * m->N + 3 * B; /* per slot: tokens, targets, types, lengths, labels
                                           * (2 B: a span's start and end positions) */
    m->mb_ids = pl_calloc((size_t)(K * ids), sizeof *m->mb_ids);
    m->mb_samples = pl_calloc((size_t)(K * B), sizeof *m->mb_samples);
    if (!m->w || !m->g || !m->slots || !m->group_start || !m->layer_offset || !m->layer_count ||
        !m->mb || !m->mb_acts || !m->mb_ids || !m->mb_samples) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's tables");
        goto fail;
    }
    for (int64_t k = 0; k < K; k++) {
        m->mb[k].acts = m->mb_acts + k * L;
        int32_t *id = m->mb_ids + k * ids;
        m->mb[k].tokens = id;
        m->mb[k].targets = id + m->N;
        m->mb[k].types = cfg->head.tokentypes ? id + 2 * m->N : NULL;
        m->mb[k].lengths = cfg->block.mask == PL_MASK_PADDING ? id + 3 * m->N : NULL;
        m->mb[k].labels = cfg->head.binary_head || PL_TASK_POOLED(cfg->head.task) ||
                                  cfg->head.task == PL_TASK_SPAN ? id + 3 * m->N + B : NULL;
        for (int64_t b = 0; m->mb[k].lengths && b < B; b++)
            m->mb[k].lengths[b] = (int32_t)m->T;
        m->mb[k].sample = m->mb_samples + k * B;
    }
    PL_TRY(bind_top(m, 0, params, NULL, NULL));
    PL_TRY(bind_top(m, 1, grads, NULL, NULL));
    if (params && ((cfg->block.pos == PL_POS_RELATIVE && !m->p.relpos) ||
                   (sg->first && (!m->p.wte || (cfg->block.pos == PL_POS_LEARNED && !m->p.wpe) ||
                                  (cfg->head.tokentypes && !m->p.tte))) ||
                   (sg->first && pl_model_post_ln(cfg) && !m->p.eln_w) ||
                   (sg->last && ((!pl_model_post_ln(cfg) && !m->p.lnf_w) ||
                                 (cfg->head.lm_head && !m->p.out_w) ||
                                 (cfg->head.output_bias && !m->p.out_b) ||
                                 (cfg->head.lm_transform && !m->p.head.dense_w) ||
                                 (cfg->head.binary_head && !m->p.head.bin_w) ||
                                 (PL_TASK_POOLED(cfg->head.task) && !m->p.head.bin_w) ||
                                 (pl_model_head_set(cfg).token && !m->p.head.tok_w))))) {
        st = pl_errorf(PL_ERR_INTERNAL, "embedding, final norm or output layer missing on this "
                       "stage");
        goto fail;
    }
    PL_TRY(bind_layers(m, m->w, params));
    PL_TRY(bind_layers(m, m->g, grads));
    PL_TRY(plan_groups(m));
    m->act_floats_kept = plan(m, NULL, 0);
    m->act_floats = plan(m, NULL, 1);
    size_t bytes;
    if (pl_mul_size(m->act_floats, sizeof(float), &bytes) || pl_add_size(bytes, 64, &bytes)) {
        st = pl_errorf(PL_ERR_NOMEM, "activation plan overflows");
        goto fail;
    }
    m->act_mem = pl_malloc(bytes);
    if (!m->act_mem) {
        st = pl_errorf(PL_ERR_NOMEM,
                       "cannot allocate %.1f MiB of activations (--micro-batch-size %lld)",
                       (double)bytes / (1 << 20), (long long)B);
        goto fail;
    }
    float *base = (float *)(((uintptr_t)m->act_mem + 63) & ~(uintptr_t)63);
    memset(base, 0, m->act_floats * sizeof(float)); /* touch every page once, now */
    plan(m, base, 1);
    pl_model_use(m, 0);
    pl_block_rope_fill(&m->blk, &cfg->rope);
    /* GEMM primitives of every shape the step uses, created before step 1. */
    PL_TRY(pl_block_prepare(&m->blk));
    const pl_head_set hs = pl_model_head_set(cfg);
    if (sg->last && cfg->head.lm_head && cfg->lm_logits == PL_LM_LOGITS_FUSED) {
        PL_TRY(pl_lmhead_prepare(gemm, m->lm_rows, m->C, m->Vl, m->Vl));
        if (m->N % m->lm_rows)
            PL_TRY(pl_lmhead_prepare(gemm, m->N % m->lm_rows, m->C, m->Vl, m->Vl));
    } else if (sg->last && cfg->head.lm_head) {
        PL_TRY(pl_lmhead_prepare(gemm, m->N, m->C, m->Vl, m->lm_chunk));
    }
    if (sg->last)
        PL_TRY(pl_head_prepare(gemm, &hs, B, m->T, m->C));
    return PL_OK;
fail:
    pl_model_free(m);
    return st;
}

void pl_model_free(pl_model *m)
{
    pl_free(m->w);
    pl_free(m->g);
    pl_free(m->slots);
    pl_free(m->group_start);
    pl_free(m->layer_offset);
    pl_free(m->layer_count);
    pl_free(m->mb);
    pl_free(m->mb_acts);
    pl_free(m->mb_ids);
    pl_free(m->mb_samples);
    pl_free(m->act_mem);
    pl_comm_free(&m->kv_comm);
    memset(m, 0, sizeof *m);
}

void pl_model_use(pl_model *m, int64_t k)
{
    pl_model_mb *mb = &m->mb[k];
    m->cur = k;
    m->tokens = mb->tokens;
    m->targets = mb->targets;
    m->types = mb->types;
    m->lengths = mb->lengths;
    m->labels = mb->labels;
    m->blk.pad_len = mb->lengths;
    m->dloss = mb->dloss;
    m->dbin = mb->dbin;
    m->bin_loss = mb->bin_loss;
    m->sample = mb->sample;
    m->x0 = mb->x0;
    m->acts = mb->acts;
    m->lnf = mb->lnf;
    m->lnf_mean = mb->lnf_mean;
    m->lnf_rstd = mb->lnf_rstd;
    m->loss = mb->loss;
    m->lse = mb->lse;
}

float *pl_model_output(const pl_model *m) { return m->acts[m->stage.nl - 1].res2; }

pl_status pl_model_rebind(pl_model *m, int grad, pl_flat_locate_fn locate, void *ctx)
{
    pl_status st = bind_top(m, grad, NULL, locate, ctx);
    for (int64_t j = 0; !st && j < m->stage.nl; j++) {
        int64_t lo, hi;
        st = layer_bind(m->reg, &m->cfg, NULL, locate, ctx, grad, m->stage.l0 + j,
                        grad ? &m->g[j] : &m->w[j], &lo, &hi);
    }
    return st;
}

size_t pl_model_activation_bytes(const pl_model *m) { return m->act_floats * sizeof(float); }

size_t pl_model_activation_bytes_kept(const pl_model *m)
{
    return m->act_floats_kept * sizeof(float);
}

/* The input of the stage's layer j: the previous layer's output, or the
 * stage's input (the embedding's output on the first stage). */
static const float *layer_input(const pl_model *m, int64_t j)
{
    return j ? m->acts[j - 1].res2 : m->x0;
}

/* The block context's dropout for this pass. */
static void set_dropout(pl_model *m)
{
    pl_dropout_key *k = &m->blk.drop;
    k->hidden = m->training ? m->cfg.hidden_dropout : 0.0f;
    k->attention = m->training ? m->cfg.attention_dropout : 0.0f;
    k->seed = m->seed;
    k->iteration = m->iteration;
    k->sample = m->sample;
}

/* Megatron's embedding dropout (hidden dropout on the embedding output, site
 * 3), in place on this rank's rows x (Nl, C): the output in forward, its
 * gradient in backward. */
static void embedding_dropout(pl_model *m, float *x)
{
    if (m->blk.drop.hidden > 0)
        pl_block_hidden_dropout(&m->blk, x, x, m->layer_id0, 3);
}

/* The fused LM head (pl_tp_lmhead_fused) on x, the output layer's input: the
 * loss, and with grad its input gradient into the micro-batch's dlm (kept for
 * backward) and the output layer's gradients added. A forward without grad
 * (evaluation) leaves the gradient to the backward, which runs this again. */
static pl_status lm_fused(pl_model *m, const float *x, int grad)
{
    const pl_head_set hs = pl_model_head_set(&m->cfg);
    const int whole = hs.lm || hs.pooled || hs.token;
    pl_model_mb *mb = &m->mb[m->cur];
    mb->lm_grad = grad;
    return pl_tp_lmhead_fused(m->tp, whole ? 0 : m->blk.sp, m->gemm, m->loss, m->lse,
                              grad ? mb->dlm : NULL, m->d.out_w, m->d.out_b, x, m->p.out_w,
                              m->p.out_b, m->targets, m->dloss, m->N, m->C, m->v0, m->Vl,
                              m->lm_rows, m->lm_ws, m->rows);
}

/* The task head's input dropout of this pass (nn/head.h): none when evaluating
 * or without a task head; keyed as the layers' masks, site PL_HEAD_DROPOUT_SITE. */
static pl_head_drop head_drop(const pl_model *m, const pl_head_set *hs)
{
    pl_head_drop d = {m->training && hs->drop ? m->cfg.head_dropout : 0.0f, m->seed,
                      pl_block_dropout_stream(m->iteration, 0, PL_HEAD_DROPOUT_SITE), m->sample,
                      m->T};
    return d;
}

/* The last stage's heads on the final norm's output m->lnf: the LM head (BERT's
 * through its lm transform) into m->loss, the pooled head (BERT's binary head, a
 * classification head) into m->bin_loss, or a token (m->loss) or span head
 * (m->bin_loss). */
static pl_status heads_fwd(pl_model *m)
{
    pl_status st = PL_OK;
    const int64_t B = m->B, T = m->T, N = m->N, C = m->C;
    const pl_head_set hs = pl_model_head_set(&m->cfg);
    pl_head_acts *h = &m->mb[m->cur].head;
    const float *x = m->lnf; /* the output layer's input */
    const pl_head_drop hd = head_drop(m, &hs);
    if (hs.lm) {
        PL_TRY(pl_head_lm_fwd(m->gemm, &m->p.head, h, m->lnf, N, C, m->cfg.ln_eps));
        x = h->out;
    }
    if (m->cfg.head.lm_head && m->cfg.lm_logits == PL_LM_LOGITS_FUSED)
        PL_TRY(lm_fused(m, x, m->training));
    else if (m->cfg.head.lm_head)
        PL_TRY(pl_tp_lmhead_loss(m->tp, m->gemm, m->loss, m->lse, x, m->p.out_w, m->p.out_b,
                                 m->targets, N, C, m->v0, m->Vl, m->lm_chunk, m->lm_ws,
                                 m->rows));
    if (hs.pooled && hs.regression)
        PL_TRY(pl_head_regress_fwd(m->gemm, &m->p.head, h, m->lnf, m->labels, &hd, m->bin_loss,
                                   m->head_ws, B, T, C));
    else if (hs.pooled)
        PL_TRY(pl_head_pooled_fwd(m->gemm, &m->p.head, h, m->lnf, m->labels, &hd, m->bin_loss,
                                  m->head_ws, B, T, C, hs.pooled));
    if (hs.token && hs.span)
        PL_TRY(pl_head_span_fwd(m->gemm, &m->p.head, h, m->lnf, m->labels, &hd, m->bin_loss, B,
                                T, C));
    else if (hs.token)
        PL_TRY(pl_head_token_fwd(m->gemm, &m->p.head, h, m->lnf, m->targets, &hd, m->loss,
                                 m->head_ws, N, C, hs.token));
fail:
    return st;
}

/* Megatron's LanguageModelEmbedding: token types added to the word and
 * position embeddings (before dropout), on this rank's rows x (Nl, C). */
static pl_status tokentype_fwd(pl_model *m, float *x)
{
    const int64_t C = m->C, Nl = m->blk.Nl, n0 = m->blk.sp ? m->blk.n0 : 0;
    for (int64_t i = 0; i < Nl; i++) {
        const int32_t t = m->types[n0 + i];
        if (t < 0 || t >= m->cfg.head.tokentypes)
            return pl_errorf(PL_ERR_ARG, "token type %d at position %lld of the micro-batch: "
                             "expected 0..%d", (int)t, (long long)(n0 + i),
                             m->cfg.head.tokentypes - 1);
        pl_cpu_add(x + i * C, x + i * C, m->p.tte + t * C, C);
    }
    return PL_OK;
}

/* x (n) *= a. */
static void scale(float *x, int64_t n, float a)
{
    for (int64_t i = 0; i < n; i++)
        x[i] *= a;
}

/* The relative position bias table's rule for this stack. */
static pl_nn_relbias_spec relpos_spec(const pl_model *m)
{
    pl_nn_relbias_spec s = {m->cfg.rel_buckets, m->cfg.rel_max_distance,
                            m->cfg.block.mask != PL_MASK_CAUSAL};
    return s;
}

/* The stack's bias vectors of this rank's heads from its table. */
static void relpos_fill(pl_model *m)
{
    const pl_nn_relbias_spec s = relpos_spec(m);
    pl_nn_relbias_fill(m->blk.rel_bias, m->p.relpos, &s, m->cfg.heads, m->blk.tp_rank * m->blk.NHl,
                       m->blk.NHl, m->blk.rel_rows);
}

/* After the layers' backward: the bias vectors' gradient into the table's,
 * this rank's heads' columns, summed over the TP group (each rank holds the
 * whole table, as Megatron's). */
static pl_status relpos_grad(pl_model *m)
{
    const pl_nn_relbias_spec s = relpos_spec(m);
    const int64_t n = m->cfg.rel_buckets * m->cfg.heads;
    memset(m->rel_dtable, 0, (size_t)n * sizeof(float));
    pl_nn_relbias_grad(m->rel_dtable, m->blk.drel_bias, &s, m->cfg.heads,
                       m->blk.tp_rank * m->blk.NHl, m->blk.NHl, m->blk.rel_rows);
    if (m->blk.tp_size > 1) {
        pl_status st = pl_comm_allreduce_f32(m->tp, m->rel_dtable, n, PL_COMM_SUM);
        if (st)
            return st;
    }
    pl_cpu_add(m->d.relpos, m->d.relpos, m->rel_dtable, n);
    return PL_OK;
}

/* transformers' BART with scale_embedding: e (this rank's rows, the word embeddings)
 * times sqrt(C), then the positions added. */
static void scaled_positions(pl_model *m, float *e)
{
    const int64_t C = m->C, Nl = m->blk.Nl, n0 = m->blk.sp ? m->blk.n0 : 0;
    const float s = sqrtf((float)C);
    for (int64_t i = 0; i < Nl; i++) {
        float *row = e + i * C;
        const float *pos = m->p.wpe + (n0 + i) % m->T * C;
        for (int64_t k = 0; k < C; k++)
            row[k] = row[k] * s + pos[k];
    }
}

pl_status pl_model_forward(pl_model *m)
{
    pl_status st = PL_OK;
    const int64_t B = m->B, T = m->T, C = m->C, L = m->stage.nl;
    const int64_t l0 = m->stage.l0 + m->layer_id0; /* layer numbers of the dropout masks */
    set_dropout(m);
    if (m->stage.first) {
        if (m->fetch)
            PL_TRY(m->fetch(m->fetch_ctx, -1, 0));
        const pl_model_mb *mb = &m->mb[m->cur];
        float *e = mb->emb ? mb->emb : m->x0; /* post-LN: the sum, then its norm into x0 */
        const int scaled = m->cfg.scale_embedding;
        PL_TRY(pl_tp_embedding_fwd(m->tp, m->blk.sp, e, m->blk.norm_out, m->tokens, m->p.wte,
                                   scaled ? NULL : m->p.wpe, B, T, C, m->v0, m->Vl));
        if (scaled)
            scaled_positions(m, e);
        if (m->types)
            PL_TRY(tokentype_fwd(m, e));
        if (mb->emb) /* transformers' BertEmbeddings: LayerNorm, then dropout */
            pl_nn_norm_fwd(m->cfg.block.norm, m->x0, mb->emb_mean, mb->emb_rstd, e, m->p.eln_w,
                           m->p.eln_b, m->blk.Nl, C, m->cfg.ln_eps);
        embedding_dropout(m, m->x0);
    }
    if (m->cfg.block.pos == PL_POS_RELATIVE)
        relpos_fill(m);
    for (int64_t j = 0; j < L; j++) {
        if (m->fetch)
            PL_TRY(m->fetch(m->fetch_ctx, j, 0));
        PL_TRY(pl_block_fwd(&m->blk, &m->w[j], &m->acts[j], layer_input(m, j), l0 + j));
    }
    if (!m->stage.last)
        return PL_OK;
    if (pl_model_post_ln(&m->cfg)) { /* no final norm: the heads take the last layer's output */
        memcpy(m->lnf + (m->blk.sp ? m->blk.n0 * C : 0), layer_input(m, L),
               (size_t)(m->blk.Nl * C) * sizeof(float));
        if (m->blk.sp)
            PL_TRY(pl_tp_gather_rows(m->tp, m->lnf, m->N, C));
    } else {
        PL_TRY(pl_block_norm_fwd(&m->blk, m->lnf, m->lnf_mean, m->lnf_rstd, layer_input(m, L),
                                 m->p.lnf_w, m->p.lnf_b));
    }
    if (m->cfg.output_scale > 0 && m->cfg.head.lm_head)
        scale(m->lnf, m->N * C, m->cfg.output_scale);
    double t0 = pl_time_now();
    st = heads_fwd(m);
    m->prof.lmhead += pl_time_now() - t0;
fail:
    return st;
}

/* The last stage's heads backward, from dloss (and dbin): the gradient of the
 * final norm's output into dln (N, C), zero on entry: whole on every rank when
 * the model has BERT's heads, else as the LM head leaves it (this rank's rows
 * first under sp). */
static pl_status heads_bwd(pl_model *m, float *dln)
{
    pl_status st = PL_OK;
    const int64_t N = m->N, C = m->C;
    const pl_head_set hs = pl_model_head_set(&m->cfg);
    const pl_head_acts *h = &m->mb[m->cur].head;
    const int whole = hs.lm || hs.pooled || hs.token;
    const pl_head_drop hd = head_drop(m, &hs);
    float *dx = hs.lm ? m->dhead : dln;
    const float *x = hs.lm ? h->out : m->lnf;
    if (hs.lm)
        memset(dx, 0, (size_t)(N * C) * sizeof(float));
    if (m->cfg.head.lm_head && m->cfg.lm_logits == PL_LM_LOGITS_FUSED) {
        pl_model_mb *mb = &m->mb[m->cur];
        if (!mb->lm_grad)
            PL_TRY(lm_fused(m, x, 1));
        mb->lm_grad = 0; /* spent: a second backward would add the gradients again */
        memcpy(dx, mb->dlm, (size_t)(N * C) * sizeof(float));
    } else if (m->cfg.head.lm_head)
        PL_TRY(pl_tp_lmhead_bwd(m->tp, whole ? 0 : m->blk.sp, m->gemm, dx, m->d.out_w, m->d.out_b,
                                x, m->p.out_w, m->p.out_b, m->targets, m->lse, m->dloss, N, C,
                                m->v0, m->Vl, m->lm_chunk, m->lm_ws,
                                m->cfg.lm_logits == PL_LM_LOGITS_KEEP));
    if (hs.lm)
        PL_TRY(pl_head_lm_bwd(m->gemm, &m->p.head, &m->d.head, h, m->lnf, m->dhead, dln,
                              m->head_ws, N, C));
    if (hs.pooled && hs.regression)
        PL_TRY(pl_head_regress_bwd(m->gemm, &m->p.head, &m->d.head, h, m->lnf, m->labels, &hd,
                                   m->dbin, dln, m->head_ws, m->B, m->T, C));
    else if (hs.pooled)
        PL_TRY(pl_head_pooled_bwd(m->gemm, &m->p.head, &m->d.head, h, m->lnf, m->labels, &hd,
                                  m->dbin, dln, m->head_ws, m->B, m->T, C, hs.pooled));
    if (hs.token && hs.span)
        PL_TRY(pl_head_span_bwd(m->gemm, &m->p.head, &m->d.head, h, m->lnf, m->labels, &hd,
                                m->dbin, dln, m->head_ws, m->B, m->T, C));
    else if (hs.token)
        PL_TRY(pl_head_token_bwd(m->gemm, &m->p.head, &m->d.head, h, m->lnf, m->targets, &hd,
                                 m->dloss, dln, m->head_ws, N, C, hs.token));
fail:
    return st;
}

/* The backward of the current micro-batch, whole (split = 0) or its input
 * half (split = 1: each layer's pl_block_bwd_input, no layer is final yet). */
static pl_status model_backward(pl_model *m, pl_grad_ready_fn ready, void *ctx, int split)
{
    pl_status st = PL_OK;
    const int64_t B = m->B, T = m->T, N = m->N, Nl = m->blk.Nl, C = m->C;
    const int64_t L = m->stage.nl, l0 = m->stage.l0 + m->layer_id0;
    const int selective = m->cfg.recompute.granularity == PL_RECOMPUTE_SELECTIVE;
    const pl_model_mb *mb = &m->mb[m->cur];
    set_dropout(m);
    if (m->stage.last) {
        float *dln = m->blk.dnorm;
        memset(m->dres, 0, (size_t)(Nl * C) * sizeof(float));
        memset(dln, 0, (size_t)(N * C) * sizeof(float));
        double t0 = pl_time_now();
        const pl_head_set hs = pl_model_head_set(&m->cfg);
        const int headless = !m->cfg.head.lm_head && !hs.pooled && !hs.token;
        if (headless && !m->dlnf_in)
            return pl_errorf(PL_ERR_INTERNAL, "backward of a model without heads needs the "
                             "gradient of its output (dlnf_in)");
        if (!headless)
            PL_TRY(heads_bwd(m, dln));
        if (m->cfg.output_scale > 0 && m->cfg.head.lm_head)
            scale(dln, N * C, m->cfg.output_scale);
        m->prof.lmhead += pl_time_now() - t0;
        /* the heads leave the final norm's output gradient whole; the LM head
         * alone, under sp, this rank's rows first */
        const int whole = hs.lm || hs.pooled || hs.token;
        const float *dy = headless ? m->dlnf_in : whole && m->blk.sp ? dln + m->blk.n0 * C : dln;
        if (pl_model_post_ln(&m->cfg))
            pl_cpu_add(m->dres, m->dres, dy, Nl * C);
        else
            PL_TRY(pl_block_norm_bwd(&m->blk, m->dres, m->d.lnf_w, m->d.lnf_b, dy,
                                     layer_input(m, L), m->p.lnf_w, m->lnf_mean, m->lnf_rstd));
    } else {
        memcpy(m->dres, mb->dout, (size_t)(Nl * C) * sizeof(float));
    }
    if (m->cfg.block.pos == PL_POS_RELATIVE)
        memset(m->blk.drel_bias, 0,
               (size_t)(m->blk.NHl * (2 * m->blk.rel_rows - 1)) * sizeof(float));
    for (int64_t j = L - 1; j >= 0; j--) {
        const int64_t g = m->group_start[j];
        if (g >= 0 && (j + 1 == L || m->group_start[j + 1] != g)) {
            /* full recompute: rerun the group's forward from its checkpointed
             * input (ZeRO-3 gathers each layer again through fetch) */
            for (int64_t k = g; k <= j; k++) {
                if (m->fetch)
                    PL_TRY(m->fetch(m->fetch_ctx, k, 0));
                PL_TRY(pl_block_fwd(&m->blk, &m->w[k], &m->acts[k], layer_input(m, k), l0 + k));
            }
        }
        if (m->fetch)
            PL_TRY(m->fetch(m->fetch_ctx, j, split ? 2 : 1));
        if (split) {
            PL_TRY(pl_block_bwd_input(&m->blk, &m->w[j], &m->g[j], &m->acts[j], layer_input(m, j),
                                      m->dres, l0 + j));
            continue;
        }
        PL_TRY(pl_block_bwd(&m->blk, &m->w[j], &m->g[j], &m->acts[j], layer_input(m, j), m->dres,
                            selective, l0 + j));
        if (ready)
            PL_TRY(ready(ctx, m->layer_offset[j], m->layer_count[j]));
    }
    if (m->cfg.block.pos == PL_POS_RELATIVE) /* a split backward's input half has it all */
        PL_TRY(relpos_grad(m));
    if (!m->stage.first) {
        memcpy(mb->dx0, m->dres, (size_t)(Nl * C) * sizeof(float));
        return PL_OK;
    }
    embedding_dropout(m, m->dres);
    float *dx0 = m->dres; /* whole for the embeddings' gradients: gathered under sp */
    if (mb->emb) { /* post-LN: through the embeddings' norm, into this rank's rows of dnorm */
        dx0 = m->blk.dnorm;
        float *de = dx0 + (m->blk.sp ? m->blk.n0 * C : 0);
        memset(de, 0, (size_t)(Nl * C) * sizeof(float));
        PL_TRY(pl_block_norm_bwd(&m->blk, de, m->d.eln_w, m->d.eln_b, m->dres, mb->emb,
                                 m->p.eln_w, mb->emb_mean, mb->emb_rstd));
        if (m->blk.sp)
            PL_TRY(pl_tp_gather_rows(m->tp, dx0, N, C));
    } else if (m->blk.sp) {
        dx0 = m->blk.dnorm;
        memcpy(dx0 + m->blk.n0 * C, m->dres, (size_t)(Nl * C) * sizeof(float));
        PL_TRY(pl_tp_gather_rows(m->tp, dx0, N, C));
    }
    if (m->cfg.scale_embedding) { /* the positions' gradient, then the words' times sqrt(C) */
        if (m->d.wpe)
            pl_cpu_pos_embedding_bwd(m->d.wpe, dx0, B, T, C);
        const float s = sqrtf((float)C);
        for (int64_t i = 0; i < N * C; i++)
            dx0[i] *= s;
    }
    pl_tp_embedding_bwd(m->d.wte, m->cfg.scale_embedding ? NULL : m->d.wpe, dx0, m->tokens, B, T,
                        C, m->v0, m->Vl);
    if (m->types) /* each rank's token-type gradient whole, as its word embeddings' */
        pl_cpu_embedding_bwd(m->d.tte, dx0, m->types, N, C, 0, m->cfg.head.tokentypes);
fail:
    return st;
}

pl_status pl_model_backward(pl_model *m, pl_grad_ready_fn ready, void *ctx)
{
    return model_backward(m, ready, ctx, 0);
}

pl_status pl_model_backward_input(pl_model *m)
{
    if (!m->stage.split_bwd)
        return pl_errorf(PL_ERR_INTERNAL, "pl_model_backward_input: the stage was not planned "
                         "for a split backward");
    return model_backward(m, NULL, NULL, 1);
}

pl_status pl_model_backward_weight(pl_model *m, pl_grad_ready_fn ready, void *ctx)
{
    pl_status st = PL_OK;
    const int64_t L = m->stage.nl, l0 = m->stage.l0 + m->layer_id0;
    if (!m->stage.split_bwd)
        return pl_errorf(PL_ERR_INTERNAL, "pl_model_backward_weight: the stage was not planned "
                         "for a split backward");
    set_dropout(m);
    for (int64_t j = L - 1; j >= 0; j--) {
        if (m->fetch)
            PL_TRY(m->fetch(m->fetch_ctx, j, 1));
        PL_TRY(pl_block_bwd_weight(&m->blk, &m->w[j], &m->g[j], &m->acts[j], layer_input(m, j),
                                   l0 + j));
        if (ready)
            PL_TRY(ready(ctx, m->layer_offset[j], m->layer_count[j]));
    }
fail:
    return st;
}
