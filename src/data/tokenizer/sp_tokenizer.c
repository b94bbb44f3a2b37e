/* SentencePiece tokenizers: Megatron's SentencePieceTokenizer, GPTSentencePieceTokenizer
 * and Llama2Tokenizer over a tokenizer.model.
 *
 * The encoding is SentencePieceProcessor::EncodeAsIds (SentencePiece 0.1.97):
 *   normalize   at each position the longest of: a user-defined symbol (kept as it is),
 *               a rule of the precompiled charsmap (its replacement), else one character
 *               (invalid UTF-8: U+FFFD, a byte); remove_extra_whitespaces drops leading,
 *               trailing and repeated spaces; add_dummy_prefix puts U+2581 in front (or
 *               at the end with treat_whitespace_as_suffix); escape_whitespaces turns
 *               spaces into U+2581.
 *   BPE         symbols = user-defined symbols (frozen) or single characters; merge the
 *               adjacent pair whose concatenation is the piece of highest score, the
 *               leftmost among equal scores, one at a time (bpe.h).
 *   unigram     Viterbi over the pieces (unigram_encode).
 *   ids         a symbol that is no piece is unk; with byte_fallback its UTF-8 bytes
 *               become <0xXX> pieces, without it a run of unknowns is one unk.
 * When no piece has U+2581 after a character other than U+2581 (Llama 2), merges never
 * cross the start of a U+2581 run, so the text is cut there into words that are merged
 * (and cached) one at a time; otherwise the whole text is one word.
 *
 * Megatron's wrappers (megatron/core/tokenizers/text/libraries/sentencepiece_tokenizer.py,
 * the default, and with --legacy-tokenizer megatron/training/tokenizer/tokenizer.py at
 * 4ff7686, the last commit that has it):
 *   default, all three types  tokenize = EncodeAsIds(text); vocab_size = pieces;
 *                              eod = eos_id()
 *   legacy Llama2Tokenizer     tokenize = [bos_id] + EncodeAsIds(text) (tokenize's default
 *                              bos=True, eos=False); vocab_size = pieces; eod = eos_id
 *   legacy GPTSentencePiece    tokenize = EncodeAsIds(text); eod = eos_id
 *   legacy SentencePiece       special tokens <CLS> <SEP> <EOD> <MASK>, the pad, bos and
 *                              eos pieces (<PAD>/<BOS>/<EOS> when the model has none) and
 *                              <extra_id_0..N-1>, each given the next id unless it is a
 *                              piece; tokenize cuts the text at the earliest special token
 *                              (the first in that order on a tie) and encodes the parts
 *                              separately; vocab_size counts them; eod = <EOD>.
 * decode is SentencePieceProcessor::DecodeIds (controls vanish, unk is " \u2047 ", byte
 * pieces are joined and invalid UTF-8 becomes U+FFFD a byte, the first U+2581 of the
 * text is dropped); for the legacy SentencePieceTokenizer its special tokens are written
 * as detokenize does ("text " + token + " "). */
#include "data/tokenizer/sp_internal.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/word_cache.h"

#include "base/alloc.h"
#include "base/utf8.h"

#include <stdio.h>
#include <string.h>

#define FROZEN_BASE (1 << 30) /* sentinel ids: -(1 + offset) unknown char, -(1 + BASE + id) frozen */
#define MAX_WORD (FROZEN_BASE - 1)

typedef enum { W_DEFAULT, W_LEGACY_SP, W_LEGACY_GPT, W_LEGACY_LLAMA2 } wrapper;

typedef struct special {
    char *text;
    size_t len;
    int32_t id;
} special;

/* What forks share: the model and the wrapper's tables. */
typedef struct sp_shared {
    atomic_int refs;
    pl_sp_model *m;
    wrapper w;
    const char *type;
    special *specials; /* legacy SentencePieceTokenizer, in Megatron's dict order */
    int n_specials;
    int64_t vocab_size;
    int32_t eod;
} sp_shared;

