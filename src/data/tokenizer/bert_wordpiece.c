/* BERT WordPiece: Megatron's BertWordPieceLowerCase and BertWordPieceCase.
 *
 * Megatron's _BertWordPieceTokenizer (megatron/training/tokenizer/tokenizer.py,
 * formerly megatron/tokenizer/tokenizer.py) wraps Google BERT's FullTokenizer,
 * copied as megatron/tokenizer/bert_tokenization.py. This file follows that
 * Python code step by step:
 *
 *   bytes -> code points       UTF-8, invalid bytes dropped (decode "ignore")
 *   _clean_text                drop U+0000, U+FFFD, Cc and Cf (but \t \n \r);
 *                              \t \n \r, ' ' and Zs become ' '
 *   _tokenize_chinese_chars    CJK ideographs become words of their own
 *   whitespace_tokenize        split on Python's str.isspace()
 *   per word, lower case only: str.lower() (final sigma, U+0130 -> i + U+0307),
 *                              NFD, drop Mn
 *   _run_split_on_punc         ASCII 33-47, 58-64, 91-96, 123-126 and P* alone
 *   WordPiece                  > 200 code points -> [UNK]; greedy longest
 *                              match, "##" continuations; any miss -> [UNK]
 *
 * Special tokens (tokenizer.py, _BertWordPieceTokenizer.__init__): cls, sep,
 * pad, mask are the ids of [CLS], [SEP], [PAD], [MASK]; [BOS] and [EOS] are
 * appended to the vocabulary when absent (ids n and n+1 for an n-line file),
 * then --vocab-extra-ids tokens <extra_id_i>. vocab_size = len(vocab) counts
 * them, and eod = eos = the id of [EOS]. Text is never matched against these:
 * "[CLS]" in text is split like any other punctuation and letters.
 *
 * Not here: the [CLS]/[SEP] layout of BERT samples (the dataset builds it).
 * Case mapping, categories and NFD come from utf8proc (its Unicode version,
 * not the one of the Python that runs Megatron: they differ only on code
 * points assigned in between). */
#include "data/tokenizer/bert_wordpiece.h"

#include "base/alloc.h"
#include "base/utf8.h"
#include "data/tokenizer/strtab.h"
#include "base/fileio.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

/* ---- UTF-8 and character classes ---------------------------------------- */

static size_t utf8_put(char *dst, int32_t cp)
{
    return (size_t)utf8proc_encode_char(cp, (utf8proc_uint8_t *)dst);
}

static utf8proc_category_t cat(int32_t cp) { return utf8proc_category(cp); }

/* Python's str.isspace(): bidi class WS, B or S, or category Zs. */
static int py_isspace(int32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0x2028 || cp == 0x2029 || cat(cp) == UTF8PROC_CATEGORY_ZS;
}

/* bert_tokenization._is_whitespace */
static int bert_is_whitespace(int32_t cp)
{
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' ||
           cat(cp) == UTF8PROC_CATEGORY_ZS;
}

