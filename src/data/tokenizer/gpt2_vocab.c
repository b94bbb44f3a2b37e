/* Loading GPT-2's vocabulary (encoder.json) and merges (vocab.bpe).
 *
 * encoder.json is a JSON object mapping each token's spelling to its id. A spelling
 * is written over GPT-2's byte alphabet (bytes_to_unicode: printable Latin-1 bytes
 * stand for themselves, the other 68 bytes for U+0100..U+0143, so a space is "Ġ").
 * vocab.bpe is a "#version" line, then one merge "a b" per line, best first.
 *
 * Checked here, each an error naming the file and the token or line:
 *   - ids are integers 0..N-1, each used once; spellings are unique and use only the
 *     byte alphabet; every byte has its one-character token; <|endoftext|> exists
 *     (Megatron reads its id as eod).
 *   - every merge line has two tokens, both in encoder.json, and so is their
 *     concatenation (Python's bpe() would raise KeyError on using it otherwise).
 * As in Python, where the merges are dict(zip(merges, range(...))), a pair listed
 * twice takes its later rank, blank lines are skipped, and text after the last
 * newline is ignored (Megatron reads split('\n')[1:-1]; a warning is logged).
 *
 * cJSON allocates through pl_malloc: its hooks are set once for the process. */
#include "data/tokenizer/gpt2_internal.h"
#include "data/tokenizer/vocab_json.h"

#include "base/alloc.h"
#include "base/json.h"
#include "base/fileio.h"
#include "base/log.h"

#include <cjson/cJSON.h>
#include <utf8proc.h>

/* --- GPT-2's byte alphabet --------------------------------------------------------- */

#define ALPHABET_END PL_GPT2_ALPHABET_END

void pl_gpt2_byte_alphabet(uint32_t cp_of[256], int16_t byte_of[PL_GPT2_ALPHABET_END])
{
    uint32_t extra = 0;
    for (int cp = 0; cp < ALPHABET_END; cp++)
        byte_of[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of[b] = printable ? (uint32_t)b : 0x100 + extra++;
        byte_of[cp_of[b]] = (int16_t)b;
    }
}

/* --- the spelling table ------------------------------------------------------------ */

static uint64_t spell_hash(const char *s, size_t len) { return pl_word_hash((const uint8_t *)s, len); }

int32_t pl_gpt2_vocab_find(const pl_gpt2_vocab *v, const char *s, size_t len)
{
    for (uint64_t i = spell_hash(s, len) & v->spell_mask;; i = (i + 1) & v->spell_mask) {
        int32_t id = v->spell_table[i];
        if (id < 0)
            return -1;
        size_t off = v->spell_off[id];
        if (v->spell_off[id + 1] - off == len && memcmp(v->spell + off, s, len) == 0)
            return id;
    }
}

/* Inserts id (its spelling already in v->spell); returns the id already spelled so, or -1. */
static int32_t spell_insert(pl_gpt2_vocab *v, int32_t id)
{
    const char *s = v->spell + v->spell_off[id];
    size_t len = v->spell_off[id + 1] - v->spell_off[id];
    for (uint64_t i = spell_hash(s, len) & v->spell_mask;; i = (i + 1) & v->spell_mask) {
        int32_t other = v->spell_table[i];
        if (other < 0) {
            v->spell_table[i] = id;
            return -1;
        }
        size_t off = v->spell_off[other];
        if (v->spell_off[other + 1] - off == len && memcmp(v->spell + off, s, len) == 0)
            return other;
    }
}

static int log2_ceil(uint64_t x)
{
    int k = 0;
    while ((UINT64_C(1) << k) < x)
        k++;
    return k;
}

/* --- encoder.json -------------------------------------------------------------------- */

static int line_of(const char *buf, const char *at)
{
    int line = 1;
    for (const char *p = buf; p < at; p++)
        line += *p == '\n';
    return line;
}

