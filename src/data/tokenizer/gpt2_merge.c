/* BPE merges on one pre-token, exactly as GPT-2's bpe() does them.
 *
 * bpe() repeats: find the adjacent pair with the lowest merge rank; merge every
 * occurrence of it in one left-to-right pass, skipping overlaps ("x x x" -> "xx x").
 * Merging all occurrences before looking again matters: a merge can create a pair
 * ranked below the one being merged, and bpe() still finishes the current pass first.
 *
 * Two algorithms give that result:
 *   small: the loop above over an array, O(n^2) pair look-ups but tiny constants;
 *          pre-tokens are mostly a few bytes.
 *   heap:  a linked list and a min-heap of (rank, position), O(n log n), for long
 *          pre-tokens (a megabyte without a space must not take hours). To keep
 *          bpe()'s order it takes all heap entries of the lowest rank at once, in
 *          position order, before any pair those merges create. */
#include "data/tokenizer/gpt2_internal.h"

#include "base/alloc.h"

#include <string.h>

/* Scratch layout for n symbols:
 *   small: uint64 packed[n]                       (rank << 32 | merged id)
 *   heap:  int32 next[n], prev[n]; uint64 heap[3n]; uint32 batch[3n]
 * The heap holds at most n - 1 initial pairs plus 2 per merge (at most n - 1 merges). */
static int scratch_bytes(int64_t n, size_t *bytes)
{
    size_t un = (size_t)n, a, b, c;
    if (n < 0 || pl_mul_size(un, 2 * sizeof(int32_t), &a) || pl_mul_size(un, 3 * sizeof(uint64_t), &b) ||
        pl_mul_size(un, 3 * sizeof(uint32_t), &c) || pl_add_size(a, b, &a) || pl_add_size(a, c, bytes))
        return -1;
    return 0;
}

pl_status pl_gpt2_scratch_reserve(pl_gpt2_scratch *s, int64_t n)
{
    size_t bytes;
    if (scratch_bytes(n < 16 ? 16 : n, &bytes))
        return pl_errorf(PL_ERR_NOMEM, "GPT-2 BPE: a pre-token of %lld bytes is too large", (long long)n);
    if (bytes <= s->cap)
        return PL_OK;
    void *p = pl_malloc(bytes);
    if (!p)
        return pl_errorf(PL_ERR_NOMEM, "GPT-2 BPE: out of memory merging a pre-token of %lld bytes",
                         (long long)n);
    pl_free(s->buf);
    s->buf = p;
    s->cap = bytes;
    return PL_OK;
}

void pl_gpt2_scratch_free(pl_gpt2_scratch *s)
{
    pl_free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

#define NO_PAIR UINT64_MAX

static uint64_t pair_packed(const pl_gpt2_vocab *v, int32_t a, int32_t b)
{
    const pl_gpt2_pair *p = pl_gpt2_pair_find(v, a, b);
    return p ? (uint64_t)p->rank << 32 | (uint32_t)p->merged : NO_PAIR;
}

int64_t pl_gpt2_merge_small(const pl_gpt2_vocab *v, int32_t *ids, int64_t n, pl_gpt2_scratch *s)
{
    uint64_t *pk = s->buf; /* pk[i]: the merge of (ids[i], ids[i+1]) */
    for (int64_t i = 0; i + 1 < n; i++)
        pk[i] = pair_packed(v, ids[i], ids[i + 1]);
    while (n > 1) {
        uint64_t best = NO_PAIR;
        for (int64_t i = 0; i + 1 < n; i++)
            if (pk[i] < best)
                best = pk[i];
        if (best == NO_PAIR)
            break;
        /* One pass: ranks are unique per pair, so pk[i] == best marks an occurrence.
         * w <= i throughout, so the rewrite is in place; pk[w - 1] is refreshed once
         * ids[w] is known, and a pair of two untouched symbols keeps its entry. */
        int32_t merged = (int32_t)(uint32_t)best;
        int64_t w = 0;
        int changed_prev = 0; /* ids[w - 1] is new */
        for (int64_t i = 0; i < n;) {
            int changed;
            if (i + 1 < n && pk[i] == best) {
                ids[w] = merged;
                i += 2;
                changed = 1;
            } else {
                ids[w] = ids[i];
                i += 1;
                changed = 0;
            }
            if (w > 0) {
                if (changed || changed_prev)
                    pk[w - 1] = pair_packed(v, ids[w - 1], ids[w]);
                else
                    pk[w - 1] = pk[i - 2]; /* same two symbols, old pair at i - 2 */
            }
            changed_prev = changed;
            w++;
        }
        n = w;
    }
    return n;
}

static void heap_push(uint64_t *h, int64_t *len, uint64_t x)
{
    int64_t i = (*len)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (h[p] <= x)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, int64_t *len)
{
    uint64_t top = h[0], x = h[--(*len)];
    int64_t n = *len, i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1] < h[c])
            c++;
        if (x <= h[c])
            break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0)
        h[i] = x;
    return top;
}

int64_t pl_gpt2_merge_heap(const pl_gpt2_vocab *v, int32_t *ids, int64_t n, pl_gpt2_scratch *s)
{
    if (n < 2)
        return n;
    int32_t *next = s->buf, *prev = next + n; /* ids[i] = -1 marks a node merged away */
    uint64_t *heap = (uint64_t *)(prev + n);  /* (rank << 32 | left node), min first */
    uint32_t *batch = (uint32_t *)(heap + 3 * n);
    int64_t hn = 0;
    for (int64_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (int64_t i = 0; i + 1 < n; i++) {
        const pl_gpt2_pair *p = pl_gpt2_pair_find(v, ids[i], ids[i + 1]);
        if (p)
            heap_push(heap, &hn, (uint64_t)p->rank << 32 | (uint64_t)i);
    }
    while (hn > 0) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t rank = (uint32_t)(top >> 32);
        int64_t nb = 0;
        batch[nb++] = (uint32_t)top;
        while (hn > 0 && (uint32_t)(heap[0] >> 32) == rank)
            batch[nb++] = (uint32_t)heap_pop(heap, &hn);
        for (int64_t k = 0; k < nb; k++) { /* ascending positions: left to right */
            int32_t i = (int32_t)batch[k], j;
            if (ids[i] < 0 || (j = next[i]) < 0)
                continue;
            const pl_gpt2_pair *p = pl_gpt2_pair_find(v, ids[i], ids[j]);
            if (!p || p->rank != rank)
                continue; /* stale: the pair here changed since it was pushed */
            ids[i] = p->merged;
            ids[j] = -1;
            next[i] = next[j];
            if (next[j] >= 0)
                prev[next[j]] = i;
            if (prev[i] >= 0 && (p = pl_gpt2_pair_find(v, ids[prev[i]], ids[i])))
                heap_push(heap, &hn, (uint64_t)p->rank << 32 | (uint32_t)prev[i]);
            if (next[i] >= 0 && (p = pl_gpt2_pair_find(v, ids[i], ids[next[i]])))
                heap_push(heap, &hn, (uint64_t)p->rank << 32 | (uint32_t)i);
        }
    }
    int64_t w = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) /* node 0 is never merged away */
        ids[w++] = ids[i];
    return w;
}

int64_t pl_gpt2_merge(const pl_gpt2_vocab *v, int32_t *ids, int64_t n, pl_gpt2_scratch *s)
{
    if (n <= PL_GPT2_MERGE_SMALL_MAX)
        return pl_gpt2_merge_small(v, ids, n, s);
    return pl_gpt2_merge_heap(v, ids, n, s);
}
