/* MD5 (RFC 1321), for cache file names: Megatron names its index caches by
 * hashlib.md5(description.encode("utf-8")).hexdigest(). Not for security. */
#ifndef PL_BASE_MD5_H
#define PL_BASE_MD5_H

#include <stddef.h>
#include <stdint.h>

typedef struct pl_md5 {
    uint32_t h[4];
    uint64_t n;          /* bytes hashed so far */
    uint8_t block[64];
} pl_md5;

void pl_md5_init(pl_md5 *m);
void pl_md5_update(pl_md5 *m, const void *data, size_t n);
void pl_md5_final(pl_md5 *m, uint8_t digest[16]);

/* The 32 lowercase hex digits of md5(data) and a NUL into hex[33]. */
void pl_md5_hex(const void *data, size_t n, char hex[33]);

#endif
