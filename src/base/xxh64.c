/* XXH64 through libxxhash (base/xxh64.h). */
#include "base/xxh64.h"

#include <xxhash.h>

uint64_t pl_xxh64(const void *data, size_t n, uint64_t seed) { return XXH64(data, n, seed); }
