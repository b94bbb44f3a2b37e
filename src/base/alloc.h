/* The one allocation hook.
 *
 * All library memory goes through these functions. Tests call
 * pl_alloc_fail_after(n) to make the (n+1)-th allocation from now fail, and
 * check that the error comes back cleanly and nothing leaks.
 * pl_alloc_live() counts blocks not yet freed. */
#ifndef PL_BASE_ALLOC_H
#define PL_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *pl_malloc(size_t size);
void *pl_calloc(size_t n, size_t size);
void *pl_realloc(void *p, size_t size);
void pl_free(void *p);
char *pl_strdup(const char *s);

/* n >= 0: allow n more allocations, then fail every one; n < 0: never fail. */
void pl_alloc_fail_after(int64_t n);
/* Blocks allocated and not freed (for leak checks in tests). */
int64_t pl_alloc_live(void);
/* Allocation calls so far, failed and injected failures included (pl_realloc of a
 * block counts as one): the N a fault-injection sweep runs up to. */
int64_t pl_alloc_calls(void);

/* a*b and a+b with overflow detection: return 0 and set *out, or -1. */
int pl_mul_size(size_t a, size_t b, size_t *out);
int pl_add_size(size_t a, size_t b, size_t *out);

#endif
