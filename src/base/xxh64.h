/* XXH64 (Yann Collet's xxHash, 64-bit), streaming: the checksum of checkpoint
 * files, fast enough to verify gigabytes on load. Agrees with `xxhsum -H64`. */
#ifndef PL_BASE_XXH64_H
#define PL_BASE_XXH64_H

#include <stddef.h>
#include <stdint.h>

typedef struct pl_xxh64 {
    uint64_t v[4], total;
    uint8_t buf[32];
    size_t buffered;
    uint64_t seed;
} pl_xxh64_state;

void pl_xxh64_init(pl_xxh64_state *h, uint64_t seed);
void pl_xxh64_update(pl_xxh64_state *h, const void *data, size_t n);
uint64_t pl_xxh64_digest(const pl_xxh64_state *h);
uint64_t pl_xxh64(const void *data, size_t n, uint64_t seed);

#endif