typedef struct sp {
    pl_tokenizer base;
    sp_shared *s;
    pl_word_cache cache;
    pl_bpe_scratch scratch;
    pl_bytes norm;
    int32_t *word;
    int64_t word_cap;
    void *lattice; /* unigram: best_node[n + 1] */
    size_t lattice_cap;
} sp;

static const pl_tokenizer_ops sp_ops;
static const char SPACE[] = "\xE2\x96\x81"; /* U+2581 */

/* --- normalization -------------------------------------------------------------------------- */

/* NormalizePrefix: a user-defined symbol, else one character (U+FFFD for a bad byte). */
static size_t norm_prefix(const pl_sp_model *m, const uint8_t *s, size_t n, const char **piece,
                          size_t *plen)
{
    int32_t tok;
    size_t len = pl_trie_longest(&m->user_defined, s, n, 0, &tok);
    if (len) {
        *piece = (const char *)s;
        *plen = len;
        return len;
    }
    if ((len = pl_sp_charsmap_match(m, s, n, piece, plen)) > 0)
        return len;
    int32_t cp;
    len = pl_utf8_next(s, n, &cp);
    if (cp < 0) {
        *piece = "\xEF\xBF\xBD";
        *plen = 3;
        return 1;
    }
    *piece = (const char *)s;
    *plen = len;
    return len;
}

static pl_status normalize(const pl_sp_model *m, const char *text, size_t n, pl_bytes *out)
{
    const uint8_t *s = (const uint8_t *)text;
    const char *ws = m->escape_whitespaces ? SPACE : " ";
    size_t nws = m->escape_whitespaces ? 3 : 1, i = 0;
    pl_status st = PL_OK;
    out->n = 0;
    if (n == 0)
        return pl_bytes_append(out, "", 0);
    const char *p;
    size_t plen;
    if (m->remove_extra_whitespaces)
        while (i < n) {
            size_t c = norm_prefix(m, s + i, n - i, &p, &plen);
            if (!(plen == 1 && p[0] == ' '))
                break;
            i += c;
        }
    if (i == n)
        return pl_bytes_append(out, "", 0);
    /* every input byte gives at most 3 output bytes (U+2581, U+FFFD) */
    if ((st = pl_bytes_reserve(out, 3 * (n - i) + 8)))
        return st;
    char *d = out->data;
    if (!m->treat_whitespace_as_suffix && m->add_dummy_prefix) {
        memcpy(d, ws, nws);
        d += nws;
    }
    int prev_space = m->remove_extra_whitespaces;
    int plain = m->user_defined.n == 0 && m->charsmap_len == 0;
    while (i < n) {
        if (plain && s[i] < 0x80) { /* the common case, byte by byte */
            if (s[i] == ' ') {
                if (!prev_space) {
                    memcpy(d, ws, nws);
                    d += nws;
                }
                prev_space = m->remove_extra_whitespaces;
            } else {
                *d++ = (char)s[i];
                prev_space = 0;
            }
            i++;
            continue;
        }
        size_t c = norm_prefix(m, s + i, n - i, &p, &plen);
        while (prev_space && plen && p[0] == ' ') {
            p++;
            plen--;
        }
        if (plen) {
            for (size_t k = 0; k < plen; k++) {
                if (m->escape_whitespaces && p[k] == ' ') {
                    memcpy(d, SPACE, 3);
                    d += 3;
                } else {
                    *d++ = p[k];
                }
            }
            prev_space = p[plen - 1] == ' ';
        }
        i += c;
        if (!m->remove_extra_whitespaces)
            prev_space = 0;
    }
    out->n = (size_t)(d - out->data);
    out->data[out->n] = '\0';
    if (m->remove_extra_whitespaces) {
        while (out->n >= nws && memcmp(out->data + out->n - nws, ws, nws) == 0)
            out->n -= nws;
        out->data[out->n] = '\0';
    }
    if (m->treat_whitespace_as_suffix && m->add_dummy_prefix)
        st = pl_bytes_append(out, ws, nws);
    return st;
}

/* --- BPE ------------------------------------------------------------------------------------- */

