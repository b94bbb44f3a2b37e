/* Byte trie: children as sibling lists (few strings share a prefix here). */
#include "data/tokenizer/trie.h"

#include "base/alloc.h"

#include <string.h>

static pl_status node_new(pl_trie *t, uint8_t byte, int32_t *out)
{
    if (t->n == t->cap) {
        int32_t cap = t->cap ? 2 * t->cap : 256;
        pl_trie_node *p = pl_realloc(t->nodes, (size_t)cap * sizeof *p);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "out of memory for a trie of %d nodes", (int)cap);
        t->nodes = p;
        t->cap = cap;
    }
    t->nodes[t->n] = (pl_trie_node){-1, -1, -1, byte};
    *out = t->n++;
    return PL_OK;
}

pl_status pl_trie_add(pl_trie *t, const char *str, size_t n, int32_t token)
{
    pl_status st;
    int32_t node;
    if (n == 0)
        return PL_OK;
    if (t->n == 0) {
        if ((st = node_new(t, 0, &node)) != PL_OK)
            return st;
        for (int b = 0; b < 256; b++)
            t->root[b] = -1;
    }
    const uint8_t *s = (const uint8_t *)str;
    node = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = t->nodes[node].child, prev = -1;
        while (c >= 0 && t->nodes[c].byte != s[i]) {
            prev = c;
            c = t->nodes[c].sibling;
        }
        if (c < 0) {
            if ((st = node_new(t, s[i], &c)) != PL_OK)
                return st;
            if (prev < 0)
                t->nodes[node].child = c;
            else
                t->nodes[prev].sibling = c;
            if (node == 0)
                t->root[s[i]] = c;
        }
        node = c;
    }
    if (t->nodes[node].token < 0)
        t->nodes[node].token = token;
    t->first[s[0] >> 3] |= (uint8_t)(1u << (s[0] & 7));
    return PL_OK;
}

void pl_trie_free(pl_trie *t)
{
    pl_free(t->nodes);
    memset(t, 0, sizeof *t);
}

size_t pl_trie_longest(const pl_trie *t, const uint8_t *s, size_t n, size_t at, int32_t *token)
{
    if (t->n == 0 || at >= n || !(t->first[s[at] >> 3] & (1u << (s[at] & 7))))
        return 0;
    int32_t node = 0;
    size_t best = 0;
    for (size_t j = at; j < n; j++) {
        int32_t c = pl_trie_step(t, node, s[j]);
        if (c < 0)
            break;
        node = c;
        if (t->nodes[node].token >= 0) {
            *token = t->nodes[node].token;
            best = j + 1 - at;
        }
    }
    return best;
}

size_t pl_trie_find(const pl_trie *t, const uint8_t *s, size_t n, size_t from, size_t *len,
                    int32_t *token)
{
    if (t->n == 0)
        return n;
    for (size_t i = from; i < n; i++)
        if ((*len = pl_trie_longest(t, s, n, i, token)) > 0)
            return i;
    return n;
}
