/* Allocation hook with fault injection and a live-block counter.
 *
 * Large blocks (parameters, gradients, optimizer state, activations: hundreds
 * of MiB) are asked to live on transparent huge pages: the 2 MiB-aligned
 * interior of every block of PL_HUGE_MIN bytes or more is madvise'd
 * MADV_HUGEPAGE (the kernel's THP mode here is "madvise", so nothing is huge
 * unless asked). One TLB entry then covers 2 MiB instead of 4 KiB for the
 * GEMMs and the memory-bound optimizer, and first touch faults 512 times less
 * often. The advice is a hint: where it is refused, nothing changes. The
 * environment variable PLAIT_THP=0 turns it off (for comparisons). */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PL_HUGE_PAGE ((uintptr_t)2 << 20)
#define PL_HUGE_MIN ((size_t)8 << 20)

/* Advises huge pages for the aligned interior of [p, p + size). */
static void advise_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    static int enabled = -1; /* races only write the same value */
    if (enabled < 0) {
        const char *e = getenv("PLAIT_THP");
        enabled = !(e && strcmp(e, "0") == 0);
    }
    if (!p || size < PL_HUGE_MIN || !enabled)
        return;
    uintptr_t lo = ((uintptr_t)p + PL_HUGE_PAGE - 1) & ~(PL_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + size) & ~(PL_HUGE_PAGE - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

static _Atomic int64_t fail_after = -1;
static _Atomic int64_t live;
static _Atomic int64_t calls;

void pl_alloc_fail_after(int64_t n) { atomic_store(&fail_after, n); }

int64_t pl_alloc_live(void) { return atomic_load(&live); }

int64_t pl_alloc_calls(void) { return atomic_load(&calls); }

/* Counts the call; returns 1 if this allocation must fail (fault injection). */
static int inject_failure(void)
{
    atomic_fetch_add(&calls, 1);
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
    advise_huge(p, size);
    return p;
}

void *pl_calloc(size_t n, size_t size)
{
    if (inject_failure())
        return NULL;
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p)
        atomic_fetch_add(&live, 1);
    advise_huge(p, n * size); /* calloc checked the product */
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
