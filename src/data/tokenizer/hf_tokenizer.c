/* HuggingFaceTokenizer: Megatron's _HuggingFaceTokenizer over a tokenizer.json, with the
 * encode pipeline of Hugging Face tokenizers 0.22 (TokenizerImpl::encode_single_sequence
 * then post_process with add_special_tokens = true):
 *
 *   1. added tokens with normalized = false are cut out of the raw text (leftmost-
 *      longest, honouring single_word, lstrip, rstrip);
 *   2. each remaining segment is normalized, then added tokens with normalized = true
 *      are cut out of it;
 *   3. each remaining piece is pre-tokenized (Split / ByteLevel / Metaspace stages);
 *   4. each pre-token goes through the BPE model (ignore_merges, characters to ids,
 *      byte fallback or unk, merges by rank: bpe.h), with a word cache;
 *   5. the post-processor's special tokens wrap the ids (TemplateProcessing's single).
 *
 * Megatron calls tokenizer(text).input_ids (transformers' default add_special_tokens =
 * True), so step 5 is part of encode: the Llama 2 family's tokenizer.json prepends <s>;
 * Llama 3's adds nothing when its post-processor is ByteLevel only.
 *
 * decode is tokenizers' Tokenizer::decode(ids, skip_special_tokens = false): ids to
 * token strings (added tokens first), then the decoder chain. transformers'
 * clean_up_tokenization_spaces is not applied. Unknown ids are an error (tokenizers
 * drops them silently). */
#include "data/tokenizer/gpt2_internal.h"
#include "data/tokenizer/hf_internal.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/word_cache.h"

#include "base/alloc.h"
#include "base/utf8.h"

#include <string.h>

/* A list of strings in one buffer: pre-token pieces, decoder tokens. */
typedef struct strlist {
    pl_bytes buf;
    size_t *off, *len;
    uint8_t *first; /* pieces: starts at offset 0 of the original text */
    int64_t n, cap;
} strlist;

typedef struct hf {
    pl_tokenizer base;
    pl_hf_model *m;
    pl_word_cache cache;
    pl_bpe_scratch scratch;
    strlist lists[2];    /* pre-tokenizer stages, ping-pong */
    pl_bytes mapped;     /* a pre-token through the byte alphabet (streamed pipelines) */
    int32_t *word;       /* ids of the pre-token being merged */
    int64_t word_cap;
    uint32_t cp_of[256]; /* GPT-2's byte alphabet */
    char byte_char[256][3];
    uint8_t byte_char_len[256];
} hf;

static const pl_tokenizer_ops hf_ops;

/* --- string lists ------------------------------------------------------------------------- */

static void sl_clear(strlist *l)
{
    l->n = 0;
    l->buf.n = 0;
}

static void sl_free(strlist *l)
{
    pl_bytes_free(&l->buf);
    pl_free(l->off);
    pl_free(l->len);
    pl_free(l->first);
    memset(l, 0, sizeof *l);
}

/* Appends an empty item; its bytes follow with sl_add. */
static pl_status sl_new(strlist *l, int first)
{
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        size_t *o = pl_realloc(l->off, (size_t)cap * sizeof *o);
        if (o)
            l->off = o;
        size_t *n = o ? pl_realloc(l->len, (size_t)cap * sizeof *n) : NULL;
        if (n)
            l->len = n;
        uint8_t *f = n ? pl_realloc(l->first, (size_t)cap) : NULL;
        if (!f)
            return pl_errorf(PL_ERR_NOMEM, "HuggingFaceTokenizer: out of memory");
        l->first = f;
        l->cap = cap;
    }
    l->off[l->n] = l->buf.n;
    l->len[l->n] = 0;
    l->first[l->n] = (uint8_t)first;
    l->n++;
    return PL_OK;
}

static pl_status sl_add(strlist *l, const void *p, size_t n)
{
    if (!n)
        return PL_OK;
    pl_status st = pl_bytes_append(&l->buf, p, n);
    if (!st)
        l->len[l->n - 1] += n;
    return st;
}

static pl_status sl_push(strlist *l, const void *p, size_t n, int first)
{
    pl_status st = sl_new(l, first);
    return st ? st : sl_add(l, p, n);
}

