/* .npy reading (by mmap) and writing (atomic), numpy's own layout. */
#include "data/npy.h"

#include "base/alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
enum { ALIGN = 64, GROWTH_AXIS_MAX_DIGITS = 21 };

const char *pl_npy_descr(pl_npy_dtype dt)
{
    static const char *d[] = {"<i2", "<i4", "<u4", "<i8"};
    return d[dt];
}

int pl_npy_itemsize(pl_npy_dtype dt)
{
    static const int s[] = {2, 4, 4, 8};
    return s[dt];
}

int64_t pl_npy_numel(const pl_npy *a) { return a->shape[0] * (a->ndim == 2 ? a->shape[1] : 1); }

pl_status pl_npy_alloc(pl_npy *a, pl_npy_dtype dt, int ndim, int64_t rows, int64_t cols)
{
    memset(a, 0, sizeof *a);
    if (ndim == 1)
        cols = 1;
    size_t n, bytes;
    if (rows < 0 || cols < 0 || pl_mul_size((size_t)rows, (size_t)cols, &n) ||
        pl_mul_size(n, (size_t)pl_npy_itemsize(dt), &bytes))
        return pl_errorf(PL_ERR_NOMEM, "array of %lld x %lld %s elements is too large",
                         (long long)rows, (long long)cols, pl_npy_descr(dt));
    a->owned = pl_malloc(bytes);
    if (!a->owned)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for an array of %lld x %lld %s (%zu bytes)",
                         (long long)rows, (long long)cols, pl_npy_descr(dt), bytes);
    a->dtype = dt;
    a->ndim = ndim;
    a->shape[0] = rows;
    a->shape[1] = cols;
    a->data = a->owned;
    return PL_OK;
}

void pl_npy_free(pl_npy *a)
{
    pl_free(a->owned);
    pl_mmap_close(&a->map);
    memset(a, 0, sizeof *a);
}

int64_t pl_npy_get(const pl_npy *a, int64_t i)
{
    const uint8_t *p = a->data + i * pl_npy_itemsize(a->dtype);
    switch (a->dtype) {
    case PL_NPY_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case PL_NPY_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case PL_NPY_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case PL_NPY_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
    return 0;
}

/* numpy.lib.format._write_array_header + _wrap_header for version 1.0. */
size_t pl_npy_header(pl_npy_dtype dt, int ndim, const int64_t *shape, char *buf, size_t cap)
{
    char dict[256], shp[64];
    if (ndim == 1)
        snprintf(shp, sizeof shp, "(%lld,)", (long long)shape[0]);
    else
        snprintf(shp, sizeof shp, "(%lld, %lld)", (long long)shape[0], (long long)shape[1]);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     pl_npy_descr(dt), shp);
    /* Spare room so the first axis can grow in place (GROWTH_AXIS_MAX_DIGITS). */
    char first[32];
    int digits = snprintf(first, sizeof first, "%lld", (long long)shape[0]);
    int spare = GROWTH_AXIS_MAX_DIGITS - digits;
    size_t hlen = (size_t)n + (size_t)spare + 1; /* + '\n' */
    size_t pad = ALIGN - (sizeof MAGIC + 2 + 2 + hlen) % ALIGN;
    size_t total = sizeof MAGIC + 4 + hlen + pad;
    if (total > cap)
        return 0;
    memcpy(buf, MAGIC, sizeof MAGIC);
    buf[6] = 1;
    buf[7] = 0;
    size_t field = hlen + pad;
    buf[8] = (char)(field & 0xff);
    buf[9] = (char)(field >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', (size_t)spare + pad);
    buf[total - 1] = '\n';
    return total;
}

pl_status pl_npy_save(const char *path, const pl_npy *a)
{
    char header[512];
    size_t hn = pl_npy_header(a->dtype, a->ndim, a->shape, header, sizeof header);
    if (!hn)
        return pl_errorf(PL_ERR_INTERNAL, "%s: .npy header too long", path);
    pl_wfile w;
    pl_status st = pl_wfile_open(&w, path);
    if (st != PL_OK)
        return st;
    size_t bytes = (size_t)pl_npy_numel(a) * (size_t)pl_npy_itemsize(a->dtype);
    if ((st = pl_wfile_write(&w, header, hn)) != PL_OK ||
        (st = pl_wfile_write(&w, a->data, bytes)) != PL_OK) {
        pl_wfile_abort(&w);
        return st;
    }
    return pl_wfile_commit(&w);
}

/* ---- reading: a small parser for the header's Python dict literal ------- */

typedef struct hparse {
    const char *p, *end;
} hparse;

static void skip_ws(hparse *h)
{
    while (h->p < h->end && isspace((unsigned char)*h->p))
        h->p++;
}

static int accept(hparse *h, char c)
{
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return 1;
    }
    return 0;
}

/* A quoted string into out (cap bytes); 0 on malformed input. */
static int parse_str(hparse *h, char *out, size_t cap)
{
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return 0;
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (n + 1 >= cap)
            return 0;
        out[n++] = *h->p++;
    }
    if (h->p >= h->end)
        return 0;
    h->p++;
    out[n] = '\0';
    return 1;
}

