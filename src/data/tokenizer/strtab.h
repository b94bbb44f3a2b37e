/* A table of distinct strings with dense ids 0..n-1 in insertion order: the
 * vocabularies of the WordPiece and SMILES tokenizers. Strings live in one
 * buffer (each NUL-terminated); lookups go through an open-addressing hash
 * table. A zeroed pl_strtab is empty and valid. */
#ifndef PL_DATA_TOKENIZER_STRTAB_H
#define PL_DATA_TOKENIZER_STRTAB_H

#include "base/vec.h"

typedef struct pl_strtab {
    pl_bytes text;   /* every string followed by a NUL */
    pl_ids off, len; /* per id: offset into text, byte length */
    int32_t n;
    int32_t *slots;  /* id or -1 */
    uint64_t mask;   /* slots - 1 */
    size_t max_len;  /* longest string in bytes */
} pl_strtab;

/* Adds s[0..n) unless present. *id receives its id either way; *added is 1
 * when it was new. On failure the table is unchanged. */
pl_status pl_strtab_add(pl_strtab *t, const char *s, size_t n, int32_t *id, int *added);

/* Id of s[0..n), or -1. */
int32_t pl_strtab_find(const pl_strtab *t, const char *s, size_t n);

/* Id of the concatenation prefix[0..np) + s[0..ns) ("##" + piece), or -1. */
int32_t pl_strtab_find2(const pl_strtab *t, const char *prefix, size_t np, const char *s,
                        size_t ns);

static inline const char *pl_strtab_str(const pl_strtab *t, int32_t id)
{
    return t->text.data + t->off.data[id];
}

static inline size_t pl_strtab_len(const pl_strtab *t, int32_t id)
{
    return (size_t)t->len.data[id];
}

void pl_strtab_free(pl_strtab *t);

#endif