static pl_status word_reserve(sp *t, int64_t n)
{
    if (n <= t->word_cap)
        return PL_OK;
    int32_t *w = pl_malloc((size_t)n * sizeof *w);
    if (!w)
        return pl_errorf(PL_ERR_NOMEM, "SentencePiece: out of memory for a word of %lld bytes",
                         (long long)n);
    pl_free(t->word);
    t->word = w;
    t->word_cap = n;
    return PL_OK;
}

static int mergeable(int type)
{
    return type == PL_SP_NORMAL || type == PL_SP_USER_DEFINED || type == PL_SP_UNUSED;
}

/* Appends one piece of the model's output, as PopulateSentencePieceText does: an unknown
 * piece (w[0..n), id unk) becomes its bytes with byte_fallback, else a run of unknown
 * pieces becomes one unk. */
static pl_status emit(const pl_sp_model *m, const uint8_t *w, size_t n, int32_t id, int *prev_unk,
                      pl_ids *out)
{
    int unk = id == m->unk_id;
    pl_status st = PL_OK;
    if (unk && m->byte_fallback) {
        for (size_t b = 0; b < n && !st; b++)
            st = pl_ids_push(out, m->byte_id[w[b]]);
    } else if (!(unk && *prev_unk)) {
        st = pl_ids_push(out, id);
    }
    *prev_unk = unk;
    return st;
}

/* Appends the ids of the normalized word w[0..n). */
static pl_status encode_word(sp *t, const uint8_t *w, size_t n, pl_ids *out)
{
    const pl_sp_model *m = t->s->m;
    uint64_t h = 0;
    if (n <= PL_WORD_CACHE_MAX_WORD) {
        int nids;
        h = pl_word_hash(w, n);
        const int32_t *ids = pl_word_cache_get(&t->cache, w, n, h, &nids);
        if (ids)
            return pl_ids_append(out, ids, nids);
    }
    if (n > MAX_WORD)
        return pl_errorf(PL_ERR_UNSUPPORTED, "SentencePiece: a word of %zu bytes (over 1 GiB)", n);
    pl_status st = word_reserve(t, (int64_t)n);
    if (st)
        return st;
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        int32_t tok, cp;
        size_t len = pl_trie_longest(&m->user_defined, w, n, i, &tok);
        if (len) {
            t->word[k++] = -(1 + FROZEN_BASE + tok);
        } else {
            len = pl_utf8_next(w + i, n - i, &cp);
            int32_t id = pl_strtab_find(&m->pieces, (const char *)w + i, len);
            t->word[k++] = id >= 0 && mergeable(m->type[id]) ? id : -(1 + (int32_t)i);
        }
        i += len;
    }
    if ((st = pl_bpe_merge(&m->merges, t->word, &k, &t->scratch)))
        return st;
    int64_t n0 = out->n;
    int prev_unk = 0;
    for (int64_t j = 0; j < k && !st; j++) {
        int32_t id = t->word[j];
        if (id >= 0)
            st = emit(m, NULL, 0, id, &prev_unk, out);
        else if (-id - 1 >= FROZEN_BASE)
            st = emit(m, NULL, 0, -id - 1 - FROZEN_BASE, &prev_unk, out);
        else { /* a character that is no mergeable piece */
            size_t off = (size_t)(-id - 1);
            int32_t cp;
            size_t len = pl_utf8_next(w + off, n - off, &cp);
            st = emit(m, w + off, len, pl_sp_piece_to_id(m, (const char *)w + off, len), &prev_unk, out);
        }
    }
    if (!st && n <= PL_WORD_CACHE_MAX_WORD && out->n - n0 <= 4 * (int64_t)n)
        pl_word_cache_put(&t->cache, w, n, h, out->data + n0, out->n - n0);
    return st;
}

/* Unigram: unigram_model.cc EncodeOptimized, the best path over every piece that
 * starts at each character, with SentencePiece's float arithmetic: a piece's candidate
 * score is computed in double (the user-defined bonus length * max_score - 0.1 is a
 * double), compared with the stored float and stored as float; an unknown character
 * scores min_score - 10 in float. Ties keep the first candidate. */
typedef struct best_node {
    int32_t id;
    float score;
    int32_t starts_at;
} best_node;

