/* MD5 (RFC 1321), for cache file names: Megatron names its index caches by
 * hashlib.md5(description.encode("utf-8")).hexdigest(). Not for security.
 * Debian's libmd does the hashing (as fast as plait's own was, or faster:
 * docs/design.md, "Libraries"). */
#ifndef PL_BASE_MD5_H
#define PL_BASE_MD5_H

#include <md5.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pl_md5 {
    MD5_CTX ctx;
} pl_md5;

void pl_md5_init(pl_md5 *m);
void pl_md5_update(pl_md5 *m, const void *data, size_t n);
void pl_md5_final(pl_md5 *m, uint8_t digest[16]);

/* The lowercase hex digest of data[0, n), NUL-terminated. */
void pl_md5_hex(const void *data, size_t n, char hex[33]);

#endif