/* bert_tokenization._is_control */
static int bert_is_control(int32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r')
        return 0;
    utf8proc_category_t c = cat(cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF;
}

/* bert_tokenization._is_punctuation */
static int bert_is_punct(int32_t cp)
{
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return 1;
    if (cp < 0x80)
        return 0;
    utf8proc_category_t c = cat(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

/* BasicTokenizer._is_chinese_char, ranges exactly as in the Python. */
static int bert_is_cjk(int32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* Unicode Case_Ignorable (D136): Mn Me Cf Lm Sk, or Word_Break MidLetter,
 * MidNumLet, Single_Quote (the list below). */
static int case_ignorable(int32_t cp)
{
    static const int32_t wb[] = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,
                                 0x5F4,  0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    for (size_t i = 0; i < sizeof wb / sizeof *wb; i++)
        if (cp == wb[i])
            return 1;
    utf8proc_category_t c = cat(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_ME || c == UTF8PROC_CATEGORY_CF ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_SK;
}

/* Unicode Cased (D135) for characters that are not case-ignorable: Lu Ll Lt
 * plus the Other_Lowercase / Other_Uppercase code points outside those
 * categories (checked against Python's str.lower() over all code points). */
static int cased(int32_t cp)
{
    utf8proc_category_t c = cat(cp);
    if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT)
        return 1;
    return cp == 0xAA || cp == 0xBA || (cp >= 0x2160 && cp <= 0x217F) ||
           (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
           (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}

/* CPython's handle_capital_sigma: U+03A3 at w[i] lowers to final sigma when
 * a cased letter precedes it and none follows (case-ignorables skipped). */
static int32_t lower_sigma(const int32_t *w, size_t n, size_t i)
{
    size_t j = i;
    while (j > 0 && case_ignorable(w[j - 1]))
        j--;
    if (j == 0 || !cased(w[j - 1]))
        return 0x3C3;
    j = i + 1;
    while (j < n && case_ignorable(w[j]))
        j++;
    return (j == n || !cased(w[j])) ? 0x3C2 : 0x3C3;
}

/* ---- the shared vocabulary ---------------------------------------------- */

typedef struct bert_vocab {
    atomic_int refs;
    int lower;
    pl_strtab tok;        /* tokens, including the ones Megatron appends */
    int32_t unk, cls, sep, pad, msk, bos, eos;
    int32_t *extra;       /* ids of <extra_id_0 .. n_extra-1> (additional_special_tokens_ids) */
    int64_t n_extra;
} bert_vocab;

static void vocab_release(bert_vocab *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    pl_strtab_free(&v->tok);
    pl_free(v->extra);
    pl_free(v);
}

/* Python's str.strip(): trims isspace() code points from both ends. */
static void py_strip(const char **s, size_t *n)
{
    const unsigned char *p = (const unsigned char *)*s;
    size_t a = 0, b = *n;
    while (a < b) {
        int32_t cp;
        size_t k = pl_utf8_next(p + a, b - a, &cp);
        if (cp < 0 || !py_isspace(cp))
            break;
        a += k;
    }
    while (b > a) {
        size_t k = 1;
        while (k < 4 && b - k > a && (p[b - k] & 0xC0) == 0x80)
            k++;
        int32_t cp;
        if (pl_utf8_next(p + b - k, k, &cp) != k || cp < 0 || !py_isspace(cp))
            break;
        b -= k;
    }
    *s += a;
    *n = b - a;
}

/* bert_tokenization.load_vocab: readline() with universal newlines, strip(),
 * ids in file order. Duplicates are refused (Python would silently keep the
 * last id and shift every id Megatron appends). */
static pl_status vocab_load(bert_vocab *v, const char *path)
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
    int64_t line = 0;
    for (size_t i = 0; i < size;) {
        size_t e = i;
        while (e < size && data[e] != '\n' && data[e] != '\r')
            e++;
        line++;
        const char *tok = data + i;
        size_t n = e - i;
        if (!pl_utf8_valid(tok, n)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: invalid UTF-8", path, (long long)line);
            goto fail;
        }
        py_strip(&tok, &n);
        int32_t id;
        int added;
        PL_TRY(pl_strtab_add(&v->tok, tok, n, &id, &added));
        if (!added) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%lld: duplicate token '%.*s' (first on line %d)",
                           path, (long long)line, (int)n, tok, id + 1);
            goto fail;
        }
        i = e;
        if (i < size)
            i += (data[i] == '\r' && i + 1 < size && data[i + 1] == '\n') ? 2 : 1;
    }
    pl_free(data);
    return PL_OK;
fail:
    pl_free(data);
    return st;
}

/* ---- the tokenizer ------------------------------------------------------ */

typedef struct bert_tok {
    pl_tokenizer base;
    bert_vocab *v;
    pl_ids word;  /* code points of the current whitespace-separated token */
    pl_ids low;   /* after str.lower() */
    pl_ids norm;  /* after NFD and dropping Mn */
    pl_ids cpoff; /* byte offset of each code point of a word in buf */
    pl_bytes buf; /* UTF-8 of a word */
} bert_tok;

static const pl_tokenizer_ops bert_ops;

/* WordpieceTokenizer.tokenize on one word w[0..n) (no whitespace). */
static pl_status wordpiece(bert_tok *b, const int32_t *w, size_t n, pl_ids *out)
{
    const bert_vocab *v = b->v;
    pl_status st;
    if (n > PL_BERT_MAX_WORD_CHARS)
        return pl_ids_push(out, v->unk);
    b->buf.n = 0;
    b->cpoff.n = 0;
    if ((st = pl_bytes_reserve(&b->buf, n * 4 + 1)) != PL_OK ||
        (st = pl_ids_reserve(&b->cpoff, (int64_t)n + 1)) != PL_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        b->cpoff.data[i] = (int32_t)b->buf.n;
        b->buf.n += utf8_put(b->buf.data + b->buf.n, w[i]);
    }
    b->cpoff.data[n] = (int32_t)b->buf.n;
    int64_t mark = out->n;
    size_t start = 0;
    while (start < n) {
        size_t end = n;
        int32_t id = -1;
        size_t np = start > 0 ? 2 : 0;
        for (; end > start; end--) {
            size_t len = (size_t)(b->cpoff.data[end] - b->cpoff.data[start]);
            if (len + np > v->tok.max_len)
                continue;
            id = pl_strtab_find2(&v->tok, "##", np, b->buf.data + b->cpoff.data[start], len);
            if (id >= 0)
                break;
        }
        if (id < 0) {
            out->n = mark;
            return pl_ids_push(out, v->unk);
        }
        if ((st = pl_ids_push(out, id)) != PL_OK)
            return st;
        start = end;
    }
    return PL_OK;
}

/* Canonical decomposition of s[0..n) into out, in canonical order (NFD). */
static pl_status nfd(const int32_t *s, size_t n, pl_ids *out)
{
    pl_status st;
    out->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0xC0) {
            if ((st = pl_ids_push(out, s[i])) != PL_OK)
                return st;
            continue;
        }
        utf8proc_int32_t d[32];
        int bc = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char(s[i], d, 32, UTF8PROC_DECOMPOSE, &bc);
        if (k < 0 || k > 32)
            return pl_errorf(PL_ERR_INTERNAL, "NFD of U+%04X failed", (unsigned)s[i]);
        if ((st = pl_ids_append(out, d, (int64_t)k)) != PL_OK)
            return st;
    }
    /* Canonical ordering: stable sort of each run of non-starters by class. */
    for (int64_t i = 1; i < out->n; i++) {
        int32_t c = out->data[i];
        int cc = utf8proc_get_property(c)->combining_class;
        if (cc == 0)
            continue;
        int64_t j = i;
        while (j > 0) {
            int pc = utf8proc_get_property(out->data[j - 1])->combining_class;
            if (pc <= cc)
                break;
            out->data[j] = out->data[j - 1];
            j--;
        }
        out->data[j] = c;
    }
    return PL_OK;
}

/* One whitespace-separated token of the cleaned text: case folding and accent
 * stripping (lower case only), punctuation split, WordPiece. */
static pl_status flush_word(bert_tok *b, pl_ids *out)
{
    pl_status st;
    const int32_t *w = b->word.data;
    size_t n = (size_t)b->word.n;
    if (n == 0)
        return PL_OK;
    b->word.n = 0;
    if (b->v->lower) {
        b->low.n = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t c = w[i];
            if (c == 0x130) { /* full lower case mapping: i + COMBINING DOT ABOVE */
                if ((st = pl_ids_push(&b->low, 'i')) != PL_OK)
                    return st;
                c = 0x307;
            } else if (c == 0x3A3) {
                c = lower_sigma(w, n, i);
            } else {
                c = utf8proc_tolower(c);
            }
            if ((st = pl_ids_push(&b->low, c)) != PL_OK)
                return st;
        }
        if ((st = nfd(b->low.data, (size_t)b->low.n, &b->norm)) != PL_OK)
            return st;
        int64_t k = 0;
        for (int64_t i = 0; i < b->norm.n; i++)
            if (b->norm.data[i] < 0x300 || cat(b->norm.data[i]) != UTF8PROC_CATEGORY_MN)
                b->norm.data[k++] = b->norm.data[i];
        b->norm.n = k;
        w = b->norm.data;
        n = (size_t)b->norm.n;
    }
    /* _run_split_on_punc, then whitespace_tokenize(" ".join(...)). */
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        int sep = i == n || py_isspace(w[i]);
        int punct = !sep && bert_is_punct(w[i]);
        if (sep || punct) {
            if (i > start && (st = wordpiece(b, w + start, i - start, out)) != PL_OK)
                return st;
            if (punct && (st = wordpiece(b, w + i, 1, out)) != PL_OK)
                return st;
            start = i + 1;
        }
    }
    return PL_OK;
}

