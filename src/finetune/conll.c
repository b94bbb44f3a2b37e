/* CoNLL columns and WordPiece label alignment (see conll.h). */
#include "finetune/conll.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/utf8.h"

#include <string.h>

pl_conll_spec pl_conll_spec_default(void) { return (pl_conll_spec){.word_col = 0, .tag_col = -1, .tags = 1}; }

void pl_conll_set_free(pl_conll_set *s)
{
    pl_free(s->words);
    pl_free(s->tags);
    pl_free(s->sent);
    pl_free(s->arena);
    pl_free(s->path);
    *s = (pl_conll_set){0};
}

typedef struct cbuild {
    pl_bytes arena;
    int64_t *w_off, *t_off;
    int64_t n_w, cap_w;
    pl_conll_sentence *sent;
    int64_t n_s, cap_s;
} cbuild;

static pl_status push_word(cbuild *b, const char *w, size_t wn, const char *t, size_t tn)
{
    if (b->n_w == b->cap_w) {
        int64_t c = b->cap_w ? 2 * b->cap_w : 256;
        int64_t *x = pl_realloc(b->w_off, (size_t)c * sizeof *x);
        if (x)
            b->w_off = x;
        int64_t *y = x ? pl_realloc(b->t_off, (size_t)c * sizeof *y) : NULL;
        if (!y)
            return pl_errorf(PL_ERR_NOMEM, "CoNLL: %lld words", (long long)c);
        b->t_off = y, b->cap_w = c;
    }
    b->w_off[b->n_w] = (int64_t)b->arena.n;
    pl_status st = pl_bytes_append(&b->arena, w, wn);
    if (st == PL_OK)
        st = pl_bytes_append(&b->arena, "", 1);
    b->t_off[b->n_w] = (int64_t)b->arena.n;
    if (st == PL_OK && t)
        st = pl_bytes_append(&b->arena, t, tn);
    if (st == PL_OK)
        st = pl_bytes_append(&b->arena, "", 1);
    b->n_w += st == PL_OK;
    return st;
}

static pl_status end_sentence(cbuild *b, int64_t *first, int64_t line)
{
    if (b->n_w == *first)
        return PL_OK;
    if (b->n_s == b->cap_s) {
        int64_t c = b->cap_s ? 2 * b->cap_s : 64;
        pl_conll_sentence *p = pl_realloc(b->sent, (size_t)c * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "CoNLL: %lld sentences", (long long)c);
        b->sent = p, b->cap_s = c;
    }
    b->sent[b->n_s++] = (pl_conll_sentence){*first, b->n_w - *first, line};
    *first = b->n_w;
    return PL_OK;
}

