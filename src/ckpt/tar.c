/* tar reader (ckpt/tar.h). Header fields: name[100] at 0, size[12] (octal, or
 * base-256 with the high bit set) at 124, typeflag at 156, "ustar" at 257,
 * prefix[155] at 345; blocks of 512 bytes; the end is a zero block. */
#include "ckpt/tar.h"

#include "base/alloc.h"

#include <stdio.h>
#include <string.h>

enum { BLOCK = 512, MAX_ENTRIES = 1 << 16 };

static int size_field(const uint8_t *f, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) { /* base-256 */
        for (int k = 1; k < 12; k++) {
            if (v >> 56)
                return 0;
            v = v << 8 | f[k];
        }
        *out = v;
        return 1;
    }
    int k = 0;
    while (k < 12 && f[k] == ' ')
        k++;
    for (; k < 12 && f[k] >= '0' && f[k] <= '7'; k++) {
        if (v >> 60)
            return 0;
        v = v << 3 | (uint64_t)(f[k] - '0');
    }
    if (k < 12 && f[k] != 0 && f[k] != ' ')
        return 0;
    *out = v;
    return 1;
}

static int zero_block(const uint8_t *b)
{
    for (int k = 0; k < BLOCK; k++)
        if (b[k])
            return 0;
    return 1;
}

/* pax extended header records "LEN path=VALUE\n": the path, into name. */
static void pax_path(const uint8_t *d, uint64_t n, char *name, size_t cap)
{
    uint64_t at = 0;
    while (at < n) {
        uint64_t len = 0, k = at;
        while (k < n && d[k] >= '0' && d[k] <= '9' && len < n)
            len = len * 10 + (uint64_t)(d[k++] - '0');
        if (k >= n || d[k] != ' ' || len == 0 || len > n - at)
            return;
        const uint8_t *rec = d + k + 1, *end = d + at + len - 1; /* without the newline */
        if (end > rec + 5 && memcmp(rec, "path=", 5) == 0 && (size_t)(end - rec - 5) < cap) {
            memcpy(name, rec + 5, (size_t)(end - rec - 5));
            name[end - rec - 5] = 0;
        }
        at += len;
    }
}

pl_status pl_tar_parse(pl_tar *t, const uint8_t *img, size_t size, const char *what)
{
    memset(t, 0, sizeof *t);
    char longname[1024] = "";
    size_t at = 0;
    while (1) {
        if (size - at < BLOCK)
            return pl_errorf(PL_ERR_FORMAT, "%s: the tar archive ends without its end blocks "
                             "(truncated?)", what);
        const uint8_t *h = img + at;
        if (zero_block(h))
            return PL_OK;
        uint64_t n;
        if (!size_field(h + 124, &n))
            return pl_errorf(PL_ERR_FORMAT, "%s: tar header at %zu: bad size field", what, at);
        const size_t data = at + BLOCK;
        if (n > size - data)
            return pl_errorf(PL_ERR_FORMAT, "%s: tar entry at %zu: %llu bytes overrun the file "
                             "(truncated?)", what, at, (unsigned long long)n);
        const char type = (char)h[156];
        if (type == 'L' || type == 'x') {
            longname[0] = 0;
            if (type == 'L' && n < sizeof longname) {
                memcpy(longname, img + data, n);
                longname[n] = 0;
            } else if (type == 'x') {
                pax_path(img + data, n, longname, sizeof longname);
            }
        } else if (type == '0' || type == 0) {
            char name[1024];
            if (longname[0]) {
                snprintf(name, sizeof name, "%s", longname);
            } else {
                char base[101] = "", prefix[156] = "";
                memcpy(base, h, 100);
                if (memcmp(h + 257, "ustar", 5) == 0)
                    memcpy(prefix, h + 345, 155);
                snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "/" : "", base);
            }
            longname[0] = 0;
            const char *nm = strncmp(name, "./", 2) == 0 ? name + 2 : name;
            if (t->n == MAX_ENTRIES)
                return pl_errorf(PL_ERR_FORMAT, "%s: more than %d tar entries", what, MAX_ENTRIES);
            if (t->n == t->cap) {
                int c = t->cap ? 2 * t->cap : 16;
                pl_tar_entry *e = pl_realloc(t->e, (size_t)c * sizeof *e);
                if (!e)
                    return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", what);
                t->e = e;
                t->cap = c;
            }
            pl_tar_entry *e = &t->e[t->n];
            if (!(e->name = pl_malloc(strlen(nm) + 1)))
                return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", what);
            memcpy(e->name, nm, strlen(nm) + 1);
            e->data = img + data;
            e->size = n;
            t->n++;
        } else {
            longname[0] = 0;
        }
        const uint64_t padded = (n + BLOCK - 1) / BLOCK * BLOCK;
        if (padded > size - data)
            return pl_errorf(PL_ERR_FORMAT, "%s: tar entry at %zu overruns the file", what, at);
        at = data + (size_t)padded;
    }
}

void pl_tar_free(pl_tar *t)
{
    for (int k = 0; k < t->n; k++)
        pl_free(t->e[k].name);
    pl_free(t->e);
    memset(t, 0, sizeof *t);
}

const pl_tar_entry *pl_tar_find(const pl_tar *t, const char *name)
{
    for (int k = 0; k < t->n; k++)
        if (strcmp(t->e[k].name, name) == 0)
            return &t->e[k];
    return NULL;
}
