/* Growable id and byte arrays. */
#include "base/vec.h"

#include "base/alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

pl_status pl_ids_reserve(pl_ids *v, int64_t cap)
{
    if (cap <= v->cap)
        return PL_OK;
    int64_t ncap = v->cap ? v->cap : 16;
    while (ncap < cap)
        ncap *= 2;
    size_t bytes;
    if (ncap < 0 || pl_mul_size((size_t)ncap, sizeof(int32_t), &bytes))
        return pl_errorf(PL_ERR_NOMEM, "id array of %lld entries is too large", (long long)cap);
    int32_t *d = pl_realloc(v->data, bytes);
    if (!d)
        return pl_errorf(PL_ERR_NOMEM, "out of memory growing an id array to %lld", (long long)ncap);
    v->data = d;
    v->cap = ncap;
    return PL_OK;
}

pl_status pl_ids_push(pl_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        pl_status st = pl_ids_reserve(v, v->n + 1);
        if (st)
            return st;
    }
    v->data[v->n++] = id;
    return PL_OK;
}

pl_status pl_ids_append(pl_ids *v, const int32_t *ids, int64_t n)
{
    pl_status st = pl_ids_reserve(v, v->n + n);
    if (st)
        return st;
    if (n)
        memcpy(v->data + v->n, ids, (size_t)n * sizeof *ids);
    v->n += n;
    return PL_OK;
}

void pl_ids_free(pl_ids *v)
{
    pl_free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

pl_status pl_i64s_push(pl_i64s *v, int64_t x)
{
    if (v->n == v->cap) {
        int64_t ncap = v->cap ? 2 * v->cap : 16;
        size_t bytes;
        if (pl_mul_size((size_t)ncap, sizeof(int64_t), &bytes))
            return pl_errorf(PL_ERR_NOMEM, "int64 array of %lld entries is too large", (long long)ncap);
        int64_t *d = pl_realloc(v->data, bytes);
        if (!d)
            return pl_errorf(PL_ERR_NOMEM, "out of memory growing an int64 array to %lld",
                             (long long)ncap);
        v->data = d;
        v->cap = ncap;
    }
    v->data[v->n++] = x;
    return PL_OK;
}

void pl_i64s_free(pl_i64s *v)
{
    pl_free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

pl_status pl_bytes_reserve(pl_bytes *b, size_t cap)
{
    if (cap + 1 <= b->cap)
        return PL_OK;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < cap + 1) {
        if (ncap > SIZE_MAX / 2)
            return pl_errorf(PL_ERR_NOMEM, "byte buffer of %zu bytes is too large", cap);
        ncap *= 2;
    }
    char *d = pl_realloc(b->data, ncap);
    if (!d)
        return pl_errorf(PL_ERR_NOMEM, "out of memory growing a buffer to %zu bytes", ncap);
    b->data = d;
    b->cap = ncap;
    return PL_OK;
}

pl_status pl_bytes_append(pl_bytes *b, const void *data, size_t n)
{
    pl_status st = pl_bytes_reserve(b, b->n + n);
    if (st)
        return st;
    if (n)
        memcpy(b->data + b->n, data, n);
    b->n += n;
    b->data[b->n] = '\0';
    return PL_OK;
}

pl_status pl_bytes_printf(pl_bytes *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return pl_errorf(PL_ERR_INTERNAL, "bad format string");
    pl_status st = pl_bytes_reserve(b, b->n + (size_t)n);
    if (st)
        return st;
    va_start(ap, fmt);
    vsnprintf(b->data + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
    return PL_OK;
}

void pl_bytes_free(pl_bytes *b)
{
    pl_free(b->data);
    b->data = NULL;
    b->n = b->cap = 0;
}

pl_status pl_ids_parse(pl_ids *v, const char *s, int64_t vocab, const char **bad)
{
    for (const char *c = s;;) {
        while (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\n')
            c++;
        if (!*c)
            return PL_OK;
        char *end;
        errno = 0;
        const long long x = strtoll(c, &end, 10);
        if (end == c || errno || x < 0 || x >= vocab) {
            *bad = c;
            return PL_ERR_ARG;
        }
        pl_status st = pl_ids_push(v, (int32_t)x);
        if (st)
            return st;
        c = end;
    }
}
