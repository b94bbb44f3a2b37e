/* MegaMolBART's SMILES tokenizer and vocabulary builder.
 *
 * MegaMolBART (nemo_chem/tokenizer/tokenizer.py, MolEncTokenizer) compiles
 *     "(" + extra tokens, each with ()[].| escaped, "|"-joined + "|"
 *         + REGEX + "|.)"
 *     REGEX = \[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\\\|\/|:|~|@|\?|>|\*|\$|\%[0-9]{2}|[0-9]
 * and tokenizes with re.findall: at each position the first alternative that
 * matches wins, and a position where none matches (only a newline: "." does
 * not take it) is skipped. The matcher below is that alternation written out
 * by hand. Note "\\\\" in the raw-string REGEX matches TWO backslashes; a
 * single "\" (a SMILES bond) is caught by ".". Python's "." is one code point:
 * here one UTF-8 sequence, or one byte of invalid UTF-8.
 *
 * Ids: vocab.get(token, unk). eod is the end token "&" (id 3): MegaMolBART's
 * csv_to_binary.py stores every SMILES as [^] + tokens + [&]; encode() gives
 * the tokens only, as Megatron's tokenize() does, and --append-eod adds "&".
 * decode() is MegaMolBART's detokenize: a leading "^" is dropped, everything
 * from the first "&" on is dropped, the rest is joined without separators.
 *
 * Extra tokens are literal strings here. MegaMolBART escapes only ()[].| in
 * them, so a token holding another regex metacharacter (\ ^ $ * + ? {) would
 * be a pattern there; such a vocabulary is refused rather than guessed at. */
#include "data/tokenizer/smiles.h"
#include "data/tokenizer/strtab.h"

#include "base/alloc.h"
#include "base/utf8.h"
#include "base/fileio.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the matcher -------------------------------------------------------- */

typedef struct smiles_vocab {
    atomic_int refs;
    pl_strtab tok;
    int32_t chem_start;
    /* Extra tokens by first byte, in vocabulary order (which is the order of
     * the regex alternatives): ids extra[bucket[b] .. bucket[b+1]). */
    int32_t bucket[257];
    int32_t *extra;
} smiles_vocab;

static int is_digit(unsigned c) { return c >= '0' && c <= '9'; }

/* Length of the token at s[0..n) (n >= 1), or 0 where re.findall finds none
 * and moves on by one character (a newline). v may be NULL: no extra tokens. */
static size_t smiles_match(const smiles_vocab *v, const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (v) {
        for (int32_t k = v->bucket[c]; k < v->bucket[c + 1]; k++) {
            int32_t id = v->extra[k];
            size_t len = pl_strtab_len(&v->tok, id);
            if (len <= n && memcmp(pl_strtab_str(&v->tok, id), s, len) == 0)
                return len;
        }
    }
    switch (c) {
    case '[': { /* \[[^\]]+] : at least one character, then the first ']' */
        const unsigned char *e = n > 1 ? memchr(s + 1, ']', n - 1) : NULL;
        return e && e > s + 1 ? (size_t)(e - s) + 1 : 1;
    }
    case 'B': /* Br? */
        return n > 1 && s[1] == 'r' ? 2 : 1;
    case 'C': /* Cl? */
        return n > 1 && s[1] == 'l' ? 2 : 1;
    case '\\': /* \\\\ : two backslashes; one alone falls to "." */
        return n > 1 && s[1] == '\\' ? 2 : 1;
    case '%': /* \%[0-9]{2}, else "." */
        return n > 2 && is_digit(s[1]) && is_digit(s[2]) ? 3 : 1;
    case '\n':
        return 0;
    default:
        break;
    }
    /* Every other single-character alternative, and ".", take one character. */
    int32_t cp;
    return pl_utf8_next(s, n, &cp);
}

/* Splits text, calling fn with each token and its id in v (v NULL: id -1). */
static pl_status smiles_split(const smiles_vocab *v, const char *text, size_t len,
                              pl_smiles_token_fn fn, void *ctx)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t k = smiles_match(v, s + i, len - i);
        if (k == 0) {
            i++;
            continue;
        }
        int32_t id = -1;
        if (v) {
            id = pl_strtab_find(&v->tok, text + i, k);
            if (id < 0)
                id = PL_SMILES_UNK;
        }
        pl_status st = fn(ctx, text + i, k, id);
        if (st != PL_OK)
            return st;
        i += k;
    }
    return PL_OK;
}

/* ---- vocabulary files --------------------------------------------------- */

static void vocab_release(smiles_vocab *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    pl_strtab_free(&v->tok);
    pl_free(v->extra);
    pl_free(v);
}