static const char *sl_str(const strlist *l, int64_t i) { return l->buf.data + l->off[i]; }

/* Drops empty items (PreTokenizedString::split does). */
static void sl_drop_empty(strlist *l)
{
    int64_t w = 0;
    for (int64_t i = 0; i < l->n; i++)
        if (l->len[i]) {
            l->off[w] = l->off[i];
            l->len[w] = l->len[i];
            l->first[w] = l->first[i];
            w++;
        }
    l->n = w;
}

/* --- normalizers ---------------------------------------------------------------------------- */

/* Appends s with every non-overlapping occurrence of pat replaced by rep. */
static pl_status replace_all(pl_bytes *out, const char *s, size_t n, const char *pat, size_t np,
                             const char *rep, size_t nr)
{
    pl_status st = PL_OK;
    size_t i = 0, from = 0;
    while (i + np <= n) {
        if (memcmp(s + i, pat, np) == 0) {
            if ((st = pl_bytes_append(out, s + from, i - from)) ||
                (st = pl_bytes_append(out, rep, nr)))
                return st;
            i += np;
            from = i;
        } else {
            i++;
        }
    }
    return pl_bytes_append(out, s + from, n - from);
}

pl_status pl_hf_normalize(const pl_hf_model *m, const char *s, size_t n, pl_bytes *out)
{
    pl_status st = PL_OK;
    pl_bytes a = {0}, b = {0};
    PL_TRY(pl_bytes_append(&a, s, n));
    for (int k = 0; k < m->n_norm; k++) {
        const hf_norm *x = &m->norm[k];
        b.n = 0;
        if (x->kind == HF_NORM_PREPEND) {
            if (a.n) { /* Prepend leaves an empty string alone */
                PL_TRY(pl_bytes_append(&b, x->a, x->na));
                PL_TRY(pl_bytes_append(&b, a.data, a.n));
            }
        } else {
            PL_TRY(replace_all(&b, a.data ? a.data : "", a.n, x->a, x->na, x->b, x->nb));
        }
        pl_bytes t = a;
        a = b;
        b = t;
    }
    PL_TRY(pl_bytes_append(out, a.data ? a.data : "", a.n));
fail:
    pl_bytes_free(&a);
    pl_bytes_free(&b);
    return st;
}

/* --- pre-tokenizers --------------------------------------------------------------------------- */

/* Splits each item of in by the regex, with the behaviour, into out. */
static pl_status pre_split(const strlist *in, strlist *out, hf_regex re, hf_split_behavior beh,
                           int invert)
{
    pl_status st;
    for (int64_t i = 0; i < in->n; i++) {
        const uint8_t *s = (const uint8_t *)sl_str(in, i);
        size_t n = in->len[i];
        /* The known regexes match at every position: the matches tile the piece. With
         * invert every piece is a "non-match". */
        int is_match = !invert, prev_match = 0;
        int64_t first_item = out->n;
        for (size_t pos = 0, end; pos < n; pos = end) {
            if (pl_hf_regex_next(re, s, n, pos, &end) < 0)
                return pl_errorf(PL_ERR_FORMAT, "invalid UTF-8 at byte %zu of a pre-token", end);
            int first = in->first[i] && pos == 0;
            switch (beh) {
            case HF_SPLIT_REMOVED:
                if (!is_match)
                    st = sl_push(out, s + pos, end - pos, first);
                else
                    st = PL_OK;
                break;
            case HF_SPLIT_ISOLATED:
                st = sl_push(out, s + pos, end - pos, first);
                break;
            case HF_SPLIT_CONTIGUOUS:
                if (out->n > first_item && is_match == prev_match)
                    st = sl_add(out, s + pos, end - pos);
                else
                    st = sl_push(out, s + pos, end - pos, first);
                break;
            case HF_SPLIT_MERGED_PREV:
                if (is_match && !prev_match && out->n > first_item)
                    st = sl_add(out, s + pos, end - pos);
                else
                    st = sl_push(out, s + pos, end - pos, first);
                break;
            default: /* MERGED_NEXT: a match starts a piece that takes the non-match after it */
                if (!is_match && prev_match && out->n > first_item)
                    st = sl_add(out, s + pos, end - pos);
                else
                    st = sl_push(out, s + pos, end - pos, first);
                break;
            }
            if (st)
                return st;
            prev_match = is_match;
        }
    }
    return PL_OK;
}