static pl_status bert_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    bert_tok *b = t->impl;
    const unsigned char *s = (const unsigned char *)text;
    int64_t n0 = out->n;
    pl_status st = PL_OK;
    b->word.n = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        i += pl_utf8_next(s + i, len - i, &cp);
        if (cp < 0 || cp == 0 || cp == 0xFFFD || bert_is_control(cp))
            continue;
        if (bert_is_whitespace(cp))
            cp = ' ';
        if (bert_is_cjk(cp)) {
            PL_TRY(flush_word(b, out));
            PL_TRY(pl_ids_push(&b->word, cp));
            PL_TRY(flush_word(b, out));
        } else if (py_isspace(cp)) {
            PL_TRY(flush_word(b, out));
        } else {
            PL_TRY(pl_ids_push(&b->word, cp));
        }
    }
    PL_TRY(flush_word(b, out));
    return PL_OK;
fail:
    out->n = n0;
    b->word.n = 0;
    return st;
}

/* Replaces every non-overlapping from[] by to[] scanning left to right, in
 * place (to is never longer than from): Python's str.replace. */
static void replace_all(pl_bytes *s, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), w = 0;
    for (size_t r = 0; r < s->n;) {
        if (r + nf <= s->n && memcmp(s->data + r, from, nf) == 0) {
            memmove(s->data + w, to, nt);
            w += nt, r += nf;
        } else {
            s->data[w++] = s->data[r++];
        }
    }
    s->n = w;
    s->data[w] = '\0';
}