static pl_status unigram_encode(sp *t, const uint8_t *s, size_t n, pl_ids *out)
{
    const pl_sp_model *m = t->s->m;
    if (n > INT32_MAX - 1)
        return pl_errorf(PL_ERR_UNSUPPORTED, "SentencePiece: a text of %zu bytes (over 2 GiB)", n);
    size_t bytes = (n + 1) * sizeof(best_node);
    if (bytes > t->lattice_cap) {
        void *p = pl_malloc(bytes);
        if (!p)
            return pl_errorf(PL_ERR_NOMEM, "SentencePiece: out of memory for a text of %zu bytes", n);
        pl_free(t->lattice);
        t->lattice = p;
        t->lattice_cap = bytes;
    }
    best_node *best = t->lattice;
    for (size_t i = 0; i <= n; i++)
        best[i] = (best_node){-1, 0.0f, -1};
    const float unk_score = m->min_score - 10.0f;
    for (size_t start = 0; start < n;) {
        const float here = best[start].score;
        int32_t cp;
        size_t mblen = pl_utf8_next(s + start, n - start, &cp);
        int has_single = 0;
        int32_t node = 0;
        for (size_t key = start; key < n; key++) {
            if ((node = pl_trie_step(&m->piece_trie, node, s[key])) < 0)
                break;
            int32_t id = m->piece_trie.nodes[node].token;
            if (id < 0 || m->type[id] == PL_SP_UNUSED)
                continue;
            size_t end = key + 1, length = end - start;
            double score = m->type[id] == PL_SP_USER_DEFINED
                               ? (double)((float)length * m->max_score) - 0.1
                               : (double)m->score[id];
            double cand = score + (double)here;
            best_node *tn = &best[end];
            if (tn->starts_at == -1 || cand > (double)tn->score) {
                tn->score = (float)cand;
                tn->starts_at = (int32_t)start;
                tn->id = id;
            }
            if (length == mblen)
                has_single = 1;
        }
        if (!has_single) {
            best_node *tn = &best[start + mblen];
            float cand = unk_score + here;
            if (tn->starts_at == -1 || cand > tn->score) {
                tn->score = cand;
                tn->starts_at = (int32_t)start;
                tn->id = m->unk_id;
            }
        }
        start += mblen;
    }
    /* backtrack, then emit in order */
    int64_t k = 0;
    for (size_t end = n; end > 0; end = (size_t)best[end].starts_at)
        k++;
    pl_status st = word_reserve(t, 2 * k);
    if (st)
        return st;
    int64_t j = k;
    for (size_t end = n; end > 0; end = (size_t)best[end].starts_at) {
        j--;
        t->word[2 * j] = best[end].starts_at;
        t->word[2 * j + 1] = (int32_t)end;
    }
    int prev_unk = 0;
    for (j = 0; j < k && !st; j++) {
        size_t a = (size_t)t->word[2 * j], b = (size_t)t->word[2 * j + 1];
        st = emit(m, s + a, b - a, best[b].id, &prev_unk, out);
    }
    return st;
}

/* EncodeAsIds(text), appended to out. */
static pl_status sp_encode_ids(sp *t, const char *text, size_t len, pl_ids *out)
{
    const pl_sp_model *m = t->s->m;
    pl_status st = normalize(m, text, len, &t->norm);
    if (st)
        return st;
    const uint8_t *s = (const uint8_t *)t->norm.data;
    size_t n = t->norm.n;
    if (m->model_type == PL_SP_UNIGRAM)
        return n ? unigram_encode(t, s, n, out) : PL_OK;
    if (!m->split_words || n == 0)
        return n ? encode_word(t, s, n, out) : PL_OK;
    size_t start = 0;
    int prev_space = 0;
    for (size_t i = 0; i < n;) {
        int32_t tok;
        size_t ulen = pl_trie_longest(&m->user_defined, s, n, i, &tok);
        if (ulen) { /* a user-defined symbol is one unit, never split inside */
            i += ulen;
            prev_space = 0;
            continue;
        }
        int is_space = n - i >= 3 && memcmp(s + i, SPACE, 3) == 0;
        if (is_space && !prev_space && i > start) {
            if ((st = encode_word(t, s + start, i - start, out)))
                return st;
            start = i;
        }
        prev_space = is_space;
        int32_t cp;
        i += pl_utf8_next(s + i, n - i, &cp);
    }
    return encode_word(t, s + start, n - start, out);
}