static pl_status pre_bytelevel(hf *h, const strlist *in, strlist *out, const hf_pre *p)
{
    pl_status st;
    strlist tmp = {0};
    const strlist *src = in;
    if (p->add_prefix_space || p->use_regex) {
        for (int64_t i = 0; i < in->n; i++) {
            const char *s = sl_str(in, i);
            if ((st = sl_new(&tmp, in->first[i])))
                goto done;
            if (p->add_prefix_space && !(in->len[i] && s[0] == ' ') && (st = sl_add(&tmp, " ", 1)))
                goto done;
            if ((st = sl_add(&tmp, s, in->len[i])))
                goto done;
        }
        if (p->use_regex) {
            strlist t2 = {0};
            st = pre_split(&tmp, &t2, HF_RE_GPT2, HF_SPLIT_ISOLATED, 0);
            sl_free(&tmp);
            tmp = t2;
            if (st)
                goto done;
        }
        src = &tmp;
    }
    for (int64_t i = 0; i < src->n; i++) {
        const uint8_t *s = (const uint8_t *)sl_str(src, i);
        if ((st = sl_new(out, src->first[i])))
            goto done;
        for (size_t k = 0; k < src->len[i]; k++)
            if ((st = sl_add(out, h->byte_char[s[k]], h->byte_char_len[s[k]])))
                goto done;
    }
    st = PL_OK;
done:
    sl_free(&tmp);
    return st;
}

static pl_status pre_metaspace(const strlist *in, strlist *out, const hf_pre *p)
{
    pl_status st;
    pl_bytes b = {0};
    for (int64_t i = 0; i < in->n; i++) {
        b.n = 0;
        if ((st = replace_all(&b, sl_str(in, i), in->len[i], " ", 1, p->replacement, p->nrep)))
            goto done;
        int starts = b.n >= p->nrep && memcmp(b.data, p->replacement, p->nrep) == 0;
        int prepend = !starts && (p->scheme == HF_PREPEND_ALWAYS ||
                                  (p->scheme == HF_PREPEND_FIRST && in->first[i]));
        const char *s = b.data ? b.data : "";
        if (!p->split) {
            if ((st = sl_new(out, in->first[i])) || (prepend && (st = sl_add(out, p->replacement, p->nrep))) ||
                (st = sl_add(out, s, b.n)))
                goto done;
            continue;
        }
        /* Split on the replacement, MergedWithNext: each replacement starts a piece. A
         * prepended replacement starts the first. */
        int64_t first_item = out->n;
        if (prepend && (st = sl_push(out, p->replacement, p->nrep, in->first[i])))
            goto done;
        for (size_t k = 0; k < b.n;) {
            int32_t cp;
            size_t len = pl_utf8_next((const unsigned char *)s + k, b.n - k, &cp);
            int is_rep = len == p->nrep && memcmp(s + k, p->replacement, len) == 0;
            if (is_rep || out->n == first_item)
                st = sl_push(out, s + k, len, in->first[i] && out->n == first_item);
            else
                st = sl_add(out, s + k, len);
            if (st)
                goto done;
            k += len;
        }
    }
    st = PL_OK;
done:
    pl_bytes_free(&b);
    return st;
}

/* Runs the pre-tokenizer stages on one piece; the result is in h->lists[*which]. */
static pl_status pretokenize(hf *h, const char *s, size_t n, int first, int *which)
{
    pl_status st;
    int cur = 0;
    sl_clear(&h->lists[0]);
    if ((st = sl_push(&h->lists[0], s, n, first)))
        return st;
    for (int k = 0; k < h->m->n_pre; k++) {
        const hf_pre *p = &h->m->pre[k];
        strlist *in = &h->lists[cur], *out = &h->lists[!cur];
        sl_clear(out);
        if (p->kind == HF_PRE_SPLIT)
            st = pre_split(in, out, p->regex, p->behavior, p->invert);
        else if (p->kind == HF_PRE_BYTELEVEL)
            st = pre_bytelevel(h, in, out, p);
        else
            st = pre_metaspace(in, out, p);
        if (st)
            return st;
        sl_drop_empty(out);
        cur = !cur;
    }
    *which = cur;
    return PL_OK;
}

