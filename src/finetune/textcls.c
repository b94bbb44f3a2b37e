/* Text classification data: TSV / JSON lines readers and BERT pair encoding. */
#include "finetune/textcls.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/utf8.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

pl_textcls_spec pl_textcls_spec_default(void)
{
    return (pl_textcls_spec){.col_a = 0, .col_b = -1, .col_label = -1};
}

/* Offsets into the arena while it grows; -1 for none. */
typedef struct off_ex {
    int64_t a, b, label, line;
} off_ex;

typedef struct builder {
    pl_bytes arena;
    off_ex *ex;
    int64_t n, cap;
} builder;

static pl_status put_str(builder *bd, const char *s, size_t n, int64_t *off)
{
    *off = (int64_t)bd->arena.n;
    pl_status st = pl_bytes_append(&bd->arena, s, n);
    if (st == PL_OK)
        st = pl_bytes_append(&bd->arena, "", 1);
    return st;
}

static pl_status push_ex(builder *bd, off_ex e)
{
    if (bd->n == bd->cap) {
        int64_t cap = bd->cap ? 2 * bd->cap : 64;
        off_ex *p = pl_realloc(bd->ex, (size_t)cap * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "%lld examples", (long long)cap);
        bd->ex = p, bd->cap = cap;
    }
    bd->ex[bd->n++] = e;
    return PL_OK;
}

/* The idx-th tab-separated field of line[0..n) (-1: the last), or -1 when absent. */
static int tsv_field(const char *line, size_t n, int idx, const char **f, size_t *fn)
{
    int nf = 1;
    for (size_t i = 0; i < n; i++)
        nf += line[i] == '\t';
    if (idx < 0)
        idx = nf - 1;
    if (idx >= nf)
        return -1;
    size_t s = 0;
    for (int k = 0; k < idx; k++)
        s = (size_t)((const char *)memchr(line + s, '\t', n - s) - line) + 1;
    const char *e = memchr(line + s, '\t', n - s);
    *f = line + s;
    *fn = e ? (size_t)(e - (line + s)) : n - s;
    return nf;
}

static pl_status parse_tsv_line(builder *bd, const char *line, size_t n, const char *name,
                                int64_t lineno, const pl_textcls_spec *sp)
{
    off_ex e = {.a = -1, .b = -1, .label = -1, .line = lineno};
    struct {
        int col;
        int64_t *off;
        const char *what;
    } want[3] = {{sp->col_a, &e.a, "text_a"}, {sp->col_b, &e.b, "text_b"}, {sp->col_label, &e.label, "label"}};
    int nf_all = 1;
    for (size_t i = 0; i < n; i++)
        nf_all += line[i] == '\t';
    int lab_col = sp->col_label < 0 ? nf_all - 1 : sp->col_label;
    if (!sp->unlabeled && (lab_col == sp->col_a || lab_col == sp->col_b))
        return pl_errorf(PL_ERR_FORMAT, "%s:%lld: %d tab-separated field(s); expected text in column %d%s and a label in another column",
                         name, (long long)lineno, nf_all, sp->col_a, sp->col_b >= 0 ? " (and text_b)" : "");
    for (int k = 0; k < 3; k++) {
        if ((k == 1 && sp->col_b < 0) || (k == 2 && sp->unlabeled))
            continue;
        const char *f;
        size_t fn;
        int nf = tsv_field(line, n, want[k].col, &f, &fn);
        if (nf < 0) {
            int have = 1;
            for (size_t i = 0; i < n; i++)
                have += line[i] == '\t';
            return pl_errorf(PL_ERR_FORMAT, "%s:%lld: %s is column %d but the line has %d tab-separated field(s)",
                             name, (long long)lineno, want[k].what, want[k].col, have);
        }
        if (k == 2 && fn == 0)
            return pl_errorf(PL_ERR_FORMAT, "%s:%lld: empty label (column %d)", name, (long long)lineno, want[k].col);
        pl_status st = put_str(bd, f, fn, want[k].off);
        if (st)
            return st;
    }
    return push_ex(bd, e);
}

