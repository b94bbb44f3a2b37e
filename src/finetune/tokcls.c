/* WordPiece label alignment and window splitting (see tokcls.h). */
#include "finetune/tokcls.h"

#include "base/alloc.h"

#include <string.h>

void pl_tokcls_rows_free(pl_tokcls_rows *r)
{
    pl_free(r->ids);
    pl_free(r->types);
    pl_free(r->mask);
    pl_free(r->labels);
    pl_free(r->word_pos);
    pl_free(r->sentence);
    *r = (pl_tokcls_rows){0};
}

static pl_status rows_grow(pl_tokcls_rows *r)
{
    if (r->n < r->cap)
        return PL_OK;
    int64_t c = r->cap ? 2 * r->cap : 64;
    size_t cells;
    if (pl_mul_size((size_t)c, (size_t)r->seq_len, &cells))
        return pl_errorf(PL_ERR_NOMEM, "token classification: %lld rows overflow", (long long)c);
    int32_t **a[4] = {&r->ids, &r->types, &r->mask, &r->labels};
    for (int k = 0; k < 4; k++) {
        int32_t *p = pl_realloc(*a[k], cells * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "token classification: %lld rows of %lld", (long long)c, (long long)r->seq_len);
        *a[k] = p;
    }
    int64_t *wp = pl_realloc(r->word_pos, cells * sizeof *wp);
    if (wp)
        r->word_pos = wp;
    int64_t *sn = wp ? pl_realloc(r->sentence, (size_t)c * sizeof *sn) : NULL;
    if (!sn)
        return pl_errorf(PL_ERR_NOMEM, "token classification: %lld rows of %lld", (long long)c, (long long)r->seq_len);
    r->sentence = sn;
    r->cap = c;
    return PL_OK;
}

/* Writes one window: words [w0, w1) of sentence s, whose pieces are
 * pieces[wstart[w - first] .. wstart[w - first + 1]). */
static pl_status emit(pl_tokcls_rows *r, const pl_bert_specials *sp, const pl_ids *pieces,
                      const int64_t *wstart, int64_t first, int64_t w0, int64_t w1, const int32_t *lab,
                      int64_t sent)
{
    pl_status st = rows_grow(r);
    if (st != PL_OK)
        return st;
    int64_t L = r->seq_len, k = 0, room = L - 2;
    int32_t *ids = r->ids + r->n * L, *ty = r->types + r->n * L, *mk = r->mask + r->n * L, *lb = r->labels + r->n * L;
    int64_t *wp = r->word_pos + r->n * L;
    ids[k] = sp->cls, lb[k] = PL_TOKCLS_IGNORE, wp[k++] = -1;
    for (int64_t w = w0; w < w1; w++) {
        int64_t a = wstart[w - first], b = wstart[w - first + 1];
        if (b - a > room - (k - 1)) {
            b = a + room - (k - 1);
            r->n_cut_words++;
        }
        for (int64_t i = a; i < b; i++) {
            ids[k] = pieces->data[i];
            lb[k] = i == a && lab ? lab[w] : PL_TOKCLS_IGNORE;
            wp[k++] = i == a ? w : -1;
        }
    }
    ids[k] = sp->sep, lb[k] = PL_TOKCLS_IGNORE, wp[k++] = -1;
    for (int64_t i = 0; i < L; i++)
        ty[i] = 0, mk[i] = i < k;
    for (; k < L; k++)
        ids[k] = sp->pad, lb[k] = PL_TOKCLS_IGNORE, wp[k] = -1;
    r->sentence[r->n++] = sent;
    return PL_OK;
}

pl_status pl_tokcls_encode(pl_tokcls_rows *out, pl_tokenizer *t, const pl_conll_set *s,
                           const pl_ft_labels *map, int64_t seq_len)
{
    *out = (pl_tokcls_rows){.seq_len = seq_len};
    pl_bert_specials sp;
    pl_ids pieces = {0};
    int64_t *wstart = NULL;
    int32_t *lab = NULL;
    pl_status st = pl_bert_tokenizer_specials(t, &sp);
    if (st != PL_OK)
        return st;
    if (seq_len < 3)
        return pl_errorf(PL_ERR_ARG, "token classification: sequence length %lld < 3", (long long)seq_len);
    int32_t unk = pl_tokenizer_token_id(t, "[UNK]");
    if (s->tags && map) {
        lab = pl_malloc(((size_t)s->n_words + 1) * sizeof *lab);
        if (!lab)
            goto nomem;
        for (int64_t s_i = 0; s_i < s->n_sent; s_i++)
            for (int64_t w = s->sent[s_i].first; w < s->sent[s_i].first + s->sent[s_i].n; w++) {
                int64_t id = pl_ft_labels_find(map, s->tags[w]);
                if (id < 0) {
                    st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: tag '%s' is not in the label map (%lld labels)", s->path,
                                   (long long)(s->sent[s_i].line + (w - s->sent[s_i].first)), s->tags[w], (long long)map->n);
                    goto fail;
                }
                lab[w] = (int32_t)id;
            }
    }
    int64_t maxw = 0;
    for (int64_t i = 0; i < s->n_sent; i++)
        maxw = s->sent[i].n > maxw ? s->sent[i].n : maxw;
    wstart = pl_malloc(((size_t)maxw + 1) * sizeof *wstart);
    if (!wstart)
        goto nomem;
    int64_t room = seq_len - 2;
    for (int64_t si = 0; si < s->n_sent; si++) {
        const pl_conll_sentence *se = &s->sent[si];
        pieces.n = 0;
        for (int64_t w = 0; w < se->n; w++) {
            wstart[w] = pieces.n;
            const char *word = s->words[se->first + w];
            PL_TRY(pl_tokenizer_encode(t, word, strlen(word), &pieces));
            if (pieces.n == wstart[w])
                PL_TRY(pl_ids_push(&pieces, unk));
        }
        wstart[se->n] = pieces.n;
        int64_t w0 = 0, windows = 0;
        while (w0 < se->n) {
            int64_t w1 = w0 + 1;
            while (w1 < se->n && wstart[w1 + 1] - wstart[w0] <= room)
                w1++;
            PL_TRY(emit(out, &sp, &pieces, wstart, se->first, se->first + w0, se->first + w1, lab, si));
            windows++;
            w0 = w1;
        }
        out->n_split += windows > 1;
    }
    goto done;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "%s: token classification rows", s->path);
fail:
    pl_tokcls_rows_free(out);
done:
    pl_ids_free(&pieces);
    pl_free(wstart);
    pl_free(lab);
    return st;
}

void pl_tokcls_word_preds(const pl_tokcls_rows *r, const int32_t *pred_pos, int64_t n_words,
                          int32_t *word_pred)
{
    for (int64_t w = 0; w < n_words; w++)
        word_pred[w] = -1;
    for (int64_t i = 0; i < r->n * r->seq_len; i++) {
        int64_t w = r->word_pos[i];
        if (w >= 0 && w < n_words)
            word_pred[w] = pred_pos[i];
    }
}
