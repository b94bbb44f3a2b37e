/* Label maps: sorted distinct strings, written one a line. */
#include "finetune/labels.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/vec.h"

#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void pl_ft_labels_free(pl_ft_labels *m)
{
    for (int64_t i = 0; i < m->n; i++)
        pl_free(m->names[i]);
    pl_free(m->names);
    m->names = NULL;
    m->n = 0;
}

pl_status pl_ft_labels_build(pl_ft_labels *out, const char *const *s, int64_t n, const char *first)
{
    *out = (pl_ft_labels){0};
    const char **tmp = pl_malloc(((size_t)n + 1) * sizeof *tmp);
    if (!tmp)
        return pl_errorf(PL_ERR_NOMEM, "label map: %lld labels", (long long)n);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!s[i][0]) {
            pl_free(tmp);
            return pl_errorf(PL_ERR_FORMAT, "label map: label %lld is empty", (long long)i);
        }
        if (!first || strcmp(s[i], first) != 0)
            tmp[k++] = s[i];
    }
    qsort(tmp, (size_t)k, sizeof *tmp, cmp_str);
    int64_t d = 0;
    for (int64_t i = 0; i < k; i++)
        if (d == 0 || strcmp(tmp[d - 1], tmp[i]) != 0)
            tmp[d++] = tmp[i];
    int64_t total = d + (first ? 1 : 0);
    out->names = pl_calloc((size_t)total + 1, sizeof *out->names);
    if (!out->names) {
        pl_free(tmp);
        return pl_errorf(PL_ERR_NOMEM, "label map: %lld labels", (long long)total);
    }
    for (int64_t i = 0; i < total; i++) {
        const char *src = first ? (i == 0 ? first : tmp[i - 1]) : tmp[i];
        if (!(out->names[i] = pl_strdup(src))) {
            out->n = i;
            pl_ft_labels_free(out);
            pl_free(tmp);
            return pl_errorf(PL_ERR_NOMEM, "label map: copying labels");
        }
    }
    out->n = total;
    pl_free(tmp);
    return PL_OK;
}

int64_t pl_ft_labels_find(const pl_ft_labels *m, const char *s)
{
    /* Linear: maps hold tens of labels, and a read-back map keeps file order. */
    for (int64_t i = 0; i < m->n; i++)
        if (strcmp(m->names[i], s) == 0)
            return i;
    return -1;
}

pl_status pl_ft_labels_write(const pl_ft_labels *m, const char *path)
{
    pl_bytes b = {0};
    pl_status st = PL_OK;
    for (int64_t i = 0; i < m->n; i++)
        PL_TRY(pl_bytes_printf(&b, "%s\n", m->names[i]));
    PL_TRY(pl_file_write_atomic(path, b.data ? b.data : "", b.n));
fail:
    pl_bytes_free(&b);
    return st == PL_OK ? st : pl_error_wrap(st, "writing label map %s", path);
}

pl_status pl_ft_labels_read(pl_ft_labels *out, const char *path)
{
    *out = (pl_ft_labels){0};
    char *text = NULL;
    size_t size = 0;
    pl_status st = pl_file_read_all(path, &text, &size);
    if (st != PL_OK)
        return st;
    int64_t cap = 1;
    for (size_t i = 0; i < size; i++)
        cap += text[i] == '\n';
    out->names = pl_calloc((size_t)cap + 1, sizeof *out->names);
    if (!out->names) {
        pl_free(text);
        return pl_errorf(PL_ERR_NOMEM, "%s: %lld labels", path, (long long)cap);
    }
    int64_t line = 0;
    for (char *p = text; p < text + size;) {
        char *nl = memchr(p, '\n', (size_t)(text + size - p));
        char *end = nl ? nl : text + size;
        line++;
        if (end > p && end[-1] == '\r')
            end--;
        *end = '\0';
        if (!*p) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: empty label", path, (long long)line);
            goto fail;
        }
        if (pl_ft_labels_find(out, p) >= 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: label '%s' listed twice", path, (long long)line, p);
            goto fail;
        }
        if (!(out->names[out->n] = pl_strdup(p))) {
            st = pl_errorf(PL_ERR_NOMEM, "%s:%lld: copying a label", path, (long long)line);
            goto fail;
        }
        out->n++;
        p = nl ? nl + 1 : text + size;
    }
    if (out->n == 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: no labels", path);
        goto fail;
    }
    pl_free(text);
    return PL_OK;
fail:
    pl_free(text);
    pl_ft_labels_free(out);
    return st;
}