static int parse_word(hparse *h, const char *w)
{
    skip_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
        h->p += n;
        return 1;
    }
    return 0;
}

/* "(a, b, ...)" with up to 3 entries; *ndim receives the count. */
static int parse_shape(hparse *h, int64_t *shape, int *ndim)
{
    if (!accept(h, '('))
        return 0;
    *ndim = 0;
    for (;;) {
        if (accept(h, ')'))
            return 1;
        skip_ws(h);
        if (h->p >= h->end || !isdigit((unsigned char)*h->p) || *ndim >= 3)
            return 0;
        int64_t v = 0;
        while (h->p < h->end && isdigit((unsigned char)*h->p)) {
            if (v > (INT64_MAX - 9) / 10)
                return 0;
            v = v * 10 + (*h->p++ - '0');
        }
        shape[(*ndim)++] = v;
        if (!accept(h, ',')) {
            return accept(h, ')');
        }
    }
}

pl_status pl_npy_load(pl_npy *a, const char *path, pl_npy_dtype dt, int ndim, int64_t cols)
{
    memset(a, 0, sizeof *a);
    pl_status st = pl_mmap_open(&a->map, path);
    if (st != PL_OK)
        return st;
    const uint8_t *d = a->map.data;
    size_t size = a->map.size;
    if (size < 10 || memcmp(d, MAGIC, sizeof MAGIC) != 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
        goto fail;
    }
    int major = d[6];
    size_t hlen, off;
    if (major == 1) {
        hlen = (size_t)d[8] | (size_t)d[9] << 8;
        off = 10;
    } else if ((major == 2 || major == 3) && size >= 12) {
        hlen = (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
        off = 12;
    } else {
        st = pl_errorf(PL_ERR_FORMAT, "%s: .npy format version %d.%d is not supported", path,
                       major, d[7]);
        goto fail;
    }
    if (hlen > size - off) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: .npy header of %zu bytes runs past the end of the file",
                       path, hlen);
        goto fail;
    }
    hparse h = {(const char *)d + off, (const char *)d + off + hlen};
    char descr[32] = "", key[32];
    int fortran = -1, got_shape = 0, nd = 0;
    int64_t shape[3] = {0, 0, 0};
    int ok = accept(&h, '{');
    while (ok && !accept(&h, '}')) {
        if (!parse_str(&h, key, sizeof key) || !accept(&h, ':')) {
            ok = 0;
            break;
        }
        if (strcmp(key, "descr") == 0)
            ok = parse_str(&h, descr, sizeof descr);
        else if (strcmp(key, "fortran_order") == 0) {
            if (parse_word(&h, "False"))
                fortran = 0;
            else if (parse_word(&h, "True"))
                fortran = 1;
            else
                ok = 0;
        }
        else if (strcmp(key, "shape") == 0)
            ok = got_shape = parse_shape(&h, shape, &nd);
        else
            ok = 0;
        if (ok && !accept(&h, ',')) {
            ok = accept(&h, '}');
            break;
        }
    }
    if (!ok || !descr[0] || fortran < 0 || !got_shape) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: malformed .npy header", path);
        goto fail;
    }
    if (strcmp(descr, pl_npy_descr(dt)) != 0 || fortran || nd != ndim ||
        (ndim == 2 && shape[1] != cols)) {
        char want[64], got[64];
        if (ndim == 1)
            snprintf(want, sizeof want, "%s (N,)", pl_npy_descr(dt));
        else
            snprintf(want, sizeof want, "%s (N, %lld)", pl_npy_descr(dt), (long long)cols);
        if (nd == 1)
            snprintf(got, sizeof got, "%s (%lld,)", descr, (long long)shape[0]);
        else if (nd == 2)
            snprintf(got, sizeof got, "%s (%lld, %lld)", descr, (long long)shape[0],
                     (long long)shape[1]);
        else
            snprintf(got, sizeof got, "%s with %d dimensions", descr, nd);
        st = pl_errorf(PL_ERR_FORMAT, "%s: holds %s%s, expected %s", path, got,
                       fortran ? " in Fortran order" : "", want);
        goto fail;
    }
    a->dtype = dt;
    a->ndim = ndim;
    a->shape[0] = shape[0];
    a->shape[1] = ndim == 2 ? shape[1] : 1;
    size_t n, bytes, avail = size - off - hlen;
    if (pl_mul_size((size_t)a->shape[0], (size_t)a->shape[1], &n) ||
        pl_mul_size(n, (size_t)pl_npy_itemsize(dt), &bytes)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: shape (%lld, %lld) is impossibly large", path,
                       (long long)a->shape[0], (long long)a->shape[1]);
        goto fail;
    }
    if (bytes != avail) {
        st = pl_errorf(PL_ERR_FORMAT,
                       "%s: %zu bytes of data, but shape (%lld, %lld) of %s needs %zu "
                       "(truncated or corrupt)",
                       path, avail, (long long)a->shape[0], (long long)a->shape[1], descr, bytes);
        goto fail;
    }
    a->data = d + off + hlen;
    return PL_OK;
fail:
    pl_npy_free(a);
    return st;
}
