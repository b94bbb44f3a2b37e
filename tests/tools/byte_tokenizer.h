/* A byte-level tokenizer for tests (header-only; not part of the library).
 *
 * id = byte value, eod = 256, vocab_size 257 unless told otherwise (a larger
 * vocab_size exercises the int32 dtype). The rule is simple enough for a test
 * script to reproduce independently: Python's list(text.encode("utf-8")).
 * Optionally one byte value is "not in the vocabulary": encoding a text
 * holding it fails with PL_ERR_FORMAT naming its offset, as real tokenizers
 * do for input they cannot encode. Handles are pl_malloc'd, so fault
 * injection and leak counts cover them. */
#ifndef PL_TEST_BYTE_TOKENIZER_H
#define PL_TEST_BYTE_TOKENIZER_H

#include "base/alloc.h"
#include "data/tokenizer/tokenizer.h"

#include <string.h>

typedef struct byte_tok_config {
    int reject; /* byte value refused by encode, or -1 */
} byte_tok_config;

typedef struct byte_tok {
    pl_tokenizer t;
    byte_tok_config cfg;
} byte_tok;

static inline pl_status byte_tok_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    const byte_tok_config *c = t->impl;
    pl_status st = pl_ids_reserve(out, out->n + (int64_t)len);
    if (st)
        return st;
    for (size_t i = 0; i < len; i++) {
        int b = (unsigned char)text[i];
        if (b == c->reject)
            return pl_errorf(PL_ERR_FORMAT, "byte 0x%02x at offset %zu is not in the vocabulary", b,
                             i);
        out->data[out->n++] = b;
    }
    return PL_OK;
}

static inline pl_status byte_tok_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n,
                                        pl_bytes *out)
{
    (void)t;
    for (int64_t i = 0; i < n; i++) {
        pl_status st;
        if (ids[i] >= 0 && ids[i] < 256) {
            char b = (char)ids[i];
            st = pl_bytes_append(out, &b, 1);
        } else if (ids[i] == 256) {
            st = pl_bytes_append(out, "<eod>", 5);
        } else {
            return pl_errorf(PL_ERR_FORMAT, "id %d is not in the byte vocabulary", ids[i]);
        }
        if (st)
            return st;
    }
    return PL_OK;
}

static inline int32_t byte_tok_token_id(const pl_tokenizer *t, const char *tok, size_t len)
{
    (void)t;
    if (len == 1)
        return (unsigned char)tok[0];
    if (len == 5 && memcmp(tok, "<eod>", 5) == 0)
        return 256;
    return -1;
}

static inline pl_status byte_tok_fork(const pl_tokenizer *t, pl_tokenizer **out);

static inline void byte_tok_free(pl_tokenizer *t) { pl_free(t); }

static const pl_tokenizer_ops byte_tok_ops = {byte_tok_encode, byte_tok_decode, byte_tok_token_id,
                                              byte_tok_fork, byte_tok_free};

/* A new handle; reject is a byte value refused by encode, or -1. */
static inline pl_status byte_tok_open(pl_tokenizer **out, int64_t vocab_size, int reject)
{
    byte_tok *b = pl_calloc(1, sizeof *b);
    *out = NULL;
    if (!b)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening the byte tokenizer");
    b->cfg.reject = reject;
    b->t.ops = &byte_tok_ops;
    b->t.type = "ByteTokenizer";
    b->t.vocab_size = vocab_size;
    b->t.eod = 256;
    b->t.impl = &b->cfg;
    *out = &b->t;
    return PL_OK;
}

static inline pl_status byte_tok_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    const byte_tok_config *c = t->impl;
    return byte_tok_open(out, t->vocab_size, c->reject);
}

#endif
