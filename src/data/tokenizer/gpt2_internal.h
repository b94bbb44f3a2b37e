/* GPT-2 byte-level BPE: what the files of this tokenizer share (not a public header).
 *
 *   gpt2_vocab.c   loads encoder.json + vocab.bpe into a read-only, reference-counted
 *                  pl_gpt2_vocab (token spellings, raw bytes, pair -> merge table)
 *   gpt2_pretok.c  splits UTF-8 text into pre-tokens the way GPT-2's regex does
 *   gpt2_merge.c   applies the merges to the byte ids of one pre-token
 *   gpt2_bpe.c     the pl_tokenizer: word cache, encode, decode, token_id, fork */
#ifndef PL_DATA_TOKENIZER_GPT2_INTERNAL_H
#define PL_DATA_TOKENIZER_GPT2_INTERNAL_H

#include "base/status.h"
#include "data/tokenizer/word_cache.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PL_GPT2_NO_RANK UINT32_MAX
#define PL_GPT2_EMPTY_PAIR UINT64_MAX /* key of a free pair slot: (-1, -1) */

/* One merge "a b" of vocab.bpe: key = id(a) << 32 | id(b). */
typedef struct pl_gpt2_pair {
    uint64_t key;
    uint32_t rank;  /* line index among the merges: lower merges first */
    int32_t merged; /* id of the spelling a+b */
} pl_gpt2_pair;

typedef struct pl_gpt2_vocab {
    atomic_int refs;     /* handles sharing these tables; the last one frees them */
    int32_t n;           /* tokens; ids are exactly 0..n-1 */
    int32_t eod;         /* id of <|endoftext|> */
    int32_t byte_id[256]; /* id of the one-byte token of each byte */
    int64_t n_merges;
    /* Spelling of each token as in encoder.json (UTF-8 over GPT-2's byte alphabet),
     * id i at spell[spell_off[i] .. spell_off[i+1]); found by spelling via spell_table. */
    char *spell;
    size_t *spell_off;
    int32_t *spell_table; /* open addressing over ids, -1 = free */
    uint64_t spell_mask;
    /* The bytes each token stands for (decode), laid out like spell. */
    uint8_t *raw;
    size_t *raw_off;
    /* pair -> (rank, merged id), open addressing with linear probing */
    pl_gpt2_pair *pairs;
    uint64_t pair_mask;
    int pair_shift; /* 64 - log2(capacity) */
} pl_gpt2_vocab;

#define PL_GPT2_ALPHABET_END 0x144 /* the byte alphabet's code points are below U+0144 */

/* GPT-2's byte alphabet (bytes_to_unicode): cp_of[b] is the code point standing for
 * byte b (printable Latin-1 bytes stand for themselves, the other 68 for U+0100..);
 * byte_of[cp] is the inverse, -1 for code points that stand for no byte. */
void pl_gpt2_byte_alphabet(uint32_t cp_of[256], int16_t byte_of[PL_GPT2_ALPHABET_END]);

/* Loads the tables (refs = 1). Errors name the file and the line or token at fault. */
pl_status pl_gpt2_vocab_load(pl_gpt2_vocab **out, const char *encoder_json, const char *vocab_bpe);
void pl_gpt2_vocab_retain(pl_gpt2_vocab *v);
/* Drops one reference; frees the tables with the last. NULL is ignored. */
void pl_gpt2_vocab_release(pl_gpt2_vocab *v);
/* Id of the token spelled s[0..len) in encoder.json, or -1. */
int32_t pl_gpt2_vocab_find(const pl_gpt2_vocab *v, const char *s, size_t len);

/* The merge of the adjacent pair (a, b), or NULL if vocab.bpe has none. */
static inline const pl_gpt2_pair *pl_gpt2_pair_find(const pl_gpt2_vocab *v, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t i = (key * UINT64_C(0x9E3779B97F4A7C15)) >> v->pair_shift;
    for (;; i = (i + 1) & v->pair_mask) {
        const pl_gpt2_pair *p = &v->pairs[i];
        if (p->key == key)
            return p;
        if (p->key == PL_GPT2_EMPTY_PAIR)
            return NULL;
    }
}

/* Finds the pre-token that starts at byte pos (< n) of the UTF-8 text s: sets *end
 * (> pos) and returns 0, or returns -1 with *end = offset of the first invalid
 * UTF-8 sequence at or after pos that the scan reached (it reads one code point past
 * the token at most, so a left-to-right caller meets errors in text order). */
int pl_gpt2_pretok_next(const uint8_t *s, size_t n, size_t pos, size_t *end);
/* The same with \s = Unicode White_Space, as Oniguruma and Python's regex have it. */
int pl_gpt2_pretok_next_unicode(const uint8_t *s, size_t n, size_t pos, size_t *end);

/* Scratch memory for merging one pre-token; zero-initialised is empty. */
typedef struct pl_gpt2_scratch {
    void *buf;
    size_t cap;
} pl_gpt2_scratch;

/* Longest pre-token merged by the simple quadratic loop; longer ones use the heap. */
#define PL_GPT2_MERGE_SMALL_MAX 64

/* Makes s large enough for either merge algorithm on n symbols. */
pl_status pl_gpt2_scratch_reserve(pl_gpt2_scratch *s, int64_t n);
void pl_gpt2_scratch_free(pl_gpt2_scratch *s);

/* GPT-2's bpe() on ids[0..n) in place: while some adjacent pair has a merge, take the
 * lowest-ranked pair and merge all its non-overlapping occurrences left to right.
 * Returns the new length. s must be reserved for n. The two algorithms give the same
 * result; pl_gpt2_merge picks by length. */
int64_t pl_gpt2_merge_small(const pl_gpt2_vocab *v, int32_t *ids, int64_t n, pl_gpt2_scratch *s);
int64_t pl_gpt2_merge_heap(const pl_gpt2_vocab *v, int32_t *ids, int64_t n, pl_gpt2_scratch *s);
int64_t pl_gpt2_merge(const pl_gpt2_vocab *v, int32_t *ids, int64_t n, pl_gpt2_scratch *s);

#endif