/* --- the BPE model ---------------------------------------------------------------------------- */

static pl_status word_reserve(hf *h, int64_t n)
{
    if (n <= h->word_cap)
        return PL_OK;
    int32_t *w = pl_malloc((size_t)n * sizeof *w);
    if (!w)
        return pl_errorf(PL_ERR_NOMEM, "HuggingFaceTokenizer: out of memory for a pre-token of "
                         "%lld bytes", (long long)n);
    pl_free(h->word);
    h->word = w;
    h->word_cap = n;
    return PL_OK;
}

/* Appends the ids of one pre-token w[0..n) (BPE::tokenize_with_cache). */
static pl_status model_tokenize(hf *h, const uint8_t *w, size_t n, pl_ids *out)
{
    const pl_hf_model *m = h->m;
    uint64_t hash = 0;
    if (n <= PL_WORD_CACHE_MAX_WORD) { /* the cache first: it holds ignore_merges hits too */
        int nids;
        hash = pl_word_hash(w, n);
        const int32_t *ids = pl_word_cache_get(&h->cache, w, n, hash, &nids);
        if (ids)
            return pl_ids_append(out, ids, nids);
    }
    if (m->ignore_merges) {
        int32_t id = pl_strtab_find(&m->vocab, (const char *)w, n);
        if (id >= 0) {
            if (n <= PL_WORD_CACHE_MAX_WORD)
                pl_word_cache_put(&h->cache, w, n, hash, &id, 1);
            return pl_ids_push(out, id);
        }
    }
    pl_status st = word_reserve(h, (int64_t)n);
    if (st)
        return st;
    int64_t k = 0;
    int32_t unk_pending = -1; /* an unknown run not yet added (fuse_unk) */
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t len = pl_utf8_next(w + i, n - i, &cp);
        int32_t id = pl_strtab_find(&m->vocab, (const char *)w + i, len);
        if (id >= 0) {
            if (unk_pending >= 0) {
                h->word[k++] = unk_pending;
                unk_pending = -1;
            }
            h->word[k++] = id;
        } else {
            int all = m->byte_fallback;
            for (size_t b = 0; all && b < len; b++)
                all = m->byte_piece[w[i + b]] >= 0;
            if (all) { /* byte pieces; a pending unk stays pending, as in tokenizers */
                for (size_t b = 0; b < len; b++)
                    h->word[k++] = m->byte_piece[w[i + b]];
            } else if (m->unk >= 0) {
                if (unk_pending >= 0 && !m->fuse_unk)
                    h->word[k++] = unk_pending;
                unk_pending = m->unk;
            }
        }
        i += len;
    }
    if (unk_pending >= 0)
        h->word[k++] = unk_pending;
    if ((st = pl_bpe_merge(&m->merges, h->word, &k, &h->scratch)))
        return st;
    if (n <= PL_WORD_CACHE_MAX_WORD && k > 0)
        pl_word_cache_put(&h->cache, w, n, hash, h->word, k);
    return pl_ids_append(out, h->word, k);
}

/* --- added tokens and the pipeline ------------------------------------------------------------ */

/* The last code point of s[0..n) (n > 0), valid UTF-8. */
static int32_t last_cp(const uint8_t *s, size_t n, size_t *start)
{
    size_t i = n - 1;
    while (i > 0 && (s[i] & 0xC0) == 0x80)
        i--;
    int32_t cp;
    pl_utf8_next(s + i, n - i, &cp);
    *start = i;
    return cp;
}

/* A match of an added token at [*start, *stop) of s[0..n), after single_word, lstrip and
 * rstrip (AddedVocabulary::find_matches); 0 if single_word discards it. */
static int adjust_match(const hf_added *a, const uint8_t *s, size_t n, size_t start_offset,
                        size_t *start, size_t *stop)
{
    size_t st0;
    int32_t cp;
    if (a->single_word) {
        int start_space = *start == 0 || !pl_hf_is_word(last_cp(s, *start, &st0));
        int stop_space = 1;
        if (*stop < n) {
            pl_utf8_next(s + *stop, n - *stop, &cp);
            stop_space = !pl_hf_is_word(cp);
        }
        if (!start_space || !stop_space)
            return 0;
    }
    if (a->lstrip) {
        size_t b = *start;
        while (b > 0 && pl_hf_is_space(last_cp(s, b, &st0)))
            b = st0;
        *start = b > start_offset ? b : start_offset;
    }
    if (a->rstrip) {
        size_t e = *stop;
        while (e < n) {
            size_t len = pl_utf8_next(s + e, n - e, &cp);
            if (!pl_hf_is_space(cp))
                break;
            e += len;
        }
        *stop = e;
    }
    return 1;
}

