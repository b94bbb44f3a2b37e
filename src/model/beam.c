/* Beam search over the KV-cached decoder steps (model/beam.h). */
#include "model/beam.h"

#include "base/alloc.h"

#include <math.h>
#include <string.h>

pl_status pl_beam_init(pl_beam *b, const pl_generator *g, const pl_beam_opts *opts)
{
    pl_status st = PL_OK;
    memset(b, 0, sizeof *b);
    const int64_t V = g->cfg.vocab_size, W = opts->width;
    PL_TRY(pl_beam_check_width(W, V));
    if (!isfinite(opts->length_penalty))
        return pl_errorf(PL_ERR_ARG, "--length-penalty %g: need a finite number",
                         opts->length_penalty);
    b->opts = *opts;
    b->W = W, b->V = V;
    b->P = g->cfg.max_positions;
    b->L = g->cfg.num_layers;
    b->cache = b->P * g->blk.Gl * g->blk.dims.HS;
    size_t floats, bytes;
    if (pl_mul_size((size_t)b->cache, (size_t)(2 * b->L * W), &floats) ||
        pl_mul_size(floats, sizeof(float), &bytes)) {
        st = pl_errorf(PL_ERR_NOMEM, "--beam-size %lld: the beams' KV caches overflow",
                       (long long)W);
        goto fail;
    }
    b->mem = pl_malloc(bytes);
    b->k = pl_calloc((size_t)(6 * W), sizeof *b->k);
    b->logp = pl_malloc((size_t)(W * V) * sizeof *b->logp);
    b->sum = pl_calloc((size_t)(2 * W + 2 * W + W + 1), sizeof *b->sum);
    b->hist = b->ints = pl_calloc((size_t)(2 * W * b->P + (W + 1) * b->P + 3 * W),
                                  sizeof *b->ints);
    b->cand_i = pl_calloc((size_t)(2 * W + W + 2 * (W + 1)), sizeof *b->cand_i);
    b->taken = pl_calloc((size_t)(2 * W), sizeof *b->taken);
    b->row_pos = pl_calloc((size_t)W, sizeof *b->row_pos);
    b->row_x = pl_calloc((size_t)W, sizeof *b->row_x);
    b->row_len = pl_calloc((size_t)W, sizeof *b->row_len);
    if (!b->mem || !b->k || !b->logp || !b->sum || !b->hist || !b->cand_i || !b->taken ||
        !b->row_pos || !b->row_x || !b->row_len) {
        st = pl_errorf(PL_ERR_NOMEM, "--beam-size %lld: out of memory for the beams (%.1f MiB "
                       "of KV caches)", (long long)W, (double)bytes / (1 << 20));
        goto fail;
    }
    b->v = b->k + W, b->k2 = b->v + W, b->v2 = b->k2 + W;
    b->row_k = b->v2 + W, b->row_v = b->row_k + W;
    for (int64_t i = 0; i < W; i++) {
        b->k[i] = b->mem + (2 * i) * b->L * b->cache;
        b->v[i] = b->mem + (2 * i + 1) * b->L * b->cache;
    }
    b->sum2 = b->sum + W, b->cand_s = b->sum2 + W, b->hyp_score = b->cand_s + 2 * W;
    b->hist2 = b->hist + W * b->P, b->hyp = b->hist2 + W * b->P;
    b->next = b->hyp + (W + 1) * b->P;
    b->row_tok = b->next + 2 * W;
    b->parent = b->cand_i + 2 * W, b->hyp_len = b->parent + W, b->order = b->hyp_len + W + 1;
    return PL_OK;
fail:
    pl_beam_free(b);
    return st;
}

void pl_beam_free(pl_beam *b)
{
    pl_free(b->mem);
    pl_free(b->k);
    pl_free(b->logp);
    pl_free(b->sum);
    pl_free(b->ints);
    pl_free(b->cand_i);
    pl_free(b->taken);
    pl_free(b->row_pos);
    pl_free(b->row_x);
    pl_free(b->row_len);
    memset(b, 0, sizeof *b);
}

/* The length penalty of a hypothesis of x tokens (the prefix counted). */
static double penalty(const pl_beam_opts *o, double x)
{
    return o->form == PL_BEAM_GNMT ? pow((5.0 + x) / 6.0, o->length_penalty)
                                   : pow(x, o->length_penalty);
}

/* BeamHypotheses.add: tokens (n, after the prefix) with sum; kept when fewer than
 * W are or it beats the worst kept, which is then dropped (equal scores: the
 * earliest). */