/* The legacy SentencePieceTokenizer's tokenize: cut at special tokens. */
static pl_status legacy_sp_tokenize(sp *t, const char *text, size_t len, pl_ids *out)
{
    const sp_shared *s = t->s;
    pl_status st;
    size_t idx = 0;
    for (;;) {
        size_t best = SIZE_MAX;
        int which = -1;
        for (int k = 0; k < s->n_specials; k++) {
            const special *x = &s->specials[k];
            for (size_t i = idx; i + x->len <= len && i < best; i++)
                if (memcmp(text + i, x->text, x->len) == 0) {
                    best = i;
                    which = k;
                    break;
                }
        }
        if (which < 0)
            break;
        if ((st = sp_encode_ids(t, text + idx, best - idx, out)) ||
            (st = pl_ids_push(out, s->specials[which].id)))
            return st;
        idx = best + s->specials[which].len;
    }
    return sp_encode_ids(t, text + idx, len - idx, out);
}

static pl_status sp_encode(pl_tokenizer *tk, const char *text, size_t len, pl_ids *out)
{
    sp *t = tk->impl;
    int64_t n0 = out->n;
    pl_status st;
    switch (t->s->w) {
    case W_LEGACY_SP:
        st = legacy_sp_tokenize(t, text, len, out);
        break;
    case W_LEGACY_LLAMA2:
        st = pl_ids_push(out, t->s->m->bos_id);
        if (!st)
            st = sp_encode_ids(t, text, len, out);
        break;
    default:
        st = sp_encode_ids(t, text, len, out);
    }
    if (st)
        out->n = n0;
    return st;
}

/* --- decode ------------------------------------------------------------------------------------ */

/* DecodeIds over ids[0..n), all pieces of the model. */
static pl_status decode_pieces(const pl_sp_model *m, const int32_t *ids, int64_t n, pl_bytes *out)
{
    pl_status st = PL_OK;
    int bos_ws = 1, bos_ws_seen = 0;
    size_t text0 = out->n;
    pl_bytes run = {0};
    for (int64_t i = 0; i < n && !st;) {
        int32_t id = ids[i];
        if (m->type[id] == PL_SP_BYTE) { /* a run of byte pieces */
            int64_t j = i;
            for (; j < n && m->type[ids[j]] == PL_SP_BYTE && !st; j++) {
                int b = 0; /* every BYTE piece is some byte's (checked on load) */
                while (b < 255 && m->byte_id[b] != ids[j])
                    b++;
                uint8_t byte = (uint8_t)b;
                st = pl_bytes_append(&run, &byte, 1);
            }
            for (size_t off = 0; off < run.n && !st;) {
                int32_t cp;
                size_t c = pl_utf8_next((const uint8_t *)run.data + off, run.n - off, &cp);
                if (cp < 0) {
                    st = pl_bytes_append(out, "\xEF\xBF\xBD", 3);
                    c = 1;
                } else {
                    st = pl_bytes_append(out, run.data + off, c);
                }
                off += c;
            }
            run.n = 0;
            i = j;
            continue;
        }
        if (bos_ws_seen || out->n > text0)
            bos_ws = 0;
        bos_ws_seen = 0;
        const char *p = pl_strtab_str(&m->pieces, id);
        size_t len = pl_strtab_len(&m->pieces, id);
        i++;
        if (m->type[id] == PL_SP_CONTROL)
            continue;
        if (m->type[id] == PL_SP_UNKNOWN) {
            st = pl_bytes_append(out, m->unk_surface, strlen(m->unk_surface));
            continue;
        }
        if (bos_ws && (m->add_dummy_prefix || m->remove_extra_whitespaces) && len >= 3 &&
            memcmp(p, SPACE, 3) == 0) {
            p += 3;
            len -= 3;
            bos_ws_seen = !m->remove_extra_whitespaces;
        }
        for (size_t k = 0; k < len && !st;) {
            if (len - k >= 3 && memcmp(p + k, SPACE, 3) == 0) {
                st = pl_bytes_append(out, " ", 1);
                k += 3;
            } else {
                st = pl_bytes_append(out, p + k, 1);
                k++;
            }
        }
    }
    pl_bytes_free(&run);
    return st;
}

