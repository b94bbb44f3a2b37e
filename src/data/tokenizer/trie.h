/* A byte trie for leftmost-longest matching of a set of strings: Hugging Face
 * tokenizers' added tokens (an Aho-Corasick automaton with MatchKind::LeftmostLongest
 * there) and SentencePiece's user-defined symbols (a Darts prefix search there).
 * A zeroed pl_trie is empty and valid. */
#ifndef PL_DATA_TOKENIZER_TRIE_H
#define PL_DATA_TOKENIZER_TRIE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_trie_node {
    int32_t child;   /* first child, -1 if none */
    int32_t sibling; /* next sibling, -1 if none */
    int32_t token;   /* the value of the string ending here, -1 if none */
    uint8_t byte;
} pl_trie_node;

typedef struct pl_trie {
    pl_trie_node *nodes; /* node 0 is the root */
    int32_t n, cap;
    uint8_t first[32];   /* bitmap of the bytes a string can start with */
    int32_t root[256];   /* the root's child for each byte, -1 if none (valid when n > 0) */
} pl_trie;

/* Adds s[0..n) with value token (>= 0). An empty string is ignored; for a string
 * added twice the first value stays. */
pl_status pl_trie_add(pl_trie *t, const char *s, size_t n, int32_t token);
void pl_trie_free(pl_trie *t);

/* One step down from node (0: the root) by byte b: the child, or -1. */
static inline int32_t pl_trie_step(const pl_trie *t, int32_t node, uint8_t b)
{
    if (node == 0)
        return t->n ? t->root[b] : -1;
    int32_t c = t->nodes[node].child;
    while (c >= 0 && t->nodes[c].byte != b)
        c = t->nodes[c].sibling;
    return c;
}

/* The longest string that starts s[at..n): its length (0 if none) and value. */
size_t pl_trie_longest(const pl_trie *t, const uint8_t *s, size_t n, size_t at, int32_t *token);

/* The leftmost match in s[from..n): returns its start (n if none) and sets *len and
 * *token to the longest string there. */
size_t pl_trie_find(const pl_trie *t, const uint8_t *s, size_t n, size_t from, size_t *len,
                    int32_t *token);

#endif