/* A JSON string (or, for the label, an integer) as a string in the arena. */
static pl_status json_str(builder *bd, const cJSON *o, const char *key, int label, int optional,
                          int64_t *off, const char *name, int64_t lineno)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (optional)
            return *off = -1, PL_OK;
        return pl_errorf(PL_ERR_FORMAT, "%s:%lld: no \"%s\" in the object", name, (long long)lineno, key);
    }
    if (cJSON_IsString(v))
        return put_str(bd, v->valuestring, strlen(v->valuestring), off);
    if (label && cJSON_IsNumber(v) && fabs(v->valuedouble) < 9e15 &&
        v->valuedouble == (double)(int64_t)v->valuedouble) {
        char num[32];
        snprintf(num, sizeof num, "%" PRId64, (int64_t)v->valuedouble);
        return put_str(bd, num, strlen(num), off);
    }
    return pl_errorf(PL_ERR_FORMAT, "%s:%lld: \"%s\" must be a string%s", name, (long long)lineno, key,
                     label ? " or an integer" : "");
}

static pl_status parse_json_line(builder *bd, const char *line, size_t n, const char *name,
                                 int64_t lineno, const pl_textcls_spec *sp)
{
    pl_json_init();
    cJSON *o = cJSON_ParseWithLength(line, n);
    if (!o) {
        if (pl_json_oom_take())
            return pl_errorf(PL_ERR_NOMEM, "%s:%lld: parsing JSON", name, (long long)lineno);
        return pl_errorf(PL_ERR_FORMAT, "%s:%lld: not valid JSON", name, (long long)lineno);
    }
    off_ex e = {.a = -1, .b = -1, .label = -1, .line = lineno};
    pl_status st = PL_OK;
    if (!cJSON_IsObject(o)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: expected a JSON object", name, (long long)lineno);
        goto done;
    }
    if ((st = json_str(bd, o, sp->key_a ? sp->key_a : "text", 0, 0, &e.a, name, lineno)) ||
        (st = json_str(bd, o, sp->key_b ? sp->key_b : "text_b", 0, 1, &e.b, name, lineno)))
        goto done;
    if (!sp->unlabeled) {
        if ((st = json_str(bd, o, sp->key_label ? sp->key_label : "label", 1, 0, &e.label, name, lineno)))
            goto done;
        if (!bd->arena.data[e.label]) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: empty label", name, (long long)lineno);
            goto done;
        }
    }
    st = push_ex(bd, e);
done:
    cJSON_Delete(o);
    return st;
}

void pl_textcls_set_free(pl_textcls_set *s)
{
    pl_free(s->ex);
    pl_free(s->path);
    pl_free(s->arena);
    *s = (pl_textcls_set){0};
}

pl_status pl_textcls_parse(pl_textcls_set *out, const char *text, size_t n, const char *name,
                           const pl_textcls_spec *spec)
{
    *out = (pl_textcls_set){0};
    builder bd = {0};
    pl_status st = PL_OK;
    if (!spec->jsonl && (spec->col_a < 0 || (spec->col_b < -1) || spec->col_label < -1))
        return pl_errorf(PL_ERR_ARG, "%s: negative TSV column", name);
    int64_t lineno = 0;
    for (size_t p = 0; p < n;) {
        const char *nl = memchr(text + p, '\n', n - p);
        size_t end = nl ? (size_t)(nl - text) : n, len = end - p;
        const char *line = text + p;
        lineno++;
        p = nl ? end + 1 : n;
        if (len && line[len - 1] == '\r')
            len--;
        if (lineno == 1 && spec->header && !spec->jsonl)
            continue;
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k == len)
            continue;
        if (!pl_utf8_valid(line, len)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: invalid UTF-8 at byte %zu of the line", name,
                           (long long)lineno, pl_utf8_check(line, len));
            goto fail;
        }
        if (memchr(line, '\0', len)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: NUL byte in the line", name, (long long)lineno);
            goto fail;
        }
        PL_TRY(spec->jsonl ? parse_json_line(&bd, line, len, name, lineno, spec)
                           : parse_tsv_line(&bd, line, len, name, lineno, spec));
    }
    if (bd.n == 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: no examples", name);
        goto fail;
    }
    out->ex = pl_malloc((size_t)bd.n * sizeof *out->ex);
    out->path = pl_strdup(name);
    if (!out->ex || !out->path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: %lld examples", name, (long long)bd.n);
        goto fail;
    }
    out->arena = bd.arena.data;
    bd.arena = (pl_bytes){0};
    for (int64_t i = 0; i < bd.n; i++) {
        off_ex e = bd.ex[i];
        out->ex[i] = (pl_textcls_example){
            .a = out->arena + e.a,
            .b = e.b >= 0 ? out->arena + e.b : NULL,
            .label = e.label >= 0 ? out->arena + e.label : NULL,
            .line = e.line,
        };
    }
    out->n = bd.n;
    pl_free(bd.ex);
    return PL_OK;
fail:
    pl_bytes_free(&bd.arena);
    pl_free(bd.ex);
    pl_textcls_set_free(out);
    return st;
}