static const char SPACE[] = "\xE2\x96\x81"; /* U+2581 */

/* One pre-token to the model; cut into words at the start of each U+2581 run when the
 * vocabulary makes that safe (pl_hf_model.split_words). */
static pl_status tokenize_pretoken(hf *h, const uint8_t *w, size_t n, pl_ids *out)
{
    if (!h->m->split_words)
        return model_tokenize(h, w, n, out);
    pl_status st;
    size_t start = 0;
    int prev_space = 0;
    for (size_t i = 0; i < n;) {
        int is_space = n - i >= 3 && memcmp(w + i, SPACE, 3) == 0;
        if (is_space && !prev_space && i > start) {
            if ((st = model_tokenize(h, w + start, i - start, out)))
                return st;
            start = i;
        }
        prev_space = is_space;
        int32_t cp;
        i += pl_utf8_next(w + i, n - i, &cp);
    }
    return model_tokenize(h, w + start, n - start, out);
}

/* The common Llama 3 / GPT-2 pipelines, streamed: regex matches straight to the model,
 * through the byte alphabet (Split(Isolated) then ByteLevel without prefix or regex, or
 * ByteLevel(use_regex) alone). Returns 0 when the pipeline is not one of these. */
static int streamable(const pl_hf_model *m, hf_regex *re)
{
    if (m->n_pre == 2 && m->pre[0].kind == HF_PRE_SPLIT && m->pre[0].behavior == HF_SPLIT_ISOLATED &&
        !m->pre[0].invert && m->pre[1].kind == HF_PRE_BYTELEVEL && !m->pre[1].add_prefix_space &&
        !m->pre[1].use_regex) {
        *re = m->pre[0].regex;
        return 1;
    }
    if (m->n_pre == 1 && m->pre[0].kind == HF_PRE_BYTELEVEL && !m->pre[0].add_prefix_space &&
        m->pre[0].use_regex) {
        *re = HF_RE_GPT2;
        return 1;
    }
    return 0;
}

static pl_status encode_piece(hf *h, const char *s, size_t n, int first, pl_ids *out)
{
    pl_status st;
    hf_regex re;
    if (streamable(h->m, &re)) {
        const uint8_t *u = (const uint8_t *)s;
        for (size_t pos = 0, end; pos < n; pos = end) {
            if (pl_hf_regex_next(re, u, n, pos, &end) < 0)
                return pl_errorf(PL_ERR_FORMAT, "invalid UTF-8 at byte %zu of a pre-token", end);
            h->mapped.n = 0;
            if ((st = pl_bytes_reserve(&h->mapped, 2 * (end - pos))))
                return st;
            char *d = h->mapped.data;
            for (size_t k = pos; k < end; k++) {
                memcpy(d, h->byte_char[u[k]], 2);
                d += h->byte_char_len[u[k]];
            }
            h->mapped.n = (size_t)(d - h->mapped.data);
            if ((st = model_tokenize(h, (const uint8_t *)h->mapped.data, h->mapped.n, out)))
                return st;
        }
        return PL_OK;
    }
    int which;
    if ((st = pretokenize(h, s, n, first, &which)))
        return st;
    const strlist *l = &h->lists[which];
    for (int64_t i = 0; i < l->n; i++)
        if ((st = tokenize_pretoken(h, (const uint8_t *)sl_str(l, i), l->len[i], out)))
            return st;
    return PL_OK;
}

/* Cuts the added tokens of trie t out of s[0..n); the rest goes to encode_piece (t =
 * the raw trie: normalized first, then cut with the normalized trie). */
static pl_status split_added(hf *h, const pl_trie *t, const char *str, size_t n, int first,
                             pl_ids *out);

