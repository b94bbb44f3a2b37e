/* Growable arrays: token ids (pl_ids), int64 (pl_i64s) and bytes (pl_bytes).
 *
 * Zero-initialised structs are empty and valid. Push functions return
 * PL_ERR_NOMEM (with a message) when growth fails; the contents stay intact. */
#ifndef PL_BASE_VEC_H
#define PL_BASE_VEC_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_ids {
    int32_t *data;
    int64_t n, cap;
} pl_ids;

typedef struct pl_i64s {
    int64_t *data;
    int64_t n, cap;
} pl_i64s;

typedef struct pl_bytes {
    char *data; /* kept NUL-terminated when non-NULL */
    size_t n, cap;
} pl_bytes;

pl_status pl_ids_reserve(pl_ids *v, int64_t cap);
pl_status pl_ids_push(pl_ids *v, int32_t id);
pl_status pl_ids_append(pl_ids *v, const int32_t *ids, int64_t n);
void pl_ids_free(pl_ids *v);
/* Appends the whitespace-separated decimal token ids of s to v, each in [0, vocab).
 * A word that is not one: PL_ERR_ARG with *bad at it (the caller names the source);
 * out of memory: PL_ERR_NOMEM. */
pl_status pl_ids_parse(pl_ids *v, const char *s, int64_t vocab, const char **bad);

pl_status pl_i64s_push(pl_i64s *v, int64_t x);
void pl_i64s_free(pl_i64s *v);

pl_status pl_bytes_reserve(pl_bytes *b, size_t cap);
pl_status pl_bytes_append(pl_bytes *b, const void *data, size_t n);
pl_status pl_bytes_printf(pl_bytes *b, const char *fmt, ...) PL_PRINTF(2, 3);
void pl_bytes_free(pl_bytes *b);

#endif
