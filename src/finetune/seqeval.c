/* seqeval's default-mode entity extraction and micro P/R/F1 (see seqeval.h). */
#include "finetune/seqeval.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/utf8.h"

#include <stdlib.h>
#include <string.h>

/* A tag's letter (its first code point) and its type. */
typedef struct tag {
    int32_t letter;
    const char *type;
    size_t type_len;
} tag;

static tag split_tag(const char *s)
{
    size_t n = strlen(s);
    int32_t cp;
    size_t k = pl_utf8_next((const unsigned char *)s, n, &cp);
    tag t = {.letter = cp};
    const char *rest = s + k;
    const char *dash = strchr(rest, '-');
    t.type = dash ? dash + 1 : rest;
    t.type_len = strlen(t.type);
    if (t.type_len == 0)
        t.type = "_", t.type_len = 1;
    return t;
}

static int same_type(const tag *a, const tag *b)
{
    return a->type_len == b->type_len && memcmp(a->type, b->type, a->type_len) == 0;
}

static int end_of_chunk(const tag *prev, const tag *cur)
{
    int p = prev->letter, c = cur->letter;
    if (p == 'E' || p == 'S')
        return 1;
    if ((p == 'B' || p == 'I') && (c == 'B' || c == 'S' || c == 'O'))
        return 1;
    return p != 'O' && p != '.' && !same_type(prev, cur);
}

static int start_of_chunk(const tag *prev, const tag *cur)
{
    int p = prev->letter, c = cur->letter;
    if (c == 'B' || c == 'S')
        return 1;
    if ((p == 'E' || p == 'S' || p == 'O') && (c == 'E' || c == 'I'))
        return 1;
    return c != 'O' && c != '.' && !same_type(prev, cur);
}

pl_status pl_seqeval_entities(const char *const *tags, const int64_t *len, int64_t n_sent,
                              pl_seqeval_entity **out, int64_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    int64_t cap = 0, n = 0;
    for (int64_t s = 0; s < n_sent; s++) {
        if (len[s] < 0)
            return pl_errorf(PL_ERR_ARG, "seqeval: sentence %lld has length %lld", (long long)s, (long long)len[s]);
    }
    pl_seqeval_entity *e = NULL;
    tag prev = {.letter = 'O', .type = "", .type_len = 0}; /* prev_tag 'O', prev_type '' */
    const tag o = {.letter = 'O', .type = "_", .type_len = 1};
    int64_t begin = 0, pos = 0, src = 0;
    /* The joined sequence is the sentences each followed by "O", then one more
     * "O" (get_entities appends it to seq). */
    for (int64_t s = 0; s <= n_sent; s++) {
        int64_t m = s < n_sent ? len[s] + 1 : 1;
        for (int64_t i = 0; i < m; i++, pos++) {
            tag cur = o;
            if (s < n_sent && i < len[s]) {
                const char *t = tags[src++];
                if (!t || !*t) {
                    pl_free(e);
                    return pl_errorf(PL_ERR_FORMAT, "seqeval: empty tag at position %lld of sentence %lld",
                                     (long long)i, (long long)s);
                }
                cur = split_tag(t);
            }
            if (end_of_chunk(&prev, &cur)) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 64;
                    pl_seqeval_entity *p = pl_realloc(e, (size_t)cap * sizeof *p);
                    if (!p) {
                        pl_free(e);
                        return pl_errorf(PL_ERR_NOMEM, "seqeval: %lld entities", (long long)cap);
                    }
                    e = p;
                }
                e[n++] = (pl_seqeval_entity){prev.type, prev.type_len, begin, pos - 1};
            }
            if (start_of_chunk(&prev, &cur))
                begin = pos;
            prev = cur;
        }
    }
    *out = e;
    *n_out = n;
    return PL_OK;
}

void pl_seqeval_result_free(pl_seqeval_result *r)
{
    for (int64_t i = 0; i < r->n_types; i++)
        pl_free(r->types[i]);
    pl_free(r->types);
    pl_free(r->tp);
    pl_free(r->n_pred);
    pl_free(r->n_true);
    *r = (pl_seqeval_result){0};
}