/* Reads the spellings and ids of the parsed object root into v. */
static pl_status load_tokens(pl_gpt2_vocab *v, const cJSON *root, const char *path)
{
    pl_status st = PL_OK;
    const cJSON **by_id = NULL;
    uint32_t cp_of[256];
    int16_t byte_of[ALPHABET_END];
    pl_gpt2_byte_alphabet(cp_of, byte_of);

    int32_t n;
    PL_TRY(pl_vocab_json_by_id(root, path, &by_id, &n));
    size_t spell_bytes = 0;
    for (int32_t id = 0; id < n; id++)
        spell_bytes += strlen(by_id[id]->string);
    v->n = n;
    v->spell = pl_malloc(spell_bytes + 1);
    v->raw = pl_malloc(spell_bytes + 1);
    v->spell_off = pl_malloc(((size_t)n + 1) * sizeof *v->spell_off);
    v->raw_off = pl_malloc(((size_t)n + 1) * sizeof *v->raw_off);
    int bits = log2_ceil(2 * (uint64_t)n);
    v->spell_mask = (UINT64_C(1) << bits) - 1;
    v->spell_table = pl_malloc(((size_t)1 << bits) * sizeof *v->spell_table);
    if (!v->spell || !v->raw || !v->spell_off || !v->raw_off || !v->spell_table) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld tokens", path, (long long)n);
        goto fail;
    }
    memset(v->spell_table, 0xFF, ((size_t)1 << bits) * sizeof *v->spell_table);

    size_t so = 0, ro = 0;
    for (int32_t id = 0; id < v->n; id++) {
        const char *s = by_id[id]->string;
        size_t len = strlen(s);
        v->spell_off[id] = so;
        v->raw_off[id] = ro;
        memcpy(v->spell + so, s, len);
        so += len;
        for (size_t i = 0; i < len;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
            if (k <= 0 || cp >= ALPHABET_END || byte_of[cp] < 0) {
                st = pl_errorf(PL_ERR_FORMAT,
                               "%s: token \"%.200s\" (id %d) has a character outside GPT-2's byte "
                               "alphabet at byte %zu", path, s, id, i);
                goto fail;
            }
            v->raw[ro++] = (uint8_t)byte_of[cp];
            i += (size_t)k;
        }
    }
    v->spell_off[v->n] = so;
    v->raw_off[v->n] = ro;
    for (int32_t id = 0; id < v->n; id++) {
        int32_t other = spell_insert(v, id);
        if (other >= 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: token \"%.200s\" appears twice (ids %d and %d)", path,
                           by_id[id]->string, other, id);
            goto fail;
        }
    }
    for (int b = 0; b < 256; b++) {
        char u[4];
        utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp_of[b], (uint8_t *)u);
        v->byte_id[b] = pl_gpt2_vocab_find(v, u, (size_t)k);
        if (v->byte_id[b] < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: no token for byte 0x%02X (spelled \"%.*s\")", path, b,
                           (int)k, u);
            goto fail;
        }
    }
    v->eod = pl_gpt2_vocab_find(v, "<|endoftext|>", 13);
    if (v->eod < 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: no <|endoftext|> token (GPT2BPETokenizer's eod)", path);
        goto fail;
    }
fail:
    pl_free(by_id);
    return st;
}

static pl_status load_encoder(pl_gpt2_vocab *v, const char *path)
{
    pl_status st = PL_OK;
    char *buf = NULL;
    size_t size;
    cJSON *root = NULL;
    PL_TRY(pl_file_read_all(path, &buf, &size));
    pl_json_init();
    pl_json_oom_take();
    const char *err = NULL;
    root = cJSON_ParseWithLengthOpts(buf, size, &err, 0);
    if (!root) {
        if (pl_json_oom_take())
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory parsing JSON", path);
        else
            st = pl_errorf(PL_ERR_FORMAT, "%s:%d: malformed JSON (byte %lld)", path,
                           line_of(buf, err ? err : buf), (long long)(err ? err - buf : 0));
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected a JSON object of token -> id", path);
        goto fail;
    }
    PL_TRY(load_tokens(v, root, path));
fail:
    cJSON_Delete(root);
    pl_free(buf);
    return st;
}

/* --- vocab.bpe ------------------------------------------------------------------------ */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Sets (a, b) -> (rank, merged); a pair already present takes the new rank. */
static void pair_put(pl_gpt2_vocab *v, int32_t a, int32_t b, uint32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t i = (key * UINT64_C(0x9E3779B97F4A7C15)) >> v->pair_shift;
    for (;; i = (i + 1) & v->pair_mask) {
        pl_gpt2_pair *p = &v->pairs[i];
        if (p->key == key || p->key == PL_GPT2_EMPTY_PAIR) {
            if (p->key == PL_GPT2_EMPTY_PAIR)
                v->n_merges++;
            p->key = key;
            p->rank = rank;
            p->merged = merged;
            return;
        }
    }
}

