/* PretokenizedTokenizer: text that is already tokens, separated by whitespace,
 * with a vocabulary JSON (token -> id).
 *
 * The corpus format (seed 003): each document is a line of whitespace-separated
 * tokens; a token missing from the vocabulary is <unk>; <|endoftext|> ends a
 * document (--append-eod adds it, as for GPT-2). Megatron and Megatron-DeepSpeed
 * have no tokenizer type for it, so the name is plait's. In Python:
 *     ids = [vocab.get(t, vocab["<unk>"]) for t in text.split()]
 * str.split() splits on runs of Unicode whitespace (the set below) and drops
 * empty strings. decode() joins the tokens with one space (whitespace is not
 * kept, so decode(encode(x)) normalises it).
 *
 * The vocabulary is checked as GPT-2's encoder.json is: a JSON object, ids
 * integers 0..N-1 each used once, each spelling once; <unk> and <|endoftext|>
 * must be in it. Errors name the file and the token. */
#include "data/tokenizer/strtab.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/vocab_json.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef struct pretok_vocab {
    atomic_int refs;
    pl_strtab tok; /* strtab id == vocabulary id */
    int32_t unk, eod;
} pretok_vocab;

typedef struct pretok_tok {
    pl_tokenizer base;
    pretok_vocab *v;
} pretok_tok;

static const pl_tokenizer_ops pretok_ops;

/* Length of the Python whitespace character at s[0..n), or 0: ASCII \t\n\v\f\r,
 * \x1c-\x1f and space; U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000 (what str.isspace() accepts). */
static size_t space_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f))
        return 1;
    if (c == 0xC2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xA0))
        return 2;
    if (n < 3)
        return 0;
    if (c == 0xE1 && s[1] == 0x9A && s[2] == 0x80)
        return 3;
    if (c == 0xE2 && s[1] == 0x80 &&
        ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
        return 3;
    if (c == 0xE2 && s[1] == 0x81 && s[2] == 0x9F)
        return 3;
    if (c == 0xE3 && s[1] == 0x80 && s[2] == 0x80)
        return 3;
    return 0;
}

static pl_status pretok_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    const pretok_vocab *v = ((const pretok_tok *)t->impl)->v;
    const unsigned char *s = (const unsigned char *)text;
    int64_t n0 = out->n;
    size_t i = 0;
    while (i < len) {
        size_t w = space_len(s + i, len - i);
        if (w) {
            i += w;
            continue;
        }
        size_t b = i;
        while (i < len && !space_len(s + i, len - i))
            i++;
        int32_t id = pl_strtab_find(&v->tok, text + b, i - b);
        pl_status st = pl_ids_push(out, id >= 0 ? id : v->unk);
        if (st != PL_OK) {
            out->n = n0;
            return st;
        }
    }
    return PL_OK;
}

static pl_status pretok_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out)
{
    const pretok_vocab *v = ((const pretok_tok *)t->impl)->v;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->tok.n)
            return pl_errorf(PL_ERR_ARG, "PretokenizedTokenizer decode: unknown id %d (vocabulary "
                             "has %d tokens)", ids[i], v->tok.n);
    size_t n0 = out->n;
    for (int64_t i = 0; i < n; i++) {
        pl_status st = i ? pl_bytes_append(out, " ", 1) : PL_OK;
        if (st == PL_OK)
            st = pl_bytes_append(out, pl_strtab_str(&v->tok, ids[i]), pl_strtab_len(&v->tok, ids[i]));
        if (st != PL_OK) {
            out->n = n0;
            if (out->data)
                out->data[n0] = '\0';
            return st;
        }
    }
    return PL_OK;
}

static int32_t pretok_token_id(const pl_tokenizer *t, const char *tok, size_t len)
{
    return pl_strtab_find(&((const pretok_tok *)t->impl)->v->tok, tok, len);
}

static void vocab_release(pretok_vocab *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    pl_strtab_free(&v->tok);
    pl_free(v);
}

static void pretok_free(pl_tokenizer *t)
{
    pretok_tok *m = t->impl;
    vocab_release(m->v);
    pl_free(m);
}

static pl_status pretok_handle(pretok_vocab *v, pl_tokenizer **out)
{
    pretok_tok *m = pl_calloc(1, sizeof *m);
    if (!m)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening PretokenizedTokenizer");
    atomic_fetch_add(&v->refs, 1);
    m->v = v;
    m->base.ops = &pretok_ops;
    m->base.type = "PretokenizedTokenizer";
    m->base.vocab_size = v->tok.n;
    m->base.eod = v->eod;
    m->base.impl = m;
    *out = &m->base;
    return PL_OK;
}

static pl_status pretok_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    *out = NULL;
    return pretok_handle(((const pretok_tok *)t->impl)->v, out);
}

static const pl_tokenizer_ops pretok_ops = {
    .encode = pretok_encode,
    .decode = pretok_decode,
    .token_id = pretok_token_id,
    .fork = pretok_fork,
    .free = pretok_free,
};

/* Fills v->tok from the JSON object root, in id order. */
static pl_status load_vocab(pretok_vocab *v, const cJSON *root, const char *path)
{
    pl_status st = PL_OK;
    const cJSON **by_id = NULL;
    int32_t n;
    PL_TRY(pl_vocab_json_by_id(root, path, &by_id, &n));
    for (int32_t id = 0; id < n; id++) {
        const char *s = by_id[id]->string;
        int32_t got;
        int added;
        PL_TRY(pl_strtab_add(&v->tok, s, strlen(s), &got, &added));
        if (!added) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: token \"%.200s\" appears twice (ids %d and %d)", path,
                           s, got, id);
            goto fail;
        }
    }
    v->unk = pl_strtab_find(&v->tok, "<unk>", 5);
    v->eod = pl_strtab_find(&v->tok, "<|endoftext|>", 13);
    if (v->unk < 0 || v->eod < 0)
        st = pl_errorf(PL_ERR_FORMAT, "%s: no %s token (PretokenizedTokenizer maps unknown tokens to "
                       "<unk> and ends documents with <|endoftext|>)", path,
                       v->unk < 0 ? "<unk>" : "<|endoftext|>");
fail:
    pl_free(by_id);
    return st;
}

pl_status pl_pretok_tokenizer_open(pl_tokenizer **out, const char *vocab_file)
{
    pl_status st = PL_OK;
    char *buf = NULL;
    size_t size = 0;
    cJSON *root = NULL;
    *out = NULL;
    pretok_vocab *v = pl_calloc(1, sizeof *v);
    if (!v)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", vocab_file);
    atomic_init(&v->refs, 1);
    st = pl_file_read_all(vocab_file, &buf, &size);
    if (st != PL_OK) {
        st = pl_error_wrap(st, "--vocab-file");
        goto fail;
    }
    pl_json_init();
    pl_json_oom_take();
    const char *err = NULL;
    root = cJSON_ParseWithLengthOpts(buf, size, &err, 0);
    if (!root) {
        if (pl_json_oom_take())
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory parsing JSON", vocab_file);
        else
            st = pl_errorf(PL_ERR_FORMAT, "%s: malformed JSON at byte %lld (expected an object "
                           "of token -> id)", vocab_file, (long long)(err ? err - buf : 0));
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected a JSON object of token -> id", vocab_file);
        goto fail;
    }
    PL_TRY(load_vocab(v, root, vocab_file));
    st = pretok_handle(v, out);
fail:
    cJSON_Delete(root);
    pl_free(buf);
    vocab_release(v);
    return st;
}