pl_status pl_textcls_read(pl_textcls_set *out, const char *path, const pl_textcls_spec *spec)
{
    char *text = NULL;
    size_t n = 0;
    *out = (pl_textcls_set){0};
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st == PL_OK)
        st = pl_textcls_parse(out, text, n, path, spec);
    pl_free(text);
    return st;
}

pl_status pl_textcls_labels(const pl_textcls_set *s, pl_ft_labels *out)
{
    const char **l = pl_malloc(((size_t)s->n + 1) * sizeof *l);
    if (!l)
        return pl_errorf(PL_ERR_NOMEM, "%s: label list", s->path);
    for (int64_t i = 0; i < s->n; i++) {
        if (!s->ex[i].label) {
            pl_free(l);
            return pl_errorf(PL_ERR_ARG, "%s:%lld: unlabeled example", s->path, (long long)s->ex[i].line);
        }
        l[i] = s->ex[i].label;
    }
    pl_status st = pl_ft_labels_build(out, l, s->n, NULL);
    pl_free(l);
    return st;
}

pl_status pl_textcls_encode(pl_tokenizer *t, const pl_bert_specials *sp, const char *a,
                            const char *b, int64_t seq_len, pl_ids *scratch_a, pl_ids *scratch_b,
                            int32_t *ids, int32_t *types, int32_t *mask, int *truncated)
{
    int64_t room = seq_len - (b ? 3 : 2);
    if (room < 0)
        return pl_errorf(PL_ERR_ARG, "sequence length %lld leaves no room for [CLS]/[SEP] (need >= %d)",
                         (long long)seq_len, b ? 3 : 2);
    scratch_a->n = scratch_b->n = 0;
    pl_status st = pl_tokenizer_encode(t, a, strlen(a), scratch_a);
    if (st == PL_OK && b)
        st = pl_tokenizer_encode(t, b, strlen(b), scratch_b);
    if (st != PL_OK)
        return st;
    int64_t na = scratch_a->n, nb = b ? scratch_b->n : 0;
    int cut = na + nb > room;
    while (na + nb > room) { /* _truncate_seq_pair: pop from the longer, b on ties */
        if (na > nb)
            na--;
        else
            nb--;
    }
    int64_t k = 0;
    ids[k] = sp->cls, types[k++] = 0;
    for (int64_t i = 0; i < na; i++)
        ids[k] = scratch_a->data[i], types[k++] = 0;
    ids[k] = sp->sep, types[k++] = 0;
    if (b) {
        for (int64_t i = 0; i < nb; i++)
            ids[k] = scratch_b->data[i], types[k++] = 1;
        ids[k] = sp->sep, types[k++] = 1;
    }
    for (int64_t i = 0; i < seq_len; i++)
        mask[i] = i < k;
    for (; k < seq_len; k++)
        ids[k] = sp->pad, types[k] = 0;
    if (truncated)
        *truncated = cut;
    return PL_OK;
}

pl_status pl_textcls_encode_set(pl_tokenizer *t, const pl_textcls_set *s, const pl_ft_labels *map,
                                int64_t seq_len, int32_t *ids, int32_t *types, int32_t *mask,
                                int32_t *labels, int64_t *n_truncated)
{
    pl_bert_specials sp;
    pl_ids xa = {0}, xb = {0};
    pl_status st = pl_bert_tokenizer_specials(t, &sp);
    if (st != PL_OK)
        return st;
    if (labels && !map)
        return pl_errorf(PL_ERR_ARG, "%s: labels asked for without a label map", s->path);
    int64_t cut = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const pl_textcls_example *e = &s->ex[i];
        int tr = 0;
        size_t o = (size_t)(i * seq_len);
        st = pl_textcls_encode(t, &sp, e->a, e->b, seq_len, &xa, &xb, ids + o, types + o, mask + o, &tr);
        if (st != PL_OK) {
            st = pl_error_wrap(st, "%s:%lld", s->path, (long long)e->line);
            goto fail;
        }
        cut += tr;
        if (labels) {
            int64_t id = e->label ? pl_ft_labels_find(map, e->label) : -1;
            if (id < 0) {
                st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: label '%s' is not in the label map (%lld labels)",
                               s->path, (long long)e->line, e->label ? e->label : "(none)", (long long)map->n);
                goto fail;
            }
            labels[i] = (int32_t)id;
        }
    }
    if (n_truncated)
        *n_truncated = cut;
fail:
    pl_ids_free(&xa);
    pl_ids_free(&xb);
    return st;
}
