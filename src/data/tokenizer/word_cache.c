/* Word cache: open addressing over 2^16 slots, entries in a 1 MiB arena; both are
 * reset together when either fills. */
#include "data/tokenizer/word_cache.h"

#include "base/alloc.h"

#define SLOTS (1u << 16) /* a power of two */
#define MAX_ENTRIES (SLOTS / 2)
#define ARENA (1u << 20) /* bytes of ids and keys */

/* ids at arena[off], then the klen key bytes. nids == 0: a free slot. */
struct pl_word_cache_slot {
    uint64_t hash;
    uint32_t off;
    uint16_t klen, nids;
};

pl_status pl_word_cache_init(pl_word_cache *c, const char *what)
{
    memset(c, 0, sizeof *c);
    c->slots = pl_calloc(SLOTS, sizeof *c->slots);
    c->arena = pl_malloc(ARENA);
    if (!c->slots || !c->arena) {
        pl_word_cache_free(c);
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a %s tokenizer's word cache", what);
    }
    return PL_OK;
}

void pl_word_cache_free(pl_word_cache *c)
{
    pl_free(c->slots);
    pl_free(c->arena);
    memset(c, 0, sizeof *c);
}

const int32_t *pl_word_cache_get(const pl_word_cache *c, const uint8_t *w, size_t n, uint64_t h,
                                 int *nids)
{
    for (uint32_t i = (uint32_t)h & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
        const pl_word_cache_slot *s = &c->slots[i];
        if (!s->nids)
            return NULL;
        const int32_t *ids = (const int32_t *)(c->arena + s->off);
        if (s->hash == h && s->klen == n && memcmp(ids + s->nids, w, n) == 0) {
            *nids = s->nids;
            return ids;
        }
    }
}

void pl_word_cache_put(pl_word_cache *c, const uint8_t *w, size_t n, uint64_t h,
                       const int32_t *ids, int64_t nids)
{
    size_t need = ((size_t)nids * sizeof *ids + n + 3) & ~(size_t)3; /* keeps ids 4-aligned */
    if (c->entries >= MAX_ENTRIES || c->used + need > ARENA) {
        memset(c->slots, 0, SLOTS * sizeof *c->slots);
        c->entries = 0;
        c->used = 0;
    }
    uint32_t i = (uint32_t)h & (SLOTS - 1);
    while (c->slots[i].nids)
        i = (i + 1) & (SLOTS - 1);
    uint8_t *p = c->arena + c->used;
    memcpy(p, ids, (size_t)nids * sizeof *ids);
    memcpy(p + (size_t)nids * sizeof *ids, w, n);
    c->slots[i] = (pl_word_cache_slot){h, c->used, (uint16_t)n, (uint16_t)nids};
    c->used += (uint32_t)need;
    c->entries++;
}