static void add_hyp(pl_beam *b, const int32_t *tokens, int64_t n, double sum)
{
    const double score = sum / penalty(&b->opts, (double)(b->m + n));
    if (b->n_hyp >= b->W && !(score > b->worst))
        return;
    const int64_t h = b->n_hyp++;
    memcpy(b->hyp + h * b->P, tokens, (size_t)n * sizeof *tokens);
    b->hyp_len[h] = n;
    b->hyp_score[h] = score;
    if (b->n_hyp <= b->W) {
        b->worst = score < b->worst ? score : b->worst;
        return;
    }
    int64_t m = 0; /* the first of the lowest, dropped; the worst is then the next lowest */
    for (int64_t i = 1; i < b->n_hyp; i++)
        if (b->hyp_score[i] < b->hyp_score[m])
            m = i;
    for (int64_t i = m; i + 1 < b->n_hyp; i++) {
        memcpy(b->hyp + i * b->P, b->hyp + (i + 1) * b->P, (size_t)b->P * sizeof *b->hyp);
        b->hyp_len[i] = b->hyp_len[i + 1];
        b->hyp_score[i] = b->hyp_score[i + 1];
    }
    b->n_hyp--;
    b->worst = b->hyp_score[0];
    for (int64_t i = 1; i < b->n_hyp; i++)
        b->worst = b->hyp_score[i] < b->worst ? b->hyp_score[i] : b->worst;
}

/* BeamHypotheses.is_done, early_stopping True or False. */
static int search_done(const pl_beam *b, double best_sum, int64_t cur_len)
{
    if (b->n_hyp < b->W)
        return 0;
    if (b->opts.early_stopping)
        return 1;
    return b->worst >= best_sum / penalty(&b->opts, (double)cur_len);
}

/* Row r of logp: log_softmax of the true vocabulary's logits, in double. */
static void log_softmax(double *out, const float *logits, int64_t V)
{
    double m = logits[0], s = 0;
    for (int64_t i = 1; i < V; i++)
        m = logits[i] > m ? logits[i] : m;
    for (int64_t i = 0; i < V; i++)
        s += exp((double)logits[i] - m);
    const double lse = m + log(s);
    for (int64_t i = 0; i < V; i++)
        out[i] = (double)logits[i] - lse;
}

/* The K best candidates (sum[beam] + logp[beam, token]) into cand_s / cand_i,
 * best first: a higher sum first, equal sums by the lower beam * V + token. */
static int64_t select_top(pl_beam *b, int64_t K)
{
    int64_t n = 0;
    for (int64_t beam = 0; beam < b->W; beam++) {
        const double *lp = b->logp + beam * b->V;
        for (int64_t t = 0; t < b->V; t++) {
            const double s = b->sum[beam] + lp[t];
            if (n == K && !(s > b->cand_s[K - 1]))
                continue; /* the index only grows: an equal sum ranks after */
            int64_t at = n < K ? n++ : K - 1;
            while (at > 0 && s > b->cand_s[at - 1]) {
                b->cand_s[at] = b->cand_s[at - 1];
                b->cand_i[at] = b->cand_i[at - 1];
                at--;
            }
            b->cand_s[at] = s;
            b->cand_i[at] = beam * b->V + t;
        }
    }
    return n;
}

/* Beam j's next cache is its parent's with positions [0, pos] valid: the first
 * child of a parent takes its buffers, the others copy into buffers of beams
 * without a child. At step 0 every beam is beam 0. */
static void reorder_caches(pl_beam *b, int64_t step, int64_t pos, int64_t row)
{
    const int64_t W = b->W;
    int *taken = b->taken, *own = b->taken + W;
    memset(taken, 0, (size_t)(2 * W) * sizeof *taken);
    for (int64_t j = 0; j < W; j++) {
        const int64_t p = step == 0 ? 0 : b->parent[j];
        if (!taken[p]) {
            taken[p] = own[j] = 1;
            b->k2[j] = b->k[p], b->v2[j] = b->v[p];
        }
    }
    int64_t spare = 0;
    const size_t bytes = (size_t)((pos + 1) * row) * sizeof(float);
    for (int64_t j = 0; j < W; j++) {
        if (own[j])
            continue;
        while (taken[spare])
            spare++;
        const int64_t p = step == 0 ? 0 : b->parent[j];
        b->k2[j] = b->k[spare], b->v2[j] = b->v[spare];
        spare++;
        for (int64_t l = 0; l < b->L; l++) {
            memcpy(b->k2[j] + l * b->cache, b->k[p] + l * b->cache, bytes);
            memcpy(b->v2[j] + l * b->cache, b->v[p] + l * b->cache, bytes);
        }
    }
    memcpy(b->k, b->k2, (size_t)W * sizeof *b->k);
    memcpy(b->v, b->v2, (size_t)W * sizeof *b->v);
}