static pl_status load_merges(pl_gpt2_vocab *v, const char *path)
{
    pl_status st = PL_OK;
    char *buf = NULL, *cat = NULL;
    size_t size;
    PL_TRY(pl_file_read_all(path, &buf, &size));
    const char *end = buf + size;
    if (size < 8 || memcmp(buf, "#version", 8) != 0) {
        st = pl_errorf(PL_ERR_FORMAT, "%s:1: expected a '#version' header line", path);
        goto fail;
    }
    size_t lines = 0;
    for (const char *p = buf; p < end; p++)
        lines += *p == '\n';
    int bits = log2_ceil(2 * (uint64_t)lines < 16 ? 16 : 2 * (uint64_t)lines);
    v->pair_mask = (UINT64_C(1) << bits) - 1;
    v->pair_shift = 64 - bits;
    v->pairs = pl_malloc(((size_t)1 << bits) * sizeof *v->pairs);
    cat = pl_malloc(size + 1);
    if (!v->pairs || !cat) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %zu merges", path, lines);
        goto fail;
    }
    for (size_t i = 0; i <= v->pair_mask; i++)
        v->pairs[i].key = PL_GPT2_EMPTY_PAIR;

    const char *p = memchr(buf, '\n', size);
    p = p ? p + 1 : end;
    uint32_t rank = 0;
    for (int line = 2; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *q = p;
        while (q < (nl ? nl : end) && is_blank(*q))
            q++;
        if (!nl) {
            if (q < end)
                pl_log_warn("%s:%d: last line has no newline; ignored, as Megatron does", path, line);
            break;
        }
        const char *f[2], *fe[2];
        int nf = 0;
        while (q < nl) {
            if (nf == 2) {
                nf = 3;
                break;
            }
            f[nf] = q;
            while (q < nl && !is_blank(*q))
                q++;
            fe[nf++] = q;
            while (q < nl && is_blank(*q))
                q++;
        }
        if (nf == 0) { /* blank line */
            p = nl + 1;
            continue;
        }
        if (nf != 2) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%d: expected a merge of two tokens 'a b', got '%.*s'",
                           path, line, (int)(nl - p > 200 ? 200 : nl - p), p);
            goto fail;
        }
        int32_t id[2];
        for (int k = 0; k < 2; k++) {
            id[k] = pl_gpt2_vocab_find(v, f[k], (size_t)(fe[k] - f[k]));
            if (id[k] < 0) {
                st = pl_errorf(PL_ERR_FORMAT, "%s:%d: token '%.*s' is not in the vocabulary file",
                               path, line, (int)(fe[k] - f[k] > 200 ? 200 : fe[k] - f[k]), f[k]);
                goto fail;
            }
        }
        size_t la = (size_t)(fe[0] - f[0]), lb = (size_t)(fe[1] - f[1]);
        memcpy(cat, f[0], la);
        memcpy(cat + la, f[1], lb);
        int32_t merged = pl_gpt2_vocab_find(v, cat, la + lb);
        if (merged < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s:%d: merged token '%.*s' is not in the vocabulary file",
                           path, line, (int)(la + lb > 200 ? 200 : la + lb), cat);
            goto fail;
        }
        pair_put(v, id[0], id[1], rank++, merged);
        p = nl + 1;
    }
fail:
    pl_free(cat);
    pl_free(buf);
    return st;
}

/* --- the whole --------------------------------------------------------------------------- */

static void vocab_free(pl_gpt2_vocab *v)
{
    pl_free(v->spell);
    pl_free(v->spell_off);
    pl_free(v->spell_table);
    pl_free(v->raw);
    pl_free(v->raw_off);
    pl_free(v->pairs);
    pl_free(v);
}

pl_status pl_gpt2_vocab_load(pl_gpt2_vocab **out, const char *encoder_json, const char *vocab_bpe)
{
    pl_status st = PL_OK;
    *out = NULL;
    pl_gpt2_vocab *v = pl_calloc(1, sizeof *v);
    if (!v)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening GPT-2 tokenizer");
    atomic_init(&v->refs, 1);
    PL_TRY(load_encoder(v, encoder_json));
    PL_TRY(load_merges(v, vocab_bpe));
    *out = v;
    return PL_OK;
fail:
    vocab_free(v);
    return st;
}

void pl_gpt2_vocab_retain(pl_gpt2_vocab *v) { atomic_fetch_add(&v->refs, 1); }

void pl_gpt2_vocab_release(pl_gpt2_vocab *v)
{
    if (v && atomic_fetch_sub(&v->refs, 1) == 1)
        vocab_free(v);
}
