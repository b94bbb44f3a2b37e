/* KV-cached single-token forward through the blocks (on a TP group or
 * alone), and sampling. */
#include "model/generate.h"

#include "base/alloc.h"
#include "base/log.h"
#include "model/spec.h"
#include "nn/plan.h"
#include "nn/relbias.h"
#include "parallel/tp/layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Lays out caches, one layer's activations and the block scratch on p. */
static void plan(pl_generator *g, pl_plan *p)
{
    const pl_model_config *c = &g->cfg;
    const int64_t L = c->num_layers, C = c->hidden, P = c->max_positions, R = g->rows;
    const int64_t cache = P * g->blk.Gl * g->blk.dims.HS;
    g->k_cache = pl_plan_take(p, L * cache);
    g->v_cache = pl_plan_take(p, L * cache);
    if (c->block.cross_attention)
        g->xkv_cache = pl_plan_take(p, L * g->blk.Nk * 2 * g->blk.Al);
    memset(&g->acts, 0, sizeof g->acts);
    pl_block_take_acts(&g->blk, p, &g->acts, 1, 1);
    g->blk.norm_out = pl_plan_take(p, R * C);
    g->blk.dnorm = pl_plan_take(p, R * C);
    pl_block_take_scratch(&g->blk, p);
    pl_block_take_rope(&g->blk, p, &c->rope);
    g->x = pl_plan_take(p, R * C);
    g->lnf = pl_plan_take(p, R * C);
    g->lnf_mean = pl_plan_take(p, R);
    g->lnf_rstd = pl_plan_take(p, R);
    g->logits = pl_plan_take(p, R * c->padded_vocab); /* whole: gathered over TP */
    g->gathered = pl_plan_take(p, R * c->padded_vocab);
    g->scores = pl_plan_take(p, g->blk.NHl * P);
}

/* Creates the GEMM primitives of a step's shapes (1 to g->rows rows): the four
 * linear layers of a block on this rank's slices and the LM head's vocabulary
 * slice; with cross-attention its query and output projections, and the
 * projection of the encoder output (Tk rows) into keys and values. */
static pl_status prepare(const pl_generator *g, int64_t head_cols, int64_t r)
{
    const pl_block_ctx *b = &g->blk;
    const int64_t C = b->dims.C;
    const int64_t in[8] = {C, b->Al, C, b->Fl, C, C, b->Al, C};
    const int64_t out[8] = {b->QKVl, C, b->F1l, C, head_cols, b->Al, C, 2 * b->Al};
    const int n = g->cfg.block.cross_attention ? (r == 1 ? 8 : 7) : 5;
    pl_status st = PL_OK;
    for (int k = 0; k < n && !st; k++) { /* y (rows, out) = x (rows, in) . W^T */
        const int64_t m = k == 7 ? b->Nk : r;
        st = pl_gemm_prepare(g->gemm, 0, 1, m, out[k], in[k], in[k], in[k], out[k], 0.0f);
    }
    return st;
}


/* The block context's rows for a step of n (planned for g->rows). */
static void set_rows(pl_generator *g, int64_t n)
{
    g->blk.B = g->blk.N = g->blk.Nl = n;
}

/* Columns of the LM head's GEMM: this rank's slice of the padded vocabulary
 * (all-gathered in equal blocks), or alone the true vocabulary (the padding
 * rows' logits are never read). */
static int64_t head_cols(const pl_generator *g)
{
    return g->tp ? g->Vl : g->cfg.vocab_size;
}

pl_status pl_generator_prepare_rows(pl_generator *g, int64_t n)
{
    if (n < 1 || n > g->rows)
        return pl_errorf(PL_ERR_ARG, "steps of %lld rows: the generator holds 1 to %lld",
                         (long long)n, (long long)g->rows);
    return prepare(g, head_cols(g), n);
}

pl_status pl_generator_init(pl_generator *g, const pl_model_config *cfg, const pl_registry *reg,
                            const float *params, pl_comm *tp, pl_gemm *gemm)
{
    return pl_generator_init_rows(g, cfg, reg, params, tp, gemm, 1);
}

