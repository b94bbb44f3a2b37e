/* String table: FNV-1a hashing, linear probing, load factor at most 1/2. */
#include "data/tokenizer/strtab.h"

#include "base/alloc.h"

#include <string.h>

static uint64_t hash2(const char *a, size_t na, const char *b, size_t nb)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < na; i++)
        h = (h ^ (unsigned char)a[i]) * 1099511628211ull;
    for (size_t i = 0; i < nb; i++)
        h = (h ^ (unsigned char)b[i]) * 1099511628211ull;
    return h;
}

int32_t pl_strtab_find2(const pl_strtab *t, const char *prefix, size_t np, const char *s,
                        size_t ns)
{
    if (!t->slots)
        return -1;
    for (uint64_t i = hash2(prefix, np, s, ns) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0)
            return -1;
        const char *x = pl_strtab_str(t, id);
        if (pl_strtab_len(t, id) == np + ns && memcmp(x, prefix, np) == 0 &&
            memcmp(x + np, s, ns) == 0)
            return id;
    }
}

int32_t pl_strtab_find(const pl_strtab *t, const char *s, size_t n)
{
    return pl_strtab_find2(t, "", 0, s, n);
}

static pl_status grow(pl_strtab *t)
{
    uint64_t cap = t->slots ? (t->mask + 1) * 2 : 64;
    int32_t *slots = pl_malloc(cap * sizeof *slots);
    if (!slots)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a string table of %llu slots",
                         (unsigned long long)cap);
    memset(slots, 0xff, cap * sizeof *slots);
    for (int32_t id = 0; id < t->n; id++) {
        uint64_t i = hash2("", 0, pl_strtab_str(t, id), pl_strtab_len(t, id)) & (cap - 1);
        while (slots[i] >= 0)
            i = (i + 1) & (cap - 1);
        slots[i] = id;
    }
    pl_free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return PL_OK;
}

pl_status pl_strtab_add(pl_strtab *t, const char *s, size_t n, int32_t *id, int *added)
{
    pl_status st;
    *added = 0;
    if ((*id = pl_strtab_find(t, s, n)) >= 0)
        return PL_OK;
    if ((!t->slots || (uint64_t)(t->n + 1) * 2 > t->mask + 1) && (st = grow(t)) != PL_OK)
        return st;
    if (t->text.n + n + 1 > INT32_MAX || t->n == INT32_MAX - 1)
        return pl_errorf(PL_ERR_FORMAT, "string table over 2 GiB");
    int32_t off = (int32_t)t->text.n;
    if ((st = pl_bytes_append(&t->text, s, n)) != PL_OK ||
        (st = pl_bytes_append(&t->text, "", 1)) != PL_OK ||
        (st = pl_ids_push(&t->off, off)) != PL_OK ||
        (st = pl_ids_push(&t->len, (int32_t)n)) != PL_OK) {
        t->text.n = (size_t)off;
        t->off.n = t->len.n = t->n;
        return st;
    }
    uint64_t i = hash2("", 0, s, n) & t->mask;
    while (t->slots[i] >= 0)
        i = (i + 1) & t->mask;
    t->slots[i] = *id = t->n++;
    if (n > t->max_len)
        t->max_len = n;
    *added = 1;
    return PL_OK;
}

void pl_strtab_free(pl_strtab *t)
{
    pl_bytes_free(&t->text);
    pl_ids_free(&t->off);
    pl_ids_free(&t->len);
    pl_free(t->slots);
    memset(t, 0, sizeof *t);
}
