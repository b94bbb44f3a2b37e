/* BPE merge table and the one-merge-at-a-time heap algorithm (see bpe.h). */
#include "data/tokenizer/bpe.h"

#include "base/alloc.h"

#include <string.h>

static int log2_ceil(uint64_t x)
{
    int k = 0;
    while ((UINT64_C(1) << k) < x)
        k++;
    return k;
}

static pl_status table_alloc(pl_bpe_table *t, int bits)
{
    size_t cap = (size_t)1 << bits;
    t->slots = pl_malloc(cap * sizeof *t->slots);
    if (!t->slots)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a BPE merge table of %zu slots", cap);
    for (size_t i = 0; i < cap; i++)
        t->slots[i].key = PL_BPE_EMPTY;
    t->mask = cap - 1;
    t->shift = 64 - bits;
    t->n = 0;
    return PL_OK;
}

pl_status pl_bpe_table_init(pl_bpe_table *t, int64_t expected)
{
    memset(t, 0, sizeof *t);
    return table_alloc(t, log2_ceil(expected < 8 ? 16 : 2 * (uint64_t)expected));
}

void pl_bpe_table_free(pl_bpe_table *t)
{
    pl_free(t->slots);
    memset(t, 0, sizeof *t);
}

static pl_bpe_pair *slot_for(pl_bpe_table *t, uint64_t key)
{
    for (uint64_t i = (key * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift;; i = (i + 1) & t->mask) {
        pl_bpe_pair *p = &t->slots[i];
        if (p->key == key || p->key == PL_BPE_EMPTY)
            return p;
    }
}

pl_status pl_bpe_table_put(pl_bpe_table *t, int32_t a, int32_t b, uint32_t rank, int32_t merged,
                           int keep_lower)
{
    if ((uint64_t)(t->n + 1) * 2 > t->mask + 1) { /* keep the load factor under 1/2 */
        pl_bpe_table old = *t;
        pl_status st = table_alloc(t, 64 - old.shift + 1);
        if (st) {
            *t = old;
            return st;
        }
        for (uint64_t i = 0; i <= old.mask; i++)
            if (old.slots[i].key != PL_BPE_EMPTY)
                *slot_for(t, old.slots[i].key) = old.slots[i];
        t->n = old.n;
        pl_free(old.slots);
    }
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    pl_bpe_pair *p = slot_for(t, key);
    if (p->key == PL_BPE_EMPTY)
        t->n++;
    else if (keep_lower && p->rank <= rank)
        return PL_OK;
    *p = (pl_bpe_pair){key, rank, merged};
    return PL_OK;
}

void pl_bpe_scratch_free(pl_bpe_scratch *s)
{
    pl_free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

/* A candidate merge: key = rank << 32 | left position, smallest first. */
typedef struct cand {
    uint64_t key;
    int32_t merged;
} cand;

static void heap_push(cand *h, int64_t *len, cand x)
{
    int64_t i = (*len)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (h[p].key <= x.key)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static cand heap_pop(cand *h, int64_t *len)
{
    cand top = h[0], x = h[--(*len)];
    int64_t n = *len, i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1].key < h[c].key)
            c++;
        if (x.key <= h[c].key)
            break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0)
        h[i] = x;
    return top;
}

static void push_pair(const pl_bpe_table *t, cand *heap, int64_t *hn, const int32_t *ids,
                      int32_t left, int32_t right)
{
    const pl_bpe_pair *p = pl_bpe_table_find(t, ids[left], ids[right]);
    if (p)
        heap_push(heap, hn, (cand){(uint64_t)p->rank << 32 | (uint32_t)left, p->merged});
}

pl_status pl_bpe_merge(const pl_bpe_table *t, int32_t *ids, int64_t *np, pl_bpe_scratch *s)
{
    int64_t n = *np;
    if (n < 2)
        return PL_OK;
    if (n > INT32_MAX)
        return pl_errorf(PL_ERR_UNSUPPORTED, "BPE: a pre-token of %lld symbols", (long long)n);
    /* next[n], prev[n], then the heap: n - 1 initial pairs plus 2 per merge. */
    size_t links, heap_bytes, bytes;
    if (pl_mul_size((size_t)n, 2 * sizeof(int32_t), &links) ||
        pl_mul_size((size_t)n, 3 * sizeof(cand), &heap_bytes) ||
        pl_add_size(links + 8, heap_bytes, &bytes))
        return pl_errorf(PL_ERR_NOMEM, "BPE: a pre-token of %lld symbols is too large", (long long)n);
    if (bytes > s->cap) {
        void *p = pl_malloc(bytes);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "BPE: out of memory merging %lld symbols", (long long)n);
        pl_free(s->buf);
        s->buf = p;
        s->cap = bytes;
    }
    int32_t *next = s->buf, *prev = next + n; /* prev[i] == -2: merged away */
    cand *heap = (cand *)(((uintptr_t)(prev + n) + 7) & ~(uintptr_t)7);
    int64_t hn = 0;
    for (int64_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (int32_t i = 0; i + 1 < n; i++)
        push_pair(t, heap, &hn, ids, i, i + 1);
    while (hn > 0) {
        cand top = heap_pop(heap, &hn);
        int32_t i = (int32_t)(uint32_t)top.key, j;
        if (prev[i] == -2 || (j = next[i]) < 0)
            continue;
        const pl_bpe_pair *p = pl_bpe_table_find(t, ids[i], ids[j]);
        if (!p || p->merged != top.merged)
            continue; /* stale: the pair here changed since it was pushed */
        ids[i] = top.merged;
        prev[j] = -2;
        next[i] = next[j];
        if (next[j] >= 0)
            prev[next[j]] = i;
        if (prev[i] >= 0)
            push_pair(t, heap, &hn, ids, prev[i], i);
        if (next[i] >= 0)
            push_pair(t, heap, &hn, ids, i, next[i]);
    }
    int64_t w = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) /* symbol 0 is never merged away */
        ids[w++] = ids[i];
    *np = w;
    return PL_OK;
}
