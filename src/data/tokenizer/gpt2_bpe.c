/* GPT2BPETokenizer: GPT-2's byte-level BPE (Megatron's GPT2BPETokenizer, OpenAI's
 * encoder.py, tiktoken's r50k_base).
 *
 * encode: UTF-8 text -> pre-tokens (gpt2_pretok.c) -> for each, the ids of its bytes
 * merged by rank (gpt2_merge.c). A word cache (word_cache.h) maps a pre-token's bytes
 * to its ids with bounded memory (Megatron's cache dict grows without limit).
 * decode: ids -> the bytes each token stands for, concatenated (raw bytes: no UTF-8
 * repair, unlike Megatron's errors='replace').
 *
 * The tables (gpt2_vocab.c) are read-only and shared by forks through a reference
 * count; each handle has its own cache and scratch, so one handle per thread. */
#include "data/tokenizer/gpt2_internal.h"
#include "data/tokenizer/tokenizer.h"

#include "base/alloc.h"

#include <string.h>

#define WORD_KEEP (1 << 16)    /* buffers grown past this many symbols are released */

typedef struct gpt2 {
    pl_tokenizer base;
    pl_gpt2_vocab *v;
    pl_word_cache cache;
    int32_t *word; /* ids of the pre-token being merged */
    int64_t word_cap;
    pl_gpt2_scratch scratch;
} gpt2;

static const pl_tokenizer_ops gpt2_ops;

/* --- handles --------------------------------------------------------------------------- */

static pl_status word_reserve(gpt2 *g, int64_t n)
{
    if (n > g->word_cap) {
        int32_t *w = pl_malloc((size_t)n * sizeof *w);
        if (!w)
            return pl_errorf(PL_ERR_NOMEM, "GPT-2 BPE: out of memory for a pre-token of %lld bytes",
                             (long long)n);
        pl_free(g->word);
        g->word = w;
        g->word_cap = n;
    }
    return pl_gpt2_scratch_reserve(&g->scratch, n);
}

static void handle_free(gpt2 *g)
{
    if (!g)
        return;
    pl_word_cache_free(&g->cache);
    pl_free(g->word);
    pl_gpt2_scratch_free(&g->scratch);
    pl_gpt2_vocab_release(g->v);
    pl_free(g);
}

/* A new handle on v (takes a reference) with an empty cache. */
static pl_status handle_new(pl_gpt2_vocab *v, pl_tokenizer **out)
{
    pl_status st = PL_OK;
    *out = NULL;
    gpt2 *g = pl_calloc(1, sizeof *g);
    if (!g)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a GPT-2 tokenizer handle");
    PL_TRY(pl_word_cache_init(&g->cache, "GPT-2"));
    PL_TRY(word_reserve(g, PL_WORD_CACHE_MAX_WORD));
    pl_gpt2_vocab_retain(v);
    g->v = v;
    g->base.ops = &gpt2_ops;
    g->base.type = "GPT2BPETokenizer";
    g->base.vocab_size = v->n;
    g->base.eod = v->eod;
    g->base.impl = g;
    *out = &g->base;
    return PL_OK;
fail:
    handle_free(g);
    return st;
}

/* --- encode -------------------------------------------------------------------------------- */

static pl_status append(pl_ids *out, const int32_t *ids, int64_t k)
{
    if (out->n + k > out->cap) {
        pl_status st = pl_ids_reserve(out, out->n + k);
        if (st)
            return st;
    }
    int32_t *d = out->data + out->n;
    for (int64_t i = 0; i < k; i++)
        d[i] = ids[i];
    out->n += k;
    return PL_OK;
}

/* Appends the ids of one pre-token w[0..n). */
static pl_status encode_word(gpt2 *g, const uint8_t *w, size_t n, pl_ids *out)
{
    const pl_gpt2_vocab *v = g->v;
    if (n == 1)
        return append(out, &v->byte_id[w[0]], 1);
    uint64_t h = 0;
    if (n <= PL_WORD_CACHE_MAX_WORD) {
        int nids;
        h = pl_word_hash(w, n);
        const int32_t *ids = pl_word_cache_get(&g->cache, w, n, h, &nids);
        if (ids)
            return append(out, ids, nids);
    }
    if (n > INT32_MAX)
        return pl_errorf(PL_ERR_UNSUPPORTED, "GPT-2 BPE: a pre-token of %zu bytes (over 2 GiB)", n);
    pl_status st = word_reserve(g, (int64_t)n);
    if (st)
        return st;
    for (size_t k = 0; k < n; k++)
        g->word[k] = v->byte_id[w[k]];
    int64_t m = pl_gpt2_merge(v, g->word, (int64_t)n, &g->scratch);
    if (n <= PL_WORD_CACHE_MAX_WORD)
        pl_word_cache_put(&g->cache, w, n, h, g->word, m);
    st = append(out, g->word, m);
    if (n > WORD_KEEP) {
        pl_free(g->word);
        g->word = NULL;
        g->word_cap = 0;
        pl_gpt2_scratch_free(&g->scratch);
    }
    return st;
}

static pl_status gpt2_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    gpt2 *g = t->impl;
    const uint8_t *s = (const uint8_t *)text;
    int64_t n0 = out->n;
    pl_status st = PL_OK;
    for (size_t pos = 0, end; pos < len; pos = end) {
        if (pl_gpt2_pretok_next(s, len, pos, &end) < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "invalid UTF-8 at byte offset %zu", end);
            goto fail;
        }
        PL_TRY(encode_word(g, s + pos, end - pos, out));
    }
    return PL_OK;
fail:
    out->n = n0;
    return st;
}

/* --- decode, token_id, fork, free ------------------------------------------------------------- */

static pl_status gpt2_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out)
{
    const pl_gpt2_vocab *v = ((const gpt2 *)t->impl)->v;
    size_t total = out->n;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= v->n)
            return pl_errorf(PL_ERR_ARG, "GPT-2 decode: token id %d (at position %lld) is not in the "
                             "vocabulary (ids 0..%d)", id, (long long)i, v->n - 1);
        if (pl_add_size(total, v->raw_off[id + 1] - v->raw_off[id], &total))
            return pl_errorf(PL_ERR_NOMEM, "GPT-2 decode: output too large");
    }
    pl_status st = pl_bytes_reserve(out, total);
    if (st)
        return st;
    char *d = out->data + out->n;
    for (int64_t i = 0; i < n; i++) {
        size_t off = v->raw_off[ids[i]], len = v->raw_off[ids[i] + 1] - off;
        memcpy(d, v->raw + off, len);
        d += len;
    }
    out->n = total;
    out->data[total] = '\0';
    return PL_OK;
}

static int32_t gpt2_token_id(const pl_tokenizer *t, const char *tok, size_t len)
{
    return pl_gpt2_vocab_find(((const gpt2 *)t->impl)->v, tok, len);
}

static pl_status gpt2_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    return handle_new(((const gpt2 *)t->impl)->v, out);
}

static void gpt2_free(pl_tokenizer *t) { handle_free(t->impl); }

static const pl_tokenizer_ops gpt2_ops = {gpt2_encode, gpt2_decode, gpt2_token_id, gpt2_fork, gpt2_free};

pl_status pl_gpt2_tokenizer_open(pl_tokenizer **out, const char *vocab_file, const char *merge_file)
{
    pl_gpt2_vocab *v;
    *out = NULL;
    pl_status st = pl_gpt2_vocab_load(&v, vocab_file, merge_file);
    if (st)
        return st;
    st = handle_new(v, out);
    pl_gpt2_vocab_release(v); /* the handle holds its own reference */
    return st;
}