static const special *special_of(const sp_shared *s, int32_t id)
{
    for (int k = 0; k < s->n_specials; k++)
        if (s->specials[k].id == id)
            return &s->specials[k];
    return NULL;
}

static pl_status sp_decode(const pl_tokenizer *tk, const int32_t *ids, int64_t n, pl_bytes *out)
{
    const sp_shared *s = ((const sp *)tk->impl)->s;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->vocab_size)
            return pl_errorf(PL_ERR_ARG, "%s decode: token id %d (at position %lld) is not in the "
                             "vocabulary (ids 0..%lld)", s->type, ids[i], (long long)i,
                             (long long)s->vocab_size - 1);
    pl_status st = pl_bytes_append(out, "", 0);
    if (s->w != W_LEGACY_SP)
        return st ? st : decode_pieces(s->m, ids, n, out);
    /* detokenize: pieces between special tokens decoded together; "text " + token + " " */
    int64_t last = 0;
    for (int64_t i = 0; i < n && !st; i++) {
        const special *x = special_of(s, ids[i]);
        if (!x)
            continue;
        if (!(st = decode_pieces(s->m, ids + last, i - last, out)) &&
            !(st = pl_bytes_append(out, " ", 1)) && !(st = pl_bytes_append(out, x->text, x->len)))
            st = pl_bytes_append(out, " ", 1);
        last = i + 1;
    }
    return st ? st : decode_pieces(s->m, ids + last, n - last, out);
}

static int32_t sp_token_id(const pl_tokenizer *tk, const char *tok, size_t len)
{
    const sp_shared *s = ((const sp *)tk->impl)->s;
    for (int k = 0; k < s->n_specials; k++)
        if (s->specials[k].len == len && memcmp(s->specials[k].text, tok, len) == 0)
            return s->specials[k].id;
    return pl_strtab_find(&s->m->pieces, tok, len);
}

/* --- handles and Megatron's wrappers -------------------------------------------------------- */

static void shared_release(sp_shared *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (int k = 0; k < s->n_specials; k++)
        pl_free(s->specials[k].text);
    pl_free(s->specials);
    pl_sp_model_release(s->m);
    pl_free(s);
}

static void handle_free(sp *t)
{
    if (!t)
        return;
    pl_word_cache_free(&t->cache);
    pl_bpe_scratch_free(&t->scratch);
    pl_bytes_free(&t->norm);
    pl_free(t->word);
    pl_free(t->lattice);
    shared_release(t->s);
    pl_free(t);
}

static pl_status handle_new(sp_shared *s, pl_tokenizer **out)
{
    pl_status st = PL_OK;
    *out = NULL;
    sp *t = pl_calloc(1, sizeof *t);
    if (!t)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a SentencePiece tokenizer handle");
    atomic_fetch_add(&s->refs, 1);
    t->s = s;
    PL_TRY(pl_word_cache_init(&t->cache, "SentencePiece"));
    t->base.ops = &sp_ops;
    t->base.type = s->type;
    t->base.vocab_size = s->vocab_size;
    t->base.eod = s->eod;
    t->base.impl = t;
    *out = &t->base;
    return PL_OK;
fail:
    handle_free(t);
    return st;
}

static pl_status sp_fork(const pl_tokenizer *tk, pl_tokenizer **out)
{
    return handle_new(((const sp *)tk->impl)->s, out);
}

static void sp_free(pl_tokenizer *tk) { handle_free(tk->impl); }

static const pl_tokenizer_ops sp_ops = {sp_encode, sp_decode, sp_token_id, sp_fork, sp_free};