/* MegaMolBART from_vocab_file: Path.read_text() (UTF-8, universal newlines),
 * split on newlines, empty lines dropped. lines receives the file line of
 * each token (for messages). */
static pl_status vocab_read(smiles_vocab *v, const char *path, pl_ids *lines)
{
    char *data = NULL;
    size_t size = 0;
    pl_status st = pl_file_read_all(path, &data, &size);
    if (st != PL_OK)
        return pl_error_wrap(st, "--vocab-file");
    if (size >= INT32_MAX) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: vocabulary file over 2 GiB", path);
        goto fail;
    }
    int32_t line = 0;
    for (size_t i = 0; i < size;) {
        size_t e = i;
        while (e < size && data[e] != '\n' && data[e] != '\r')
            e++;
        line++;
        if (e > i) {
            if (!pl_utf8_valid(data + i, e - i)) {
                st = pl_errorf(PL_ERR_FORMAT, "%s:%d: invalid UTF-8", path, line);
                goto fail;
            }
            int32_t id;
            int added;
            PL_TRY(pl_strtab_add(&v->tok, data + i, e - i, &id, &added));
            if (!added) {
                st = pl_errorf(PL_ERR_FORMAT, "%s:%d: duplicate token '%.*s' (first on line %d)",
                               path, line, (int)(e - i), data + i, lines->data[id]);
                goto fail;
            }
            PL_TRY(pl_ids_push(lines, line));
        }
        i = e;
        if (i < size)
            i += (data[i] == '\r' && i + 1 < size && data[i + 1] == '\n') ? 2 : 1;
    }
fail:
    pl_free(data);
    return st;
}

static pl_status vocab_index_extras(smiles_vocab *v, const char *path, const pl_ids *lines)
{
    int32_t n_extra = v->chem_start - PL_SMILES_N_SPECIAL;
    memset(v->bucket, 0, sizeof v->bucket);
    for (int32_t id = PL_SMILES_N_SPECIAL; id < v->chem_start; id++) {
        const char *s = pl_strtab_str(&v->tok, id);
        size_t n = pl_strtab_len(&v->tok, id);
        for (size_t k = 0; k < n; k++)
            if (memchr("\\^$*+?{", s[k], 7))
                return pl_errorf(PL_ERR_UNSUPPORTED,
                                 "%s:%d: extra token '%s' holds the regex character '%c', which "
                                 "MegaMolBART would not escape (only ()[].| are); plait matches "
                                 "extra tokens literally",
                                 path, lines->data[id], s, s[k]);
        v->bucket[(unsigned char)s[0] + 1]++;
    }
    for (int b = 0; b < 256; b++)
        v->bucket[b + 1] += v->bucket[b];
    if (n_extra == 0)
        return PL_OK;
    v->extra = pl_malloc((size_t)n_extra * sizeof *v->extra);
    if (!v->extra)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
    int32_t fill[256];
    memcpy(fill, v->bucket, sizeof fill);
    for (int32_t id = PL_SMILES_N_SPECIAL; id < v->chem_start; id++)
        v->extra[fill[(unsigned char)pl_strtab_str(&v->tok, id)[0]]++] = id;
    return PL_OK;
}

/* ---- the tokenizer ------------------------------------------------------ */

typedef struct smiles_tok {
    pl_tokenizer base;
    smiles_vocab *v;
} smiles_tok;

static const pl_tokenizer_ops smiles_ops;

static pl_status push_id(void *ctx, const char *tok, size_t len, int32_t id)
{
    (void)tok, (void)len;
    return pl_ids_push(ctx, id);
}

static pl_status smiles_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    const smiles_tok *m = t->impl;
    int64_t n0 = out->n;
    pl_status st = smiles_split(m->v, text, len, push_id, out);
    if (st != PL_OK)
        out->n = n0;
    return st;
}

static pl_status smiles_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out)
{
    const smiles_tok *m = t->impl;
    const pl_strtab *tok = &m->v->tok;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok->n)
            return pl_errorf(PL_ERR_ARG, "SmilesTokenizer decode: unknown id %d (vocabulary has %d "
                             "tokens)", ids[i], tok->n);
    size_t n0 = out->n;
    for (int64_t i = (n > 0 && ids[0] == PL_SMILES_BEGIN) ? 1 : 0; i < n; i++) {
        if (ids[i] == PL_SMILES_END)
            break;
        pl_status st = pl_bytes_append(out, pl_strtab_str(tok, ids[i]), pl_strtab_len(tok, ids[i]));
        if (st != PL_OK) {
            out->n = n0;
            if (out->data)
                out->data[n0] = '\0';
            return st;
        }
    }
    return PL_OK;
}