static int cmp_type(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

static int64_t find_type(char *const *types, int64_t n, const char *s, size_t len)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        int c = cmp_type(types[mid], strlen(types[mid]), s, len);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int cmp_ent_type(const void *a, const void *b)
{
    const pl_seqeval_entity *x = *(const pl_seqeval_entity *const *)a, *y = *(const pl_seqeval_entity *const *)b;
    return cmp_type(x->type, x->type_len, y->type, y->type_len);
}

void pl_seqeval_prf(const pl_seqeval_result *r, int64_t type, double *p, double *rec, double *f1)
{
    int64_t tp = type < 0 ? r->tp_all : r->tp[type];
    int64_t np = type < 0 ? r->pred_all : r->n_pred[type];
    int64_t nt = type < 0 ? r->true_all : r->n_true[type];
    *p = np > 0 ? (double)tp / (double)np : 0.0;
    *rec = nt > 0 ? (double)tp / (double)nt : 0.0;
    *f1 = *p + *rec > 0 ? 2 * *p * *rec / (*p + *rec) : 0.0;
}

pl_status pl_seqeval_score(pl_seqeval_result *out, const char *const *truth, const char *const *pred,
                           const int64_t *len, int64_t n_sent)
{
    *out = (pl_seqeval_result){0};
    pl_seqeval_entity *et = NULL, *ep = NULL;
    const pl_seqeval_entity **all = NULL;
    int64_t nt = 0, np = 0;
    pl_status st = pl_seqeval_entities(truth, len, n_sent, &et, &nt);
    if (st != PL_OK)
        return pl_error_wrap(st, "true tags");
    if ((st = pl_seqeval_entities(pred, len, n_sent, &ep, &np)) != PL_OK) {
        st = pl_error_wrap(st, "predicted tags");
        goto fail;
    }
    /* The distinct types of both sets, sorted. */
    all = pl_malloc(((size_t)(nt + np) + 1) * sizeof *all);
    if (!all)
        goto nomem;
    for (int64_t i = 0; i < nt; i++)
        all[i] = &et[i];
    for (int64_t i = 0; i < np; i++)
        all[nt + i] = &ep[i];
    qsort(all, (size_t)(nt + np), sizeof *all, cmp_ent_type);
    out->types = pl_calloc((size_t)(nt + np) + 1, sizeof *out->types);
    if (!out->types)
        goto nomem;
    for (int64_t i = 0; i < nt + np; i++) {
        if (out->n_types && cmp_ent_type(&all[i], &all[i - 1]) == 0)
            continue;
        char *t = pl_malloc(all[i]->type_len + 1);
        if (!t)
            goto nomem;
        memcpy(t, all[i]->type, all[i]->type_len);
        t[all[i]->type_len] = '\0';
        out->types[out->n_types++] = t;
    }
    out->tp = pl_calloc((size_t)out->n_types + 1, sizeof *out->tp);
    out->n_pred = pl_calloc((size_t)out->n_types + 1, sizeof *out->n_pred);
    out->n_true = pl_calloc((size_t)out->n_types + 1, sizeof *out->n_true);
    if (!out->tp || !out->n_pred || !out->n_true)
        goto nomem;
    for (int64_t i = 0; i < nt; i++)
        out->n_true[find_type(out->types, out->n_types, et[i].type, et[i].type_len)]++;
    for (int64_t i = 0; i < np; i++)
        out->n_pred[find_type(out->types, out->n_types, ep[i].type, ep[i].type_len)]++;
    /* Both lists are in increasing order of end, each end at most once. */
    for (int64_t a = 0, b = 0; a < nt && b < np;) {
        if (et[a].end < ep[b].end) {
            a++;
        } else if (et[a].end > ep[b].end) {
            b++;
        } else {
            if (et[a].start == ep[b].start &&
                cmp_type(et[a].type, et[a].type_len, ep[b].type, ep[b].type_len) == 0)
                out->tp[find_type(out->types, out->n_types, et[a].type, et[a].type_len)]++;
            a++, b++;
        }
    }
    for (int64_t t = 0; t < out->n_types; t++) {
        out->tp_all += out->tp[t];
        out->pred_all += out->n_pred[t];
        out->true_all += out->n_true[t];
    }
    pl_seqeval_prf(out, -1, &out->precision, &out->recall, &out->f1);
    goto done;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "seqeval: %lld entities", (long long)(nt + np));
fail:
    pl_seqeval_result_free(out);
done:
    pl_free(all);
    pl_free(et);
    pl_free(ep);
    return st;
}

pl_status pl_seqeval_format(const pl_seqeval_result *r, int markdown, pl_bytes *out)
{
    pl_status st = PL_OK;
    const char *sep = markdown ? " | " : "\t", *lead = markdown ? "| " : "", *tail = markdown ? " |\n" : "\n";
    double mp = 0, mr = 0, mf = 0, wp = 0, wr = 0, wf = 0;
    PL_TRY(pl_bytes_printf(out, "%stype%sprecision%srecall%sf1%ssupport%spredicted%s", lead, sep, sep, sep, sep, sep,
                           tail));
    if (markdown)
        PL_TRY(pl_bytes_printf(out, "| --- | --- | --- | --- | --- | --- |\n"));
    for (int64_t t = 0; t < r->n_types; t++) {
        double p, rc, f;
        pl_seqeval_prf(r, t, &p, &rc, &f);
        mp += p, mr += rc, mf += f;
        wp += p * (double)r->n_true[t], wr += rc * (double)r->n_true[t], wf += f * (double)r->n_true[t];
        PL_TRY(pl_bytes_printf(out, "%s%s%s%.6f%s%.6f%s%.6f%s%lld%s%lld%s", lead, r->types[t], sep, p, sep, rc, sep, f,
                               sep, (long long)r->n_true[t], sep, (long long)r->n_pred[t], tail));
    }
    double n = r->n_types ? (double)r->n_types : 1, w = r->true_all ? (double)r->true_all : 1;
    PL_TRY(pl_bytes_printf(out, "%smicro avg%s%.6f%s%.6f%s%.6f%s%lld%s%lld%s", lead, sep, r->precision, sep, r->recall,
                           sep, r->f1, sep, (long long)r->true_all, sep, (long long)r->pred_all, tail));
    PL_TRY(pl_bytes_printf(out, "%smacro avg%s%.6f%s%.6f%s%.6f%s%lld%s%lld%s", lead, sep, mp / n, sep, mr / n, sep,
                           mf / n, sep, (long long)r->true_all, sep, (long long)r->pred_all, tail));
    PL_TRY(pl_bytes_printf(out, "%sweighted avg%s%.6f%s%.6f%s%.6f%s%lld%s%lld%s", lead, sep, wp / w, sep, wr / w, sep,
                           wf / w, sep, (long long)r->true_all, sep, (long long)r->pred_all, tail));
fail:
    return st;
}

pl_status pl_seqeval_write(const pl_seqeval_result *r, const char *path)
{
    size_t n = strlen(path);
    pl_bytes b = {0};
    pl_status st = pl_seqeval_format(r, n >= 3 && strcmp(path + n - 3, ".md") == 0, &b);
    if (st == PL_OK)
        st = pl_file_write_atomic(path, b.data, b.n);
    pl_bytes_free(&b);
    return st == PL_OK ? st : pl_error_wrap(st, "writing entity report %s", path);
}