pl_status pl_generator_init_rows(pl_generator *g, const pl_model_config *cfg,
                                 const pl_registry *reg, const float *params, pl_comm *tp,
                                 pl_gemm *gemm, int64_t rows)
{
    pl_status st = PL_OK;
    memset(g, 0, sizeof *g);
    if (rows < 1)
        return pl_errorf(PL_ERR_ARG, "generation: %lld rows a step: need at least 1",
                         (long long)rows);
    if (cfg->block.mask != PL_MASK_CAUSAL)
        return pl_errorf(PL_ERR_UNSUPPORTED, "generation needs a causal model: a %s model attends "
                         "both ways and has nothing to continue", pl_family_get(cfg->family)->name);
    const int tps = tp ? tp->size : 1, tpr = tp ? tp->rank : 0;
    if (reg->tp_size != tps || reg->tp_rank != tpr)
        return pl_errorf(PL_ERR_INTERNAL, "generation: the parameters are laid out for TP rank %d "
                         "of %d, the TP group has this process as rank %d of %d",
                         reg->tp_rank, reg->tp_size, tpr, tps);
    /* the sampler reads vocab_size logits of the padded_vocab computed: a config
     * read from a checkpoint is validated (ckpt/manifest.h), this is the last line */
    if (cfg->vocab_size < 1 || cfg->vocab_size > cfg->padded_vocab)
        return pl_errorf(PL_ERR_ARG, "generation: the vocabulary (%lld) must be between 1 and the "
                         "padded vocabulary (%lld rows)", (long long)cfg->vocab_size,
                         (long long)cfg->padded_vocab);
    if (cfg->padded_vocab % tps)
        return pl_errorf(PL_ERR_ARG, "generation: the padded vocabulary (%lld rows) does not "
                         "divide by --tensor-model-parallel-size %d",
                         (long long)cfg->padded_vocab, tps);
    g->cfg = *cfg;
    g->gemm = gemm;
    g->tp = tps > 1 ? tp : NULL;
    g->Vl = cfg->padded_vocab / tps;
    g->v0 = g->Vl * tpr;
    const pl_block_dims dims = pl_model_block_dims(cfg);
    const int64_t Tk = cfg->block.cross_attention ? cfg->cross_length : 0;
    g->rows = rows;
    PL_TRY(pl_block_ctx_init(&g->blk, &cfg->block, &dims, cfg->ln_eps, rows, 1, Tk, g->tp, tpr, 0,
                             gemm, &g->prof));
    g->blk.Nk = Tk; /* the rows' sources have their own caches of Tk keys (not rows x Tk) */
    g->blk.enc_len = &g->enc_len;
    g->blk.rope_rows = cfg->max_positions;
    g->blk.rel_rows = cfg->max_positions;
    g->blk.softmax_scale = cfg->softmax_scale;
    const int64_t L = cfg->num_layers;
    g->w = pl_calloc((size_t)L, sizeof *g->w);
    g->kl = pl_calloc((size_t)(2 * rows), sizeof *g->kl);
    g->xl = pl_calloc((size_t)rows, sizeof *g->xl);
    pl_plan count = {NULL, 0};
    plan(g, &count);
    size_t bytes;
    if (pl_mul_size(count.used, sizeof(float), &bytes) || pl_add_size(bytes, 64, &bytes)) {
        st = pl_errorf(PL_ERR_NOMEM, "the KV cache overflows");
        goto fail;
    }
    g->mem = pl_calloc(1, bytes);
    if (!g->w || !g->mem || !g->kl || !g->xl) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the KV cache (%.1f MiB)",
                       (double)bytes / (1 << 20));
        goto fail;
    }
    pl_plan at = {(float *)(((uintptr_t)g->mem + 63) & ~(uintptr_t)63), 0};
    plan(g, &at);
    g->vl = g->kl + rows;
    pl_block_rope_fill(&g->blk, &cfg->rope);
    for (int64_t l = 0; l < L; l++) {
        int64_t lo, hi;
        PL_TRY(pl_model_layer_bind(reg, cfg, params, l, &g->w[l], &lo, &hi));
    }
    pl_model_top top;
    PL_TRY(pl_model_top_bind(reg, cfg, params, NULL, NULL, 0, &top));
    g->wte = top.wte, g->wpe = top.wpe, g->lnf_w = top.lnf_w, g->lnf_b = top.lnf_b;
    g->eln_w = top.eln_w, g->eln_b = top.eln_b;
    g->out_w = top.out_w;
    g->out_b = top.out_b;
    if (!g->wte || !(pl_model_post_ln(cfg) ? g->eln_w : g->lnf_w) || !g->out_w ||
        (cfg->block.pos == PL_POS_LEARNED && !g->wpe) ||
        (cfg->block.pos == PL_POS_RELATIVE && !top.relpos)) {
        st = pl_errorf(PL_ERR_INTERNAL, "embedding, final norm, output layer or relative position "
                       "table missing");
        goto fail;
    }
    if (cfg->block.pos == PL_POS_RELATIVE) { /* causal: the decoder's one-way buckets */
        const pl_nn_relbias_spec rs = {cfg->rel_buckets, cfg->rel_max_distance, 0};
        pl_nn_relbias_fill(g->blk.rel_bias, top.relpos, &rs, cfg->heads,
                           (int64_t)tpr * g->blk.NHl, g->blk.NHl, g->blk.rel_rows);
    }
    PL_TRY(prepare(g, head_cols(g), 1));
    if (rows > 1)
        PL_TRY(prepare(g, head_cols(g), rows));
    set_rows(g, 1);
    return PL_OK;