/* Starts a search after prefix (n tokens): the prefix but its last token into beam
 * 0's cache (one row at a time through g's own single-row step), the sums, the
 * steps allowed. */
static pl_status beam_begin(pl_beam *b, pl_generator *g, const int32_t *prefix, int64_t n,
                            int32_t eos, int64_t max_new, int64_t P)
{
    pl_status st = PL_OK;
    float *const own_k = g->k_cache, *const own_v = g->v_cache;
    if (P > b->P)
        P = b->P;
    if (n < 1 || n > P)
        return pl_errorf(PL_ERR_ARG, "beam search: a prefix of %lld tokens: need 1 to %lld",
                         (long long)n, (long long)P);
    const int64_t room = P - n + 1; /* the steps' positions n - 1 .. P - 1 */
    b->steps = max_new < room ? (max_new > 0 ? max_new : 0) : room;
    b->n_hyp = 0;
    b->worst = 1e9;
    b->m = n;
    b->eos = eos;
    b->s = 0;
    b->done = 0;
    g->k_cache = b->k[0], g->v_cache = b->v[0];
    for (int64_t pos = 0; pos + 1 < n; pos++) /* the prefix into beam 0's cache */
        PL_TRY(pl_generator_step(g, prefix[pos], pos));
    for (int64_t i = 0; i < b->W; i++) {
        b->sum[i] = i ? -1e9 : 0.0;
        b->next[i] = prefix[n - 1];
    }
fail:
    g->k_cache = own_k, g->v_cache = own_v;
    return st;
}

/* Rows the search feeds at its current step (0 when it is over): beam 0 alone at
 * step 0 (the W beams are the same prefix), else the W beams. */
static int64_t beam_rows(const pl_beam *b)
{
    if (b->done || b->s >= b->steps)
        return 0;
    return b->s ? b->W : 1;
}

/* The results in order, once the search is over: best first; equal scores: the
 * later added first (sorted(), then pop()). */
static void beam_order(pl_beam *b)
{
    for (int64_t i = 0; i < b->n_hyp; i++) {
        int64_t at = i;
        while (at > 0 && b->hyp_score[b->order[at - 1]] <= b->hyp_score[i]) {
            b->order[at] = b->order[at - 1];
            at--;
        }
        b->order[at] = i;
    }
}

/* The current step from its rows' logits (row i at logits + i * ld, beam_rows(b)
 * of them): candidates, finished hypotheses, the next beams and their caches.
 * Closes the search (the open beams joining the finished when it ran out of
 * steps, then the results ordered) when it is over. */
static pl_status beam_advance(pl_beam *b, const float *logits, int64_t ld, int64_t row)
{
    const int64_t W = b->W, V = b->V, H = b->P, s = b->s, pos = b->m - 1 + s;
    const int64_t K = 2 * W < W * V ? 2 * W : W * V;
    for (int64_t i = 0; i < (s ? W : 1); i++)
        log_softmax(b->logp + i * V, logits + i * ld, V);
    if (s == 0) /* the W beams are the same prefix: beam 0's row */
        for (int64_t i = 1; i < W; i++)
            memcpy(b->logp + i * V, b->logp, (size_t)V * sizeof *b->logp);
    const int64_t nc = select_top(b, K);
    int64_t nb = 0;
    for (int64_t r = 0; r < nc && nb < W; r++) {
        const int64_t beam = b->cand_i[r] / V;
        const int32_t tok = (int32_t)(b->cand_i[r] % V);
        if (tok == b->eos) {
            if (r < W)
                add_hyp(b, b->hist + beam * H, s, b->cand_s[r]);
            continue;
        }
        b->parent[nb] = beam, b->next[nb] = tok, b->sum2[nb] = b->cand_s[r];
        nb++;
    }
    if (nb < W)
        return pl_errorf(PL_ERR_INTERNAL, "beam search: %lld of %lld beams continue at step %lld",
                         (long long)nb, (long long)W, (long long)s);
    b->done = search_done(b, b->cand_s[0], b->m + s);
    if (!b->done) {
        for (int64_t j = 0; j < W; j++) {
            memcpy(b->hist2 + j * H, b->hist + b->parent[j] * H, (size_t)s * sizeof *b->hist);
            b->hist2[j * H + s] = b->next[j];
        }
        int32_t *h = b->hist;
        b->hist = b->hist2, b->hist2 = h;
        memcpy(b->sum, b->sum2, (size_t)W * sizeof *b->sum);
        reorder_caches(b, s, pos, row);
        b->s++;
    }
    if (b->done || b->s >= b->steps) {
        if (!b->done) /* out of steps: the open beams join the finished */
            for (int64_t j = 0; j < W; j++)
                add_hyp(b, b->hist + j * H, b->s, b->sum[j]);
        beam_order(b);
    }
    return PL_OK;
}