/* Megatron's detokenize = FullTokenizer.convert_tokens_to_string:
 *   text = ' '.join(tokens).replace(' ##', '').strip()
 * then clean_up_tokenization: " ." " ?" " !" " ," -> no space before, " ' "
 * -> "'", and " n't" " 'm" " 's" " 've" " 're" lose their space, in that
 * order. Special tokens are kept as written ("[CLS] hello [SEP]"). */
static pl_status bert_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out)
{
    const bert_tok *b = t->impl;
    const bert_vocab *v = b->v;
    pl_bytes s = {0};
    pl_status st = PL_OK;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->tok.n) {
            st = pl_errorf(PL_ERR_ARG, "%s decode: unknown id %d (vocabulary has %d tokens)",
                           t->type, ids[i], v->tok.n);
            goto fail;
        }
        if (i > 0)
            PL_TRY(pl_bytes_append(&s, " ", 1));
        PL_TRY(pl_bytes_append(&s, pl_strtab_str(&v->tok, ids[i]), pl_strtab_len(&v->tok, ids[i])));
    }
    if (s.n == 0)
        goto fail; /* nothing to append; st is PL_OK */
    replace_all(&s, " ##", "");
    const char *p = s.data;
    size_t len = s.n;
    py_strip(&p, &len);
    memmove(s.data, p, len);
    s.n = len;
    s.data[len] = '\0';
    static const char *const cleanup[][2] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t k = 0; k < sizeof cleanup / sizeof *cleanup; k++)
        replace_all(&s, cleanup[k][0], cleanup[k][1]);
    st = pl_bytes_append(out, s.data, s.n);
fail:
    pl_bytes_free(&s);
    return st;
}

static int32_t bert_token_id(const pl_tokenizer *t, const char *tok, size_t len)
{
    const bert_tok *b = t->impl;
    return pl_strtab_find(&b->v->tok, tok, len);
}

static void bert_free(pl_tokenizer *t)
{
    bert_tok *b = t->impl;
    vocab_release(b->v);
    pl_ids_free(&b->word);
    pl_ids_free(&b->low);
    pl_ids_free(&b->norm);
    pl_ids_free(&b->cpoff);
    pl_bytes_free(&b->buf);
    pl_free(b);
}

/* A handle on v (taking a reference on success). */
static pl_status bert_handle(bert_vocab *v, pl_tokenizer **out)
{
    bert_tok *b = pl_calloc(1, sizeof *b);
    if (!b)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening the BERT tokenizer");
    atomic_fetch_add(&v->refs, 1);
    b->v = v;
    b->base.ops = &bert_ops;
    b->base.type = v->lower ? "BertWordPieceLowerCase" : "BertWordPieceCase";
    b->base.vocab_size = v->tok.n;
    b->base.eod = v->eos;
    b->base.impl = b;
    *out = &b->base;
    return PL_OK;
}