fail:
    pl_generator_free(g);
    return st;
}

pl_status pl_generator_set_source(pl_generator *g, const float *enc, int64_t len)
{
    pl_status st = PL_OK;
    const int64_t L = g->cfg.num_layers, n = g->blk.Nk * 2 * g->blk.Al;
    if (!g->xkv_cache)
        return pl_errorf(PL_ERR_INTERNAL, "pl_generator_set_source: not a decoder with "
                         "cross-attention");
    if (len < 1 || len > g->blk.Nk)
        return pl_errorf(PL_ERR_ARG, "a source of %lld tokens: the encoder holds 1 to %lld",
                         (long long)len, (long long)g->blk.Nk);
    g->blk.enc = enc;
    g->enc_len = (int32_t)len;
    for (int64_t l = 0; l < L; l++)
        PL_TRY(pl_block_cross_kv(&g->blk, &g->w[l], g->xkv_cache + l * n));
fail:
    return st;
}

void pl_generator_free(pl_generator *g)
{
    pl_free(g->w);
    pl_free(g->kl);
    pl_free(g->xl);
    pl_free(g->mem);
    memset(g, 0, sizeof *g);
}

pl_status pl_generator_step(pl_generator *g, int32_t token, int64_t pos)
{
    const pl_model_config *c = &g->cfg;
    const int64_t C = c->hidden, P = c->max_positions, L = c->num_layers;
    const int64_t cache = P * g->blk.Gl * g->blk.dims.HS;
    if (pos < 0 || pos >= P)
        return pl_errorf(PL_ERR_ARG, "position %lld is beyond --max-position-embeddings %lld",
                         (long long)pos, (long long)P);
    if (token < 0 || token >= c->vocab_size)
        return pl_errorf(PL_ERR_ARG, "token id %d is outside the vocabulary (%lld)", token,
                         (long long)c->vocab_size);
    pl_status st = PL_OK;
    set_rows(g, 1);
    /* x = wte[token] (the rank holding the row; summed over TP) + wpe[pos]: the
     * position table from row pos is the table of a one-token sequence */
    const float *wpe = g->wpe ? g->wpe + pos * C : NULL;
    PL_TRY(pl_tp_embedding_fwd(g->tp, 0, g->x, g->x, &token, g->wte,
                               c->scale_embedding ? NULL : wpe, 1, 1, C, g->v0, g->Vl));
    for (int64_t k = 0; c->scale_embedding && k < C; k++) /* BART's scale_embedding */
        g->x[k] = g->x[k] * sqrtf((float)C) + (wpe ? wpe[k] : 0.0f);
    if (g->eln_w) { /* post-LN: the embeddings' norm (lnf is free until the end) */
        pl_nn_norm_fwd(c->block.norm, g->lnf, g->lnf_mean, g->lnf_rstd, g->x, g->eln_w, g->eln_b,
                       1, C, c->ln_eps);
        memcpy(g->x, g->lnf, (size_t)C * sizeof(float));
    }
    const float *x = g->x;
    for (int64_t l = 0; l < L; l++) {
        /* every layer reuses one set of activations: its input is the previous
         * layer's output, copied out first */
        if (l > 0) {
            memcpy(g->x, g->acts.res2, (size_t)C * sizeof(float));
            x = g->x;
        }
        const float *xkv = g->xkv_cache ? g->xkv_cache + l * g->blk.Nk * 2 * g->blk.Al : NULL;
        PL_TRY(pl_block_decode(&g->blk, &g->w[l], &g->acts, x, g->k_cache + l * cache,
                               g->v_cache + l * cache, xkv, pos, g->scores, l));
    }
    if (g->eln_w) /* post-LN: no final norm */
        memcpy(g->lnf, L ? g->acts.res2 : g->x, (size_t)C * sizeof(float));
    else
        pl_nn_norm_fwd(c->block.norm, g->lnf, g->lnf_mean, g->lnf_rstd, L ? g->acts.res2 : g->x,
                       g->lnf_w, g->lnf_b, 1, C, c->ln_eps);
    for (int64_t i = 0; c->output_scale > 0 && i < C; i++)
        g->lnf[i] *= c->output_scale;
    /* logits[v0, v0 + n) = lnf (1, C) . out_w^T, out_w (Vl, C) this rank's rows */
    const int64_t n = head_cols(g);
    double t0 = pl_time_now();
    PL_TRY(pl_gemm_run(g->gemm, 0, 1, 1, n, C, g->lnf, C, g->out_w, C, 0.0f, g->logits + g->v0, n));
    if (g->out_b)
        pl_cpu_add(g->logits + g->v0, g->logits + g->v0, g->out_b, n);
    if (g->tp)
        PL_TRY(pl_comm_allgather_f32(g->tp, g->logits + g->v0, g->logits, g->Vl));
    g->prof.lmhead += pl_time_now() - t0;
fail:
    return st;
}

