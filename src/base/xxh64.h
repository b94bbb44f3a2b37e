/* XXH64 (Yann Collet's xxHash, 64-bit): the checksum of checkpoint files, fast
 * enough to verify gigabytes on load. Agrees with `xxhsum -H64`. Debian's
 * libxxhash does the hashing (several times faster than plait's own was:
 * docs/design.md, "Libraries"). */
#ifndef PL_BASE_XXH64_H
#define PL_BASE_XXH64_H

#include <stddef.h>
#include <stdint.h>

uint64_t pl_xxh64(const void *data, size_t n, uint64_t seed);

#endif