pl_status pl_conll_parse(pl_conll_set *out, const char *text, size_t n, const char *name,
                         const pl_conll_spec *spec)
{
    *out = (pl_conll_set){0};
    cbuild b = {0};
    pl_status st = PL_OK;
    int64_t first = 0, first_line = 0, lineno = 0;
    if (spec->word_col < 0 || spec->tag_col < -1) {
        st = pl_errorf(PL_ERR_ARG, "%s: word column %d / tag column %d", name, spec->word_col, spec->tag_col);
        goto fail;
    }
    for (size_t p = 0; p < n;) {
        const char *nl = memchr(text + p, '\n', n - p);
        size_t end = nl ? (size_t)(nl - text) : n, len = end - p;
        const char *line = text + p;
        lineno++;
        p = nl ? end + 1 : n;
        if (len && line[len - 1] == '\r')
            len--;
        enum { MAXF = 64 };
        const char *f[MAXF];
        size_t fl[MAXF];
        int nf = 0;
        for (size_t i = 0; i < len;) {
            while (i < len && (line[i] == ' ' || line[i] == '\t'))
                i++;
            if (i == len)
                break;
            size_t s = i;
            while (i < len && line[i] != ' ' && line[i] != '\t')
                i++;
            if (nf == MAXF) {
                st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: more than %d columns", name, (long long)lineno, MAXF);
                goto fail;
            }
            f[nf] = line + s, fl[nf++] = i - s;
        }
        if (nf == 0) {
            PL_TRY(end_sentence(&b, &first, first_line));
            continue;
        }
        if (fl[0] == 10 && memcmp(f[0], "-DOCSTART-", 10) == 0) {
            PL_TRY(end_sentence(&b, &first, first_line));
            continue;
        }
        if (!pl_utf8_valid(line, len) || memchr(line, '\0', len)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: invalid UTF-8 or a NUL byte", name, (long long)lineno);
            goto fail;
        }
        int tc = spec->tag_col < 0 ? nf - 1 : spec->tag_col;
        if (spec->word_col >= nf || (spec->tags && (tc >= nf || tc == spec->word_col))) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: %d column(s); expected the word in column %d%s", name,
                           (long long)lineno, nf, spec->word_col,
                           spec->tags ? " and a tag in another column" : "");
            goto fail;
        }
        if (b.n_w == first)
            first_line = lineno;
        PL_TRY(push_word(&b, f[spec->word_col], fl[spec->word_col], spec->tags ? f[tc] : NULL,
                         spec->tags ? fl[tc] : 0));
    }
    PL_TRY(end_sentence(&b, &first, first_line));
    if (b.n_s == 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: no sentences", name);
        goto fail;
    }
    out->words = pl_malloc((size_t)b.n_w * sizeof *out->words);
    out->tags = spec->tags ? pl_malloc((size_t)b.n_w * sizeof *out->tags) : NULL;
    out->path = pl_strdup(name);
    if (!out->words || (spec->tags && !out->tags) || !out->path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: %lld words", name, (long long)b.n_w);
        goto fail;
    }
    out->arena = b.arena.data;
    b.arena = (pl_bytes){0};
    for (int64_t i = 0; i < b.n_w; i++) {
        out->words[i] = out->arena + b.w_off[i];
        if (out->tags)
            out->tags[i] = out->arena + b.t_off[i];
    }
    out->n_words = b.n_w;
    out->sent = b.sent, out->n_sent = b.n_s;
    b.sent = NULL;
    goto done;
fail:
    pl_conll_set_free(out);
done:
    pl_bytes_free(&b.arena);
    pl_free(b.w_off);
    pl_free(b.t_off);
    pl_free(b.sent);
    return st;
}

pl_status pl_conll_read(pl_conll_set *out, const char *path, const pl_conll_spec *spec)
{
    char *text = NULL;
    size_t n = 0;
    *out = (pl_conll_set){0};
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st == PL_OK)
        st = pl_conll_parse(out, text, n, path, spec);
    pl_free(text);
    return st;
}

