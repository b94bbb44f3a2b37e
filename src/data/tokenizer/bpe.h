/* BPE merging as Hugging Face `tokenizers` and SentencePiece do it, shared by the
 * HuggingFaceTokenizer (hf_*.c) and SentencePiece (sp_*.c) tokenizers.
 *
 * A table maps an adjacent pair of ids (a, b) to (rank, merged id). pl_bpe_merge
 * repeatedly merges the pair with the lowest rank, the leftmost one among equal
 * ranks, one merge at a time: after each merge the new pairs with its neighbours
 * join the candidates at once. This is `tokenizers`' Word::merge_all (a heap of
 * (rank, position), an entry still valid when the pair at its position still merges
 * to the same id) and SentencePiece's bpe_model.cc Encode (an agenda of (score,
 * left), highest score first, an entry valid while both symbols are unchanged):
 * for SentencePiece the rank of a pair is the rank of the merged piece's score.
 * GPT-2's bpe() differs (it merges every occurrence of the best pair in one pass
 * before looking again): gpt2_merge.c.
 *
 * Negative ids never merge (the table holds none): callers use them to mark
 * symbols that must stay as they are (unknown characters, frozen pieces). */
#ifndef PL_DATA_TOKENIZER_BPE_H
#define PL_DATA_TOKENIZER_BPE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pl_bpe_pair {
    uint64_t key; /* (uint32)a << 32 | (uint32)b; PL_BPE_EMPTY: a free slot */
    uint32_t rank;
    int32_t merged;
} pl_bpe_pair;

#define PL_BPE_EMPTY UINT64_MAX

typedef struct pl_bpe_table {
    pl_bpe_pair *slots;
    uint64_t mask;
    int shift;
    int64_t n;
} pl_bpe_table;

/* An empty table sized for about `expected` pairs. */
pl_status pl_bpe_table_init(pl_bpe_table *t, int64_t expected);
void pl_bpe_table_free(pl_bpe_table *t);

/* Sets (a, b) -> (rank, merged), a, b >= 0; a pair already present takes the new
 * values (as a Python dict or a Rust HashMap built from the merges in order). With
 * keep_lower, an existing entry with a lower rank is kept instead. Grows the table. */
pl_status pl_bpe_table_put(pl_bpe_table *t, int32_t a, int32_t b, uint32_t rank, int32_t merged,
                           int keep_lower);

static inline const pl_bpe_pair *pl_bpe_table_find(const pl_bpe_table *t, int32_t a, int32_t b)
{
    if (a < 0 || b < 0)
        return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t i = (key * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift;; i = (i + 1) & t->mask) {
        const pl_bpe_pair *p = &t->slots[i];
        if (p->key == key)
            return p;
        if (p->key == PL_BPE_EMPTY)
            return NULL;
    }
}

/* Scratch memory for merging; zero-initialised is empty. */
typedef struct pl_bpe_scratch {
    void *buf;
    size_t cap;
} pl_bpe_scratch;

void pl_bpe_scratch_free(pl_bpe_scratch *s);

/* Merges ids[0..n) in place and returns the new length. Fails only for memory. */
pl_status pl_bpe_merge(const pl_bpe_table *t, int32_t *ids, int64_t *n, pl_bpe_scratch *s);

#endif