/* _SentencePieceTokenizer._add_special_token: the piece's id, else the next id. */
static pl_status add_special(sp_shared *s, const char *text, int32_t *id)
{
    size_t len = strlen(text);
    for (int k = 0; k < s->n_specials; k++)
        if (s->specials[k].len == len && memcmp(s->specials[k].text, text, len) == 0) {
            *id = s->specials[k].id;
            return PL_OK;
        }
    int32_t pid = pl_strtab_find(&s->m->pieces, text, len);
    special *p = pl_realloc(s->specials, (size_t)(s->n_specials + 1) * sizeof *p);
    if (!p)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for special tokens");
    s->specials = p;
    char *copy = pl_strdup(text);
    if (!copy)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for special tokens");
    *id = pid >= 0 ? pid : (int32_t)s->vocab_size++;
    s->specials[s->n_specials++] = (special){copy, len, *id};
    return PL_OK;
}

/* The piece of id, or fallback when id is out of range (Python's IndexError path). */
static const char *piece_or(const pl_sp_model *m, int32_t id, const char *fallback)
{
    return id >= 0 && id < m->pieces.n ? pl_strtab_str(&m->pieces, id) : fallback;
}

static pl_status legacy_specials(sp_shared *s, int64_t extra_ids)
{
    pl_status st = PL_OK;
    int32_t id;
    const pl_sp_model *m = s->m;
    static const char *fixed[] = {"<CLS>", "<SEP>", "<EOD>", "<MASK>"};
    for (int k = 0; k < 4; k++) {
        PL_TRY(add_special(s, fixed[k], &id));
        if (k == 2)
            s->eod = id;
    }
    PL_TRY(add_special(s, piece_or(m, m->pad_id, "<PAD>"), &id));
    PL_TRY(add_special(s, piece_or(m, m->bos_id, "<BOS>"), &id));
    PL_TRY(add_special(s, piece_or(m, m->eos_id, "<EOS>"), &id));
    for (int64_t i = 0; i < extra_ids; i++) {
        char name[40];
        snprintf(name, sizeof name, "<extra_id_%lld>", (long long)i);
        PL_TRY(add_special(s, name, &id));
    }
fail:
    return st;
}

pl_status pl_sp_tokenizer_open(pl_tokenizer **out, const char *type, const char *model_file,
                               int legacy, int64_t vocab_extra_ids)
{
    pl_status st = PL_OK;
    *out = NULL;
    sp_shared *s = pl_calloc(1, sizeof *s);
    if (!s)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening %s", model_file);
    atomic_init(&s->refs, 1);
    PL_TRY(pl_sp_model_load(&s->m, model_file));
    s->vocab_size = s->m->pieces.n;
    s->eod = s->m->eos_id;
    if (strcmp(type, "Llama2Tokenizer") == 0) {
        s->type = "Llama2Tokenizer";
        s->w = legacy ? W_LEGACY_LLAMA2 : W_DEFAULT;
        if (legacy && s->m->bos_id < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: the model has no bos piece (a CONTROL '%s'), which "
                           "the legacy Llama2Tokenizer prepends", model_file, s->m->bos_piece);
            goto fail;
        }
    } else if (strcmp(type, "GPTSentencePieceTokenizer") == 0) {
        s->type = "GPTSentencePieceTokenizer";
        s->w = legacy ? W_LEGACY_GPT : W_DEFAULT;
    } else {
        s->type = "SentencePieceTokenizer";
        s->w = legacy ? W_LEGACY_SP : W_DEFAULT;
    }
    if (vocab_extra_ids && s->w != W_LEGACY_SP) {
        st = pl_errorf(PL_ERR_ARG, "--vocab-extra-ids: only the legacy SentencePieceTokenizer "
                       "(--legacy-tokenizer) adds <extra_id_N> tokens");
        goto fail;
    }
    if (s->w == W_LEGACY_SP)
        PL_TRY(legacy_specials(s, vocab_extra_ids));
    PL_TRY(handle_new(s, out));
fail:
    shared_release(s); /* the handle holds its own reference */
    return st;
}