static pl_status encode_segment(hf *h, const char *s, size_t n, int first, pl_ids *out)
{
    const pl_hf_model *m = h->m;
    if (m->n_norm == 0)
        return split_added(h, &m->norm_trie, s, n, first, out);
    pl_bytes norm = {0};
    pl_status st = pl_hf_normalize(m, s, n, &norm);
    if (!st)
        st = split_added(h, &m->norm_trie, norm.data ? norm.data : "", norm.n, first, out);
    pl_bytes_free(&norm);
    return st;
}

static pl_status split_added(hf *h, const pl_trie *t, const char *str, size_t n, int first,
                             pl_ids *out)
{
    const pl_hf_model *m = h->m;
    const uint8_t *s = (const uint8_t *)str;
    int raw = t == &m->raw_trie;
    pl_status st;
    size_t start_offset = 0, from = 0;
    while (from < n) {
        size_t len, start;
        int32_t tok;
        if ((start = pl_trie_find(t, s, n, from, &len, &tok)) >= n)
            break;
        size_t stop = start + len;
        from = stop; /* the matcher goes on after the match, whatever happens to it */
        if (!adjust_match(&m->added[tok], s, n, start_offset, &start, &stop))
            continue;
        if (start_offset < start) {
            int f = first && start_offset == 0;
            st = raw ? encode_segment(h, str + start_offset, start - start_offset, f, out)
                     : encode_piece(h, str + start_offset, start - start_offset, f, out);
            if (st)
                return st;
        }
        if ((st = pl_ids_push(out, m->added[tok].id)))
            return st;
        start_offset = stop;
    }
    if (start_offset < n) {
        int f = first && start_offset == 0;
        return raw ? encode_segment(h, str + start_offset, n - start_offset, f, out)
                   : encode_piece(h, str + start_offset, n - start_offset, f, out);
    }
    return PL_OK;
}

static pl_status hf_encode(pl_tokenizer *t, const char *text, size_t len, pl_ids *out)
{
    hf *h = t->impl;
    int64_t n0 = out->n;
    size_t bad = pl_utf8_check(text, len);
    if (bad < len)
        return pl_errorf(PL_ERR_FORMAT, "invalid UTF-8 at byte offset %zu", bad);
    pl_status st = pl_ids_append(out, h->m->post_prefix.data, h->m->post_prefix.n);
    if (!st)
        st = split_added(h, &h->m->raw_trie, text, len, 1, out);
    if (!st)
        st = pl_ids_append(out, h->m->post_suffix.data, h->m->post_suffix.n);
    if (st)
        out->n = n0;
    return st;
}

/* --- decode ------------------------------------------------------------------------------------ */

/* Appends s with invalid UTF-8 replaced as Rust's String::from_utf8_lossy does: each
 * maximal prefix of a valid sequence becomes one U+FFFD. */
static pl_status append_lossy(pl_bytes *out, const uint8_t *s, size_t n)
{
    pl_status st = PL_OK;
    size_t i = 0;
    while (i < n && !st) {
        size_t ok = pl_utf8_check((const char *)s + i, n - i);
        if ((st = pl_bytes_append(out, s + i, ok)) || i + ok == n)
            break;
        i += ok;
        unsigned c = s[i];
        size_t need = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c == 0xE0)
            need = 2, lo = 0xA0;
        else if (c == 0xED)
            need = 2, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF)
            need = 2;
        else if (c == 0xF0)
            need = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3)
            need = 3;
        else if (c == 0xF4)
            need = 3, hi = 0x8F;
        size_t k = 1;
        if (need && i + 1 < n && s[i + 1] >= lo && s[i + 1] <= hi) {
            k = 2;
            while (k <= need && i + k < n && (s[i + k] & 0xC0) == 0x80)
                k++;
        }
        st = pl_bytes_append(out, "\xEF\xBF\xBD", 3);
        i += k;
    }
    return st;
}

static int byte_token(const char *s, size_t n, uint8_t *b)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return 0;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return 0;
        v = v * 16 + d;
    }
    *b = (uint8_t)v;
    return 1;
}