/* Row i (0 <= i < beam_rows(b)) of the search's step into the step arrays at r. */
static void beam_put_row(const pl_beam *b, int64_t i, int32_t *tok, int64_t *pos, float **k,
                         float **v, int64_t r)
{
    tok[r] = b->next[i];
    pos[r] = b->m - 1 + b->s;
    k[r] = b->k[i], v[r] = b->v[i];
}

pl_status pl_beam_search(pl_beam *b, pl_generator *g, const int32_t *prefix, int64_t n,
                         int32_t eos, int64_t max_new, int64_t P)
{
    pl_status st = PL_OK;
    const int64_t row = g->blk.Gl * g->blk.dims.HS, Vp = g->cfg.padded_vocab;
    const int cross = g->cfg.block.cross_attention != 0;
    if (g->rows < b->W)
        return pl_errorf(PL_ERR_ARG, "beam search: %lld beams need a generator of as many rows "
                         "(it has %lld)", (long long)b->W, (long long)g->rows);
    PL_TRY(beam_begin(b, g, prefix, n, eos, max_new, P));
    if (b->steps == 0)
        beam_order(b);
    for (int64_t rows; (rows = beam_rows(b)) > 0;) { /* the beams as rows of one step */
        for (int64_t i = 0; i < rows; i++) {
            beam_put_row(b, i, b->row_tok, b->row_pos, b->row_k, b->row_v, i);
            b->row_x[i] = g->xkv_cache, b->row_len[i] = g->enc_len;
        }
        PL_TRY(pl_generator_step_rows(g, rows, b->row_tok, b->row_pos, b->row_k, b->row_v,
                                      cross ? b->row_x : NULL, cross ? b->row_len : NULL));
        PL_TRY(beam_advance(b, g->logits, Vp, row));
    }
fail:
    return st;
}

pl_status pl_beam_batch_init(pl_beam_batch *bb, pl_generator *g, const pl_beam_opts *opts,
                             int64_t S)
{
    pl_status st = PL_OK;
    memset(bb, 0, sizeof *bb);
    const int64_t W = opts->width;
    if (S < 1 || W < 1 || g->rows < S * W)
        return pl_errorf(PL_ERR_ARG, "beam search of %lld sources x %lld beams: need at least one "
                         "of each and a generator of as many rows (it has %lld)", (long long)S,
                         (long long)W, (long long)g->rows);
    bb->src = pl_calloc((size_t)S, sizeof *bb->src);
    if (!bb->src)
        return pl_errorf(PL_ERR_NOMEM, "beam search: out of memory for %lld sources", (long long)S);
    for (int64_t i = 0; i < S; i++, bb->S++)
        PL_TRY(pl_beam_init(&bb->src[i], g, opts));
    for (int64_t j = 1; j <= S; j++) /* the step's rows: j sources at step 0, or j open ones */
        PL_TRY(pl_generator_prepare_rows(g, j));
    for (int64_t j = 1; j <= S && W > 1; j++)
        PL_TRY(pl_generator_prepare_rows(g, j * W));
    if (g->cfg.block.cross_attention)
        bb->xkv_n = g->cfg.num_layers * g->blk.Nk * 2 * g->blk.Al;
    const int64_t R = S * W;
    bb->xkv = bb->xkv_n ? pl_malloc((size_t)(S * bb->xkv_n) * sizeof *bb->xkv) : NULL;
    bb->enc_len = pl_calloc((size_t)(S + 2 * R), sizeof *bb->enc_len);
    bb->pos = pl_calloc((size_t)(R + S), sizeof *bb->pos);
    bb->k = pl_calloc((size_t)(2 * R), sizeof *bb->k);
    bb->x = pl_calloc((size_t)R, sizeof *bb->x);
    if ((bb->xkv_n && !bb->xkv) || !bb->enc_len || !bb->pos || !bb->k || !bb->x) {
        st = pl_errorf(PL_ERR_NOMEM, "beam search: out of memory for %lld sources' caches",
                       (long long)S);
        goto fail;
    }
    bb->tok = bb->enc_len + S, bb->len = bb->tok + R;
    bb->row = bb->pos + R, bb->v = bb->k + R;
    return PL_OK;
fail:
    pl_beam_batch_free(bb);
    return st;
}

