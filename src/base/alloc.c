/* Allocation hook with fault injection and a live-block counter. */
#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t fail_after = -1;
static _Atomic int64_t live;

void pl_alloc_fail_after(int64_t n) { atomic_store(&fail_after, n); }

int64_t pl_alloc_live(void) { return atomic_load(&live); }

/* Returns 1 if this allocation must fail (fault injection). */
static int inject_failure(void)
{
    int64_t n = atomic_load(&fail_after);
    while (n >= 0) {
        if (n == 0)
            return 1;
        if (atomic_compare_exchange_weak(&fail_after, &n, n - 1))
            return 0;
    }
    return 0;
}

void *pl_malloc(size_t size)
{
    if (inject_failure())
        return NULL;
    void *p = malloc(size ? size : 1);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

void *pl_calloc(size_t n, size_t size)
{
    if (inject_failure())
        return NULL;
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

void *pl_realloc(void *p, size_t size)
{
    if (!p)
        return pl_malloc(size);
    if (inject_failure())
        return NULL;
    return realloc(p, size ? size : 1);
}

void pl_free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub(&live, 1);
    free(p);
}

char *pl_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = pl_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int pl_mul_size(size_t a, size_t b, size_t *out)
{
    if (b && a > SIZE_MAX / b)
        return -1;
    *out = a * b;
    return 0;
}

int pl_add_size(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b)
        return -1;
    *out = a + b;
    return 0;
}