/* The LM head on the n rows of g->lnf: logits (n, padded_vocab), this rank's
 * slice computed (rows of cols floats: a GEMM whose output rows are strided differs
 * in its last bits from the one-row GEMM here) and, under TP, all-gathered. */
static pl_status rows_head(pl_generator *g, int64_t n)
{
    const int64_t C = g->cfg.hidden, Vp = g->cfg.padded_vocab, cols = head_cols(g);
    pl_status st = PL_OK;
    double t0 = pl_time_now();
    float *out = g->gathered + (g->tp ? g->tp->rank * n * g->Vl : 0);
    PL_TRY(pl_gemm_run(g->gemm, 0, 1, n, cols, C, g->lnf, C, g->out_w, C, 0.0f, out, cols));
    for (int64_t r = 0; g->out_b && r < n; r++)
        pl_cpu_add(out + r * cols, out + r * cols, g->out_b, cols);
    for (int64_t r = 0; !g->tp && r < n; r++)
        memcpy(g->logits + r * Vp, out + r * cols, (size_t)cols * sizeof(float));
    if (g->tp) { /* (tp, n, Vl) gathered, then row r's slices side by side */
        PL_TRY(pl_comm_allgather_f32(g->tp, out, g->gathered, n * g->Vl));
        for (int64_t k = 0; k < g->tp->size; k++)
            for (int64_t r = 0; r < n; r++)
                memcpy(g->logits + r * Vp + k * g->Vl, g->gathered + (k * n + r) * g->Vl,
                       (size_t)g->Vl * sizeof(float));
    }
    g->prof.lmhead += pl_time_now() - t0;
fail:
    return st;
}