void pl_beam_batch_free(pl_beam_batch *bb)
{
    for (int64_t i = 0; bb->src && i < bb->S; i++)
        pl_beam_free(&bb->src[i]);
    pl_free(bb->src);
    pl_free(bb->xkv);
    pl_free(bb->enc_len);
    pl_free(bb->pos);
    pl_free(bb->k);
    pl_free(bb->x);
    memset(bb, 0, sizeof *bb);
}

pl_status pl_beam_batch_take_source(pl_beam_batch *bb, int64_t i, const pl_generator *g)
{
    if (i < 0 || i >= bb->S || !bb->xkv_n || !g->xkv_cache)
        return pl_errorf(PL_ERR_INTERNAL, "pl_beam_batch_take_source: source %lld of %lld of a "
                         "decoder", (long long)i, (long long)bb->S);
    memcpy(bb->xkv + i * bb->xkv_n, g->xkv_cache, (size_t)bb->xkv_n * sizeof *bb->xkv);
    bb->enc_len[i] = g->enc_len;
    return PL_OK;
}

pl_status pl_beam_batch_search(pl_beam_batch *bb, pl_generator *g, int64_t n,
                               const int32_t *const *prefix, const int64_t *len, int32_t eos,
                               int64_t max_new, int64_t P)
{
    pl_status st = PL_OK;
    const int64_t row = g->blk.Gl * g->blk.dims.HS, Vp = g->cfg.padded_vocab;
    if (n < 1 || n > bb->S)
        return pl_errorf(PL_ERR_ARG, "beam search of %lld sources: the batch holds 1 to %lld",
                         (long long)n, (long long)bb->S);
    for (int64_t i = 0; i < n; i++) {
        PL_TRY(beam_begin(&bb->src[i], g, prefix[i], len[i], eos, max_new, P));
        if (bb->src[i].steps == 0)
            beam_order(&bb->src[i]);
    }
    for (;;) {
        int64_t R = 0;
        for (int64_t i = 0; i < n; i++) { /* the open searches' rows, source by source */
            const pl_beam *b = &bb->src[i];
            bb->row[i] = R;
            for (int64_t j = 0; j < beam_rows(b); j++, R++) {
                beam_put_row(b, j, bb->tok, bb->pos, bb->k, bb->v, R);
                bb->x[R] = bb->xkv_n ? bb->xkv + i * bb->xkv_n : NULL;
                bb->len[R] = bb->enc_len[i];
            }
        }
        if (R == 0)
            break;
        PL_TRY(pl_generator_step_rows(g, R, bb->tok, bb->pos, bb->k, bb->v,
                                      bb->xkv_n ? bb->x : NULL, bb->xkv_n ? bb->len : NULL));
        for (int64_t i = 0; i < n; i++)
            if (beam_rows(&bb->src[i]) > 0)
                PL_TRY(beam_advance(&bb->src[i], g->logits + bb->row[i] * Vp, Vp, row));
    }
fail:
    return st;
}

void pl_beam_result(const pl_beam *b, int64_t i, const int32_t **tokens,
                           int64_t *n, double *score)
{
    PL_ASSERT(i >= 0 && i < b->n_hyp);
    const int64_t h = b->order[i];
    *tokens = b->hyp + h * b->P;
    *n = b->hyp_len[h];
    *score = b->hyp_score[h];
}

pl_status pl_beam_check_width(int64_t width, int64_t vocab)
{
    if (width < 1 || width > vocab)
        return pl_errorf(PL_ERR_ARG, "--beam-size %lld: need 1 to the vocabulary's %lld",
                         (long long)width, (long long)vocab);
    return PL_OK;
}

pl_status pl_beam_check_flags(int64_t width, int64_t num_return, double temperature,
                              int64_t top_k, double top_p)
{
    if (temperature > 0)
        return pl_errorf(PL_ERR_ARG, "--beam-size %lld with --temperature %g: beam search is "
                         "deterministic; give one or the other", (long long)width, temperature);
    if (top_k > 0 || top_p < 1)
        return pl_errorf(PL_ERR_ARG, "--beam-size with --top-k or --top-p: those are sampling's");
    if (width < 1)
        return pl_errorf(PL_ERR_ARG, "--beam-size %lld: need at least 1", (long long)width);
    if (num_return < 1 || num_return > width)
        return pl_errorf(PL_ERR_ARG, "--num-return %lld: need 1 to --beam-size (%lld)",
                         (long long)num_return, (long long)width);
    return PL_OK;
}