/* One decoder step: in -> out. */
static pl_status decode_step(const hf_dec *d, const strlist *in, strlist *out)
{
    pl_status st = PL_OK;
    pl_bytes tmp = {0};
    switch (d->kind) {
    case HF_DEC_BYTELEVEL: {
        uint32_t cp_of[256];
        int16_t byte_of[PL_GPT2_ALPHABET_END];
        pl_gpt2_byte_alphabet(cp_of, byte_of);
        for (int64_t i = 0; i < in->n && !st; i++) {
            const uint8_t *s = (const uint8_t *)sl_str(in, i);
            size_t n = in->len[i], j = 0;
            size_t mark = tmp.n;
            while (j < n) {
                int32_t cp;
                size_t len = pl_utf8_next(s + j, n - j, &cp);
                if (cp < 0 || cp >= PL_GPT2_ALPHABET_END || byte_of[cp] < 0)
                    break;
                uint8_t b = (uint8_t)byte_of[cp];
                if ((st = pl_bytes_append(&tmp, &b, 1)))
                    break;
                j += len;
            }
            if (!st && j < n) { /* a character outside the alphabet: the token's own bytes */
                tmp.n = mark;
                st = pl_bytes_append(&tmp, s, n);
            }
        }
        if (!st && !(st = sl_new(out, 0)))
            st = append_lossy(&out->buf, (const uint8_t *)(tmp.data ? tmp.data : ""), tmp.n);
        if (!st)
            out->len[0] = out->buf.n;
        break;
    }
    case HF_DEC_REPLACE:
        for (int64_t i = 0; i < in->n && !st; i++) {
            tmp.n = 0;
            if (!(st = replace_all(&tmp, sl_str(in, i), in->len[i], d->a, d->na, d->b, d->nb)))
                st = sl_push(out, tmp.data ? tmp.data : "", tmp.n, 0);
        }
        break;
    case HF_DEC_BYTEFALLBACK: {
        int64_t nbytes = 0;
        tmp.n = 0;
        for (int64_t i = 0; i <= in->n && !st; i++) {
            uint8_t b;
            if (i < in->n && byte_token(sl_str(in, i), in->len[i], &b)) {
                st = pl_bytes_append(&tmp, &b, 1);
                nbytes++;
                continue;
            }
            if (nbytes) {
                if (pl_utf8_valid(tmp.data, tmp.n))
                    st = sl_push(out, tmp.data, tmp.n, 0);
                else
                    for (int64_t k = 0; k < nbytes && !st; k++)
                        st = sl_push(out, "\xEF\xBF\xBD", 3, 0);
                tmp.n = 0;
                nbytes = 0;
            }
            if (!st && i < in->n)
                st = sl_push(out, sl_str(in, i), in->len[i], 0);
        }
        break;
    }
    case HF_DEC_FUSE:
        if (!(st = sl_new(out, 0)))
            for (int64_t i = 0; i < in->n && !st; i++)
                st = sl_add(out, sl_str(in, i), in->len[i]);
        break;
    case HF_DEC_STRIP:
        for (int64_t i = 0; i < in->n && !st; i++) {
            const char *s = sl_str(in, i);
            size_t a = 0, b = in->len[i];
            for (int64_t k = 0; k < d->start && b - a >= d->nch && memcmp(s + a, d->ch, d->nch) == 0; k++)
                a += d->nch;
            for (int64_t k = 0; k < d->stop && b - a >= d->nch && memcmp(s + b - d->nch, d->ch, d->nch) == 0; k++)
                b -= d->nch;
            st = sl_push(out, s + a, b - a, 0);
        }
        break;
    case HF_DEC_METASPACE:
        for (int64_t i = 0; i < in->n && !st; i++) {
            const char *s = sl_str(in, i);
            size_t n = in->len[i];
            int drop = i == 0 && d->scheme != HF_PREPEND_NEVER;
            if ((st = sl_new(out, 0)))
                break;
            for (size_t k = 0; k < n && !st;) {
                int32_t cp;
                size_t len = pl_utf8_next((const unsigned char *)s + k, n - k, &cp);
                if (len == d->nch && memcmp(s + k, d->ch, len) == 0)
                    st = drop ? PL_OK : sl_add(out, " ", 1);
                else
                    st = sl_add(out, s + k, len);
                k += len;
            }
        }
        break;
    }
    pl_bytes_free(&tmp);
    return st;
}