static int32_t smiles_token_id(const pl_tokenizer *t, const char *tok, size_t len)
{
    const smiles_tok *m = t->impl;
    return pl_strtab_find(&m->v->tok, tok, len);
}

static void smiles_free(pl_tokenizer *t)
{
    smiles_tok *m = t->impl;
    vocab_release(m->v);
    pl_free(m);
}

static pl_status smiles_handle(smiles_vocab *v, pl_tokenizer **out)
{
    smiles_tok *m = pl_calloc(1, sizeof *m);
    if (!m)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening the SMILES tokenizer");
    atomic_fetch_add(&v->refs, 1);
    m->v = v;
    m->base.ops = &smiles_ops;
    m->base.type = "SmilesTokenizer";
    m->base.vocab_size = v->tok.n;
    m->base.eod = PL_SMILES_END;
    m->base.impl = m;
    *out = &m->base;
    return PL_OK;
}

static pl_status smiles_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    const smiles_tok *m = t->impl;
    *out = NULL;
    return smiles_handle(m->v, out);
}

static const pl_tokenizer_ops smiles_ops = {
    .encode = smiles_encode,
    .decode = smiles_decode,
    .token_id = smiles_token_id,
    .fork = smiles_fork,
    .free = smiles_free,
};

pl_status pl_smiles_tokenizer_open_ex(pl_tokenizer **out, const char *vocab_file,
                                      int64_t chem_tokens_start)
{
    pl_status st;
    pl_ids lines = {0};
    *out = NULL;
    smiles_vocab *v = pl_calloc(1, sizeof *v);
    if (!v)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", vocab_file);
    atomic_init(&v->refs, 1);
    PL_TRY(vocab_read(v, vocab_file, &lines));
    if (v->tok.n < PL_SMILES_N_SPECIAL) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: %d tokens, expected at least the 6 special tokens "
                       "(<PAD> ? ^ & <MASK> <SEP>)", vocab_file, v->tok.n);
        goto fail;
    }
    if (chem_tokens_start < 0)
        chem_tokens_start = v->tok.n >= PL_SMILES_CHEM_TOKENS_START ? PL_SMILES_CHEM_TOKENS_START
                                                                    : PL_SMILES_N_SPECIAL;
    if (chem_tokens_start < PL_SMILES_N_SPECIAL || chem_tokens_start > v->tok.n) {
        st = pl_errorf(PL_ERR_ARG, "%s: chem_tokens_start_idx %lld out of range [6, %d] (the "
                       "vocabulary has %d tokens)", vocab_file, (long long)chem_tokens_start,
                       v->tok.n, v->tok.n);
        goto fail;
    }
    v->chem_start = (int32_t)chem_tokens_start;
    PL_TRY(vocab_index_extras(v, vocab_file, &lines));
    st = smiles_handle(v, out);
fail:
    pl_ids_free(&lines);
    vocab_release(v);
    return st;
}

pl_status pl_smiles_tokenizer_open(pl_tokenizer **out, const char *vocab_file)
{
    return pl_smiles_tokenizer_open_ex(out, vocab_file, -1);
}

pl_status pl_smiles_tokenizer_each(const pl_tokenizer *t, const char *text, size_t len,
                                   pl_smiles_token_fn fn, void *ctx)
{
    if (t->ops != &smiles_ops)
        return pl_errorf(PL_ERR_ARG, "pl_smiles_tokenizer_each: a %s tokenizer, not SmilesTokenizer",
                         t->type);
    const smiles_tok *m = t->impl;
    return smiles_split(m->v, text, len, fn, ctx);
}

/* ---- the vocabulary builder --------------------------------------------- */

struct pl_smiles_vocab_builder {
    pl_strtab tok;
    int64_t *count; /* per token id */
    int64_t count_cap;
    pl_ids pending; /* ids of the string being added, counted once it is whole */
};

pl_status pl_smiles_vocab_builder_init(pl_smiles_vocab_builder **out)
{
    *out = pl_calloc(1, sizeof **out);
    if (!*out)
        return pl_errorf(PL_ERR_NOMEM, "out of memory creating a SMILES vocabulary builder");
    return PL_OK;
}

void pl_smiles_vocab_builder_free(pl_smiles_vocab_builder *b)
{
    if (!b)
        return;
    pl_strtab_free(&b->tok);
    pl_free(b->count);
    pl_ids_free(&b->pending);
    pl_free(b);
}