/* The next non-blank line of t[*pos..n) split into fields; 0 at the end. */
static int next_fields(const char *t, size_t n, size_t *pos, int64_t *lineno, const char **f, size_t *fl,
                       int64_t cap, int64_t *nf)
{
    while (*pos < n) {
        const char *nl = memchr(t + *pos, '\n', n - *pos);
        size_t end = nl ? (size_t)(nl - t) : n, s = *pos;
        *pos = nl ? end + 1 : n;
        (*lineno)++;
        *nf = 0;
        for (size_t i = s; i < end;) {
            while (i < end && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r'))
                i++;
            if (i == end)
                break;
            size_t b = i;
            while (i < end && t[i] != ' ' && t[i] != '\t' && t[i] != '\r')
                i++;
            if (*nf < cap)
                f[*nf] = t + b, fl[*nf] = i - b;
            (*nf)++;
        }
        if (*nf > 0)
            return 1;
    }
    return 0;
}

pl_status pl_conll_read_nemo(pl_conll_set *out, const char *text_path, const char *labels_path)
{
    *out = (pl_conll_set){0};
    char *text = NULL, *lab = NULL;
    size_t tn = 0, ln = 0;
    const char **f = NULL, **g = NULL;
    size_t *fl = NULL, *gl = NULL;
    cbuild b = {0};
    pl_status st = pl_file_read_all(text_path, &text, &tn);
    if (st == PL_OK && labels_path)
        st = pl_file_read_all(labels_path, &lab, &ln);
    if (st != PL_OK)
        goto fail;
    if (!pl_utf8_valid(text, tn) || (lab && !pl_utf8_valid(lab, ln)) || memchr(text, '\0', tn) ||
        (lab && memchr(lab, '\0', ln))) {
        st = pl_errorf(PL_ERR_FORMAT, "%s%s%s: invalid UTF-8 or a NUL byte", text_path, lab ? " / " : "",
                       lab ? labels_path : "");
        goto fail;
    }
    int64_t cap = (int64_t)(tn > ln ? tn : ln) / 2 + 2, nf = 0, ng = 0, tl = 0, ll = 0, first = 0;
    f = pl_malloc((size_t)cap * sizeof *f), g = pl_malloc((size_t)cap * sizeof *g);
    fl = pl_malloc((size_t)cap * sizeof *fl), gl = pl_malloc((size_t)cap * sizeof *gl);
    if (!f || !g || !fl || !gl) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: %lld words", text_path, (long long)cap);
        goto fail;
    }
    size_t tp = 0, lp = 0;
    while (next_fields(text, tn, &tp, &tl, f, fl, cap, &nf)) {
        if (lab && !next_fields(lab, ln, &lp, &ll, g, gl, cap, &ng)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: no line of labels left in %s for this sentence", text_path,
                           (long long)tl, labels_path);
            goto fail;
        }
        if (lab && ng != nf) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld has %lld words but %s:%lld has %lld labels", text_path,
                           (long long)tl, (long long)nf, labels_path, (long long)ll, (long long)ng);
            goto fail;
        }
        for (int64_t i = 0; i < nf; i++)
            PL_TRY(push_word(&b, f[i], fl[i], lab ? g[i] : NULL, lab ? gl[i] : 0));
        PL_TRY(end_sentence(&b, &first, tl));
    }
    if (lab && next_fields(lab, ln, &lp, &ll, g, gl, cap, &ng)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: labels past the last sentence of %s", labels_path, (long long)ll, text_path);
        goto fail;
    }
    if (b.n_s == 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: no sentences", text_path);
        goto fail;
    }
    out->words = pl_malloc((size_t)b.n_w * sizeof *out->words);
    out->tags = lab ? pl_malloc((size_t)b.n_w * sizeof *out->tags) : NULL;
    out->path = pl_strdup(text_path);
    if (!out->words || (lab && !out->tags) || !out->path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: %lld words", text_path, (long long)b.n_w);
        goto fail;
    }
    out->arena = b.arena.data;
    b.arena = (pl_bytes){0};
    for (int64_t i = 0; i < b.n_w; i++) {
        out->words[i] = out->arena + b.w_off[i];
        if (out->tags)
            out->tags[i] = out->arena + b.t_off[i];
    }
    out->n_words = b.n_w;
    out->sent = b.sent, out->n_sent = b.n_s;
    b.sent = NULL;
    goto done;
fail:
    pl_conll_set_free(out);
done:
    pl_bytes_free(&b.arena);
    pl_free(b.w_off);
    pl_free(b.t_off);
    pl_free(b.sent);
    pl_free(f), pl_free(g), pl_free(fl), pl_free(gl);
    pl_free(text);
    pl_free(lab);
    return st;
}

pl_status pl_conll_labels(const pl_conll_set *s, pl_ft_labels *out)
{
    if (!s->tags)
        return pl_errorf(PL_ERR_ARG, "%s: read without tags", s->path);
    return pl_ft_labels_build(out, s->tags, s->n_words, "O");
}

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