static pl_status hf_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, pl_bytes *out)
{
    const pl_hf_model *m = ((const hf *)t->impl)->m;
    pl_status st = PL_OK;
    strlist l[2];
    memset(l, 0, sizeof l);
    int cur = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *s = pl_hf_id_token(m, ids[i], &len);
        if (!s) {
            st = pl_errorf(PL_ERR_ARG, "HuggingFaceTokenizer decode: token id %d (at position %lld) "
                           "is not in the vocabulary", ids[i], (long long)i);
            goto fail;
        }
        PL_TRY(sl_push(&l[0], s, len, 0));
    }
    if (!m->has_decoder) { /* tokens joined with spaces */
        for (int64_t i = 0; i < l[0].n; i++) {
            if (i && (st = pl_bytes_append(out, " ", 1)))
                goto fail;
            PL_TRY(pl_bytes_append(out, sl_str(&l[0], i), l[0].len[i]));
        }
        goto fail;
    }
    for (int k = 0; k < m->n_dec; k++) {
        sl_clear(&l[!cur]);
        PL_TRY(decode_step(&m->dec[k], &l[cur], &l[!cur]));
        cur = !cur;
    }
    for (int64_t i = 0; i < l[cur].n; i++)
        PL_TRY(pl_bytes_append(out, sl_str(&l[cur], i), l[cur].len[i]));
fail:
    sl_free(&l[0]);
    sl_free(&l[1]);
    if (!st && !out->data)
        st = pl_bytes_append(out, "", 0);
    return st;
}

/* --- handles ------------------------------------------------------------------------------------ */

static int32_t hf_token_id(const pl_tokenizer *t, const char *tok, size_t len)
{
    const pl_hf_model *m = ((const hf *)t->impl)->m;
    for (int32_t i = 0; i < m->n_added; i++)
        if (m->added[i].len == len && memcmp(m->added[i].content, tok, len) == 0)
            return m->added[i].id;
    return pl_strtab_find(&m->vocab, tok, len);
}

static void handle_free(hf *h)
{
    if (!h)
        return;
    pl_word_cache_free(&h->cache);
    pl_bpe_scratch_free(&h->scratch);
    sl_free(&h->lists[0]);
    sl_free(&h->lists[1]);
    pl_bytes_free(&h->mapped);
    pl_free(h->word);
    pl_hf_model_release(h->m);
    pl_free(h);
}

static pl_status handle_new(pl_hf_model *m, pl_tokenizer **out)
{
    pl_status st = PL_OK;
    *out = NULL;
    hf *h = pl_calloc(1, sizeof *h);
    if (!h)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a HuggingFaceTokenizer handle");
    pl_hf_model_retain(m);
    h->m = m;
    PL_TRY(pl_word_cache_init(&h->cache, "HuggingFaceTokenizer"));
    int16_t byte_of[PL_GPT2_ALPHABET_END];
    pl_gpt2_byte_alphabet(h->cp_of, byte_of);
    for (int b = 0; b < 256; b++) {
        uint32_t c = h->cp_of[b];
        if (c < 0x80) {
            h->byte_char[b][0] = (char)c;
            h->byte_char_len[b] = 1;
        } else {
            h->byte_char[b][0] = (char)(0xC0 | (c >> 6));
            h->byte_char[b][1] = (char)(0x80 | (c & 0x3F));
            h->byte_char_len[b] = 2;
        }
    }
    h->base.ops = &hf_ops;
    h->base.type = "HuggingFaceTokenizer";
    h->base.vocab_size = m->vocab_size;
    h->base.eod = m->eod;
    h->base.impl = h;
    *out = &h->base;
    return PL_OK;
fail:
    handle_free(h);
    return st;
}

static pl_status hf_fork(const pl_tokenizer *t, pl_tokenizer **out)
{
    return handle_new(((const hf *)t->impl)->m, out);
}

static void hf_free(pl_tokenizer *t) { handle_free(t->impl); }

static const pl_tokenizer_ops hf_ops = {hf_encode, hf_decode, hf_token_id, hf_fork, hf_free};

pl_status pl_hf_tokenizer_open(pl_tokenizer **out, const char *path)
{
    pl_hf_model *m;
    *out = NULL;
    pl_status st = pl_hf_model_load(&m, path);
    if (st)
        return st;
    st = handle_new(m, out);
    pl_hf_model_release(m);
    return st;
}
