/* A bounded cache of pre-token -> token ids, shared by the BPE tokenizers
 * (GPT-2, Hugging Face, SentencePiece).
 *
 * Keys are the bytes of one pre-token (at most PL_WORD_CACHE_MAX_WORD), values its
 * ids. The cache has a fixed size and is cleared whenever it fills, so memory stays
 * bounded on any corpus (Megatron's GPT-2 cache dict and Hugging Face's grow or cap
 * differently; the ids never depend on the cache). One cache per tokenizer handle:
 * not thread-safe. */
#ifndef PL_DATA_TOKENIZER_WORD_CACHE_H
#define PL_DATA_TOKENIZER_WORD_CACHE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PL_WORD_CACHE_MAX_WORD 64 /* longer pre-tokens are not cached */

typedef struct pl_word_cache_slot pl_word_cache_slot;

typedef struct pl_word_cache {
    pl_word_cache_slot *slots;
    uint8_t *arena; /* ids then key bytes of each entry */
    uint32_t entries, used;
} pl_word_cache;

/* A 64-bit hash of n bytes (cache keys, vocabulary tables). */
static inline uint64_t pl_word_hash(const uint8_t *p, size_t n)
{
    const uint64_t m = UINT64_C(0xBF58476D1CE4E5B9);
    uint64_t h = UINT64_C(0x9E3779B97F4A7C15) * (n + 1), x;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&x, p, 8);
        h = (h ^ x) * m;
        h ^= h >> 29;
    }
    if (n) {
        x = 0;
        for (size_t i = 0; i < n; i++)
            x |= (uint64_t)p[i] << (8 * i);
        h = (h ^ x) * m;
        h ^= h >> 29;
    }
    h *= UINT64_C(0x94D049BB133111EB);
    return h ^ (h >> 32);
}

/* Allocates an empty cache; errors are PL_ERR_NOMEM naming `what`. */
pl_status pl_word_cache_init(pl_word_cache *c, const char *what);
void pl_word_cache_free(pl_word_cache *c);

/* The ids cached for w[0..n) (h = pl_word_hash(w, n)), or NULL; *nids gets their count. */
const int32_t *pl_word_cache_get(const pl_word_cache *c, const uint8_t *w, size_t n, uint64_t h,
                                 int *nids);

/* Caches ids[0..nids) for w[0..n). n <= PL_WORD_CACHE_MAX_WORD, 1 <= nids <= 4 * n. */
void pl_word_cache_put(pl_word_cache *c, const uint8_t *w, size_t n, uint64_t h,
                       const int32_t *ids, int64_t nids);

#endif