static pl_status builder_token(void *ctx, const char *tok, size_t len, int32_t id)
{
    pl_smiles_vocab_builder *b = ctx;
    pl_status st;
    int added;
    (void)id;
    if (memchr(tok, '\n', len) || memchr(tok, '\r', len))
        return pl_errorf(PL_ERR_FORMAT, "token '%.*s' holds a line break and cannot be stored in "
                         "a vocabulary file", (int)len, tok);
    if (b->tok.n + 1 > b->count_cap) { /* room first: every token has a count */
        int64_t cap = b->count_cap ? b->count_cap * 2 : 64;
        int64_t *c = pl_realloc(b->count, (size_t)cap * sizeof *c);
        if (!c)
            return pl_errorf(PL_ERR_NOMEM, "out of memory counting SMILES tokens");
        memset(c + b->count_cap, 0, (size_t)(cap - b->count_cap) * sizeof *c);
        b->count = c;
        b->count_cap = cap;
    }
    if ((st = pl_strtab_add(&b->tok, tok, len, &id, &added)) != PL_OK)
        return st;
    return pl_ids_push(&b->pending, id);
}

pl_status pl_smiles_vocab_builder_add(pl_smiles_vocab_builder *b, const char *smiles, size_t len)
{
    if (!pl_utf8_valid(smiles, len))
        return pl_errorf(PL_ERR_FORMAT, "invalid UTF-8");
    b->pending.n = 0;
    pl_status st = smiles_split(NULL, smiles, len, builder_token, b);
    if (st != PL_OK)
        return st;
    for (int64_t i = 0; i < b->pending.n; i++)
        b->count[b->pending.data[i]]++;
    return PL_OK;
}

int64_t pl_smiles_vocab_builder_distinct(const pl_smiles_vocab_builder *b) { return b->tok.n; }

typedef struct ranked {
    int64_t count;
    const char *s;
    size_t len;
} ranked;

/* Most frequent first, then byte order (a prefix first). */
static int by_count(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

static const char *const smiles_specials[PL_SMILES_N_SPECIAL] = {"<PAD>", "?", "^", "&",
                                                                 "<MASK>", "<SEP>"};

pl_status pl_smiles_vocab_builder_write(const pl_smiles_vocab_builder *b, const char *path,
                                        int64_t chem_tokens_start, int64_t min_count,
                                        int64_t *n_tokens)
{
    pl_status st = PL_OK;
    pl_wfile w = {0};
    pl_strtab head = {0};
    ranked *order = NULL;
    pl_bytes buf = {0};
    if (chem_tokens_start < PL_SMILES_N_SPECIAL || chem_tokens_start > 1000000)
        return pl_errorf(PL_ERR_ARG, "--chem-tokens-start must be in [6, 1000000], got %lld",
                         (long long)chem_tokens_start);
    if (min_count < 1)
        return pl_errorf(PL_ERR_ARG, "--min-count must be at least 1, got %lld",
                         (long long)min_count);
    /* Specials and placeholders, in id order. */
    for (int64_t i = 0; i < chem_tokens_start; i++) {
        char name[32];
        const char *s = name;
        if (i < PL_SMILES_N_SPECIAL)
            s = smiles_specials[i];
        else
            snprintf(name, sizeof name, "<UNUSED_%lld>", (long long)(i - PL_SMILES_N_SPECIAL));
        int32_t id;
        int added;
        PL_TRY(pl_strtab_add(&head, s, strlen(s), &id, &added));
        PL_TRY(pl_bytes_append(&buf, s, strlen(s)));
        PL_TRY(pl_bytes_append(&buf, "\n", 1));
    }
    int64_t n = chem_tokens_start;
    if (b->tok.n > 0) {
        order = pl_malloc((size_t)b->tok.n * sizeof *order);
        if (!order) {
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory sorting tokens", path);
            goto fail;
        }
        for (int32_t i = 0; i < b->tok.n; i++)
            order[i] = (ranked){b->count[i], pl_strtab_str(&b->tok, i), pl_strtab_len(&b->tok, i)};
        qsort(order, (size_t)b->tok.n, sizeof *order, by_count);
    }
    for (int32_t k = 0; k < b->tok.n && order[k].count >= min_count; k++) {
        if (pl_strtab_find(&head, order[k].s, order[k].len) >= 0)
            continue;
        PL_TRY(pl_bytes_append(&buf, order[k].s, order[k].len));
        PL_TRY(pl_bytes_append(&buf, "\n", 1));
        n++;
    }
    PL_TRY(pl_wfile_open(&w, path));
    PL_TRY(pl_wfile_write(&w, buf.data, buf.n));
    PL_TRY(pl_wfile_commit(&w));
    if (n_tokens)
        *n_tokens = n;
fail:
    if (st != PL_OK)
        pl_wfile_abort(&w);
    pl_bytes_free(&buf);
    pl_free(order);
    pl_strtab_free(&head);
    return st;
}
