/* CoNLL columns and NeMo text/labels files (see conll.h). */
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

/* The set out of a finished build (name: its file; tags: with tags): the words
 * and tags point into the build's arena, which out takes over. */
static pl_status build_finish(cbuild *b, pl_conll_set *out, const char *name, int tags)
{
    if (b->n_s == 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: no sentences", name);
    out->words = pl_malloc((size_t)b->n_w * sizeof *out->words);
    out->tags = tags ? pl_malloc((size_t)b->n_w * sizeof *out->tags) : NULL;
    out->path = pl_strdup(name);
    if (!out->words || (tags && !out->tags) || !out->path)
        return pl_errorf(PL_ERR_NOMEM, "%s: %lld words", name, (long long)b->n_w);
    out->arena = b->arena.data;
    b->arena = (pl_bytes){0};
    for (int64_t i = 0; i < b->n_w; i++) {
        out->words[i] = out->arena + b->w_off[i];
        if (out->tags)
            out->tags[i] = out->arena + b->t_off[i];
    }
    out->n_words = b->n_w;
    out->sent = b->sent, out->n_sent = b->n_s;
    b->sent = NULL;
    return PL_OK;
}

static void build_free(cbuild *b)
{
    pl_bytes_free(&b->arena);
    pl_free(b->w_off);
    pl_free(b->t_off);
    pl_free(b->sent);
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
    PL_TRY(build_finish(&b, out, name, spec->tags != 0));
    goto done;
fail:
    pl_conll_set_free(out);
done:
    build_free(&b);
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
    PL_TRY(build_finish(&b, out, text_path, lab != NULL));
    goto done;
fail:
    pl_conll_set_free(out);
done:
    build_free(&b);
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