pl_status pl_generator_step_rows(pl_generator *g, int64_t n, const int32_t *tokens,
                                 const int64_t *pos, float *const *k, float *const *v,
                                 const float *const *xkv, const int32_t *enc_len)
{
    const pl_model_config *c = &g->cfg;
    const int64_t C = c->hidden, P = c->max_positions, L = c->num_layers;
    const int64_t cache = P * g->blk.Gl * g->blk.dims.HS, nx = g->blk.Nk * 2 * g->blk.Al;
    if (n < 1 || n > g->rows)
        return pl_errorf(PL_ERR_ARG, "a step of %lld rows: the generator holds 1 to %lld",
                         (long long)n, (long long)g->rows);
    if ((xkv != NULL) != (c->block.cross_attention != 0) || (xkv && !enc_len))
        return pl_errorf(PL_ERR_INTERNAL, "pl_generator_step_rows: the cross-attention caches "
                         "and source lengths go with a decoder, and only with one");
    for (int64_t r = 0; r < n; r++) {
        if (pos[r] < 0 || pos[r] >= P)
            return pl_errorf(PL_ERR_ARG, "row %lld: position %lld is beyond "
                             "--max-position-embeddings %lld", (long long)r, (long long)pos[r],
                             (long long)P);
        if (tokens[r] < 0 || tokens[r] >= c->vocab_size)
            return pl_errorf(PL_ERR_ARG, "row %lld: token id %d is outside the vocabulary "
                             "(%lld)", (long long)r, tokens[r], (long long)c->vocab_size);
        if (xkv && (enc_len[r] < 1 || enc_len[r] > g->blk.Nk))
            return pl_errorf(PL_ERR_ARG, "row %lld: a source of %d tokens: the encoder holds 1 "
                             "to %lld", (long long)r, enc_len[r], (long long)g->blk.Nk);
    }
    pl_status st = PL_OK;
    set_rows(g, n);
    PL_TRY(pl_tp_embedding_fwd(g->tp, 0, g->x, g->x, tokens, g->wte, NULL, n, 1, C, g->v0, g->Vl));
    for (int64_t r = 0; g->wpe && r < n; r++) /* row r's position table entry */
        pl_cpu_add(g->x + r * C, g->x + r * C, g->wpe + pos[r] * C, C);
    for (int64_t l = 0; l < L; l++) {
        if (l > 0)
            memcpy(g->x, g->acts.res2, (size_t)(n * C) * sizeof(float));
        for (int64_t r = 0; r < n; r++) {
            g->kl[r] = k[r] + l * cache, g->vl[r] = v[r] + l * cache;
            if (xkv)
                g->xl[r] = xkv[r] + l * nx;
        }
        PL_TRY(pl_block_decode_rows(&g->blk, &g->w[l], &g->acts, g->x, g->kl, g->vl,
                                    xkv ? g->xl : NULL, enc_len, pos, g->scores, l));
    }
    pl_nn_norm_fwd(c->block.norm, g->lnf, g->lnf_mean, g->lnf_rstd, L ? g->acts.res2 : g->x,
                   g->lnf_w, g->lnf_b, n, C, c->ln_eps);
    st = rows_head(g, n);
fail:
    set_rows(g, 1);
    return st;
}

static int desc_by_value(const void *a, const void *b)
{
    const float *x = a, *y = b;
    return (x[0] < y[0]) - (x[0] > y[0]);
}

int32_t pl_sample_logits(const float *logits, int64_t V, double temperature, int64_t top_k,
                         double top_p, double u, float *scratch)
{
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best])
            best = i;
    if (temperature <= 0)
        return (int32_t)best;
    /* (value, id) pairs sorted by value, descending. */
    float *pairs = scratch;
    for (int64_t i = 0; i < V; i++) {
        pairs[2 * i] = (float)((logits[i] - logits[best]) / temperature);
        pairs[2 * i + 1] = (float)i;
    }
    qsort(pairs, (size_t)V, 2 * sizeof(float), desc_by_value);
    int64_t keep = top_k > 0 && top_k < V ? top_k : V;
    double total = 0;
    for (int64_t i = 0; i < keep; i++)
        total += exp(pairs[2 * i]);
    if (top_p < 1.0) { /* smallest prefix whose probability reaches top_p */
        double acc = 0;
        for (int64_t i = 0; i < keep; i++) {
            acc += exp(pairs[2 * i]) / total;
            if (acc >= top_p) {
                keep = i + 1;
                break;
            }
        }
        total = 0;
        for (int64_t i = 0; i < keep; i++)
            total += exp(pairs[2 * i]);
    }
    double r = u * total, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += exp(pairs[2 * i]);
        if (r <= acc)
            return (int32_t)pairs[2 * i + 1];
    }
    return (int32_t)pairs[2 * (keep - 1) + 1];
}