static pl_status bert_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    const bert_tok *b = t->impl;
    *out = NULL;
    return bert_handle(b->v, out);
}

static const pl_tokenizer_ops bert_ops = {
    .encode = bert_encode,
    .decode = bert_decode,
    .token_id = bert_token_id,
    .fork = bert_fork,
    .free = bert_free,
};

static pl_status require(const bert_vocab *v, const char *path, const char *tok, int32_t *id)
{
    *id = pl_strtab_find(&v->tok, tok, strlen(tok));
    if (*id < 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: vocabulary has no %s token (not a BERT vocab.txt?)",
                         path, tok);
    return PL_OK;
}

pl_status pl_bert_tokenizer_open_ex(pl_tokenizer **out, const char *vocab_file, int lower_case,
                                    int64_t vocab_extra_ids)
{
    pl_status st;
    *out = NULL;
    if (vocab_extra_ids < 0 || vocab_extra_ids > 1000000)
        return pl_errorf(PL_ERR_ARG, "--vocab-extra-ids must be in [0, 1000000], got %lld",
                         (long long)vocab_extra_ids);
    bert_vocab *v = pl_calloc(1, sizeof *v);
    if (!v)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", vocab_file);
    atomic_init(&v->refs, 1);
    v->lower = lower_case != 0;
    PL_TRY(vocab_load(v, vocab_file));
    PL_TRY(require(v, vocab_file, "[UNK]", &v->unk));
    PL_TRY(require(v, vocab_file, "[CLS]", &v->cls));
    PL_TRY(require(v, vocab_file, "[SEP]", &v->sep));
    PL_TRY(require(v, vocab_file, "[PAD]", &v->pad));
    PL_TRY(require(v, vocab_file, "[MASK]", &v->msk));
    /* _BertWordPieceTokenizer.add_token: appended only when absent. */
    int added;
    PL_TRY(pl_strtab_add(&v->tok, "[BOS]", 5, &v->bos, &added));
    PL_TRY(pl_strtab_add(&v->tok, "[EOS]", 5, &v->eos, &added));
    if (vocab_extra_ids > 0 &&
        !(v->extra = pl_malloc(sizeof *v->extra * (size_t)vocab_extra_ids))) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld extra ids", vocab_file,
                       (long long)vocab_extra_ids);
        goto fail;
    }
    for (int64_t i = 0; i < vocab_extra_ids; i++) {
        char name[32];
        int k = snprintf(name, sizeof name, "<extra_id_%lld>", (long long)i);
        PL_TRY(pl_strtab_add(&v->tok, name, (size_t)k, &v->extra[i], &added));
        v->n_extra = i + 1;
    }
    st = bert_handle(v, out);
fail:
    vocab_release(v); /* the handle holds its own reference */
    return st;
}

pl_status pl_bert_tokenizer_open(pl_tokenizer **out, const char *vocab_file, int lower_case)
{
    return pl_bert_tokenizer_open_ex(out, vocab_file, lower_case, 0);
}

pl_status pl_bert_tokenizer_specials(const pl_tokenizer *t, pl_bert_specials *out)
{
    if (!t || t->ops != &bert_ops)
        return pl_errorf(PL_ERR_ARG, "tokenizer %s: BERT data needs a BERT WordPiece tokenizer "
                                     "(BertWordPieceLowerCase or BertWordPieceCase)",
                         t ? t->type : "(none)");
    const bert_vocab *v = ((const bert_tok *)t->impl)->v;
    out->cls = v->cls;
    out->sep = v->sep;
    out->mask = v->msk;
    out->pad = v->pad;
    out->bos = v->bos;
    out->eos = v->eos;
    out->extra = v->extra;
    out->n_extra = v->n_extra;
    return PL_OK;
}

const char *pl_bert_tokenizer_piece(const pl_tokenizer *t, int32_t id, size_t *len)
{
    if (!t || t->ops != &bert_ops)
        return NULL;
    const bert_vocab *v = ((const bert_tok *)t->impl)->v;
    if (id < 0 || id >= v->tok.n)
        return NULL;
    *len = pl_strtab_len(&v->tok, id);
    return pl_strtab_str(&v->tok, id);
}
