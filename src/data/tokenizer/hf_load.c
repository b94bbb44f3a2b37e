/* HuggingFaceTokenizer: loading tokenizer.json (and tokenizer_config.json).
 *
 * What is read, as tokenizers 0.22 deserializes it:
 *   model           BPE: vocab (ids must be 0..n-1), merges ("a b" strings or [a, b]
 *                   pairs; rank = position, a later duplicate takes the later rank),
 *                   unk_token, fuse_unk, byte_fallback, ignore_merges. dropout must be
 *                   null or 0 (sampling is not reproducible); continuing_subword_prefix
 *                   and end_of_word_suffix must be null.
 *   normalizer      null, Sequence, Prepend, Replace (string pattern)
 *   pre_tokenizer   null, Sequence, Split (the Llama 3 or GPT-2 regex), ByteLevel,
 *                   Metaspace
 *   post_processor  null, Sequence, ByteLevel (offsets only), TemplateProcessing
 *                   ("single": special tokens around $A)
 *   decoder         null, Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip,
 *                   Metaspace
 *   added_tokens    content, special, normalized, lstrip, rstrip, single_word; ids
 *                   assigned as tokenizers does (the vocabulary's id if the content is
 *                   in it, else the next id after the vocabulary; the file's "id" is
 *                   only checked, as tokenizers only warns)
 *   truncation, padding: ignored, as transformers' tokenizer(text) disables both.
 * Anything else is an error naming the file and the component type.
 *
 * From tokenizer_config.json beside it (if present): eos_token (Megatron's eod is its
 * id), and for tokenizer_class LlamaTokenizer[Fast], add_bos_token / add_eos_token,
 * with which transformers' LlamaTokenizerFast rebuilds the post-processor. */
#include "data/tokenizer/hf_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "base/utf8.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* --- small JSON helpers ---------------------------------------------------------------- */

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Bool field: absent or null gives def; anything but a bool is an error. */
static pl_status get_bool(const char *path, const char *where, const cJSON *o, const char *key,
                          int def, int *out)
{
    const cJSON *v = get(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return PL_OK;
    }
    if (!cJSON_IsBool(v))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s.%s: expected true or false", path, where, key);
    *out = cJSON_IsTrue(v);
    return PL_OK;
}

static pl_status dup_str(const char *s, char **out, size_t *n)
{
    *n = strlen(s);
    *out = pl_malloc(*n + 1);
    if (!*out)
        return pl_errorf(PL_ERR_NOMEM, "out of memory loading a tokenizer.json");
    memcpy(*out, s, *n + 1);
    return PL_OK;
}

/* A string field that must be present. */
static pl_status get_str(const char *path, const char *where, const cJSON *o, const char *key,
                         const char **out)
{
    const cJSON *v = get(o, key);
    if (!cJSON_IsString(v))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s.%s: expected a string", path, where, key);
    *out = v->valuestring;
    return PL_OK;
}

static const char *type_of(const cJSON *o)
{
    const cJSON *t = get(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static pl_status unsupported(const char *path, const char *component, const char *type,
                             const char *supported)
{
    return pl_errorf(PL_ERR_UNSUPPORTED,
                     "%s: %s of type '%s' is not supported by plait's HuggingFaceTokenizer "
                     "(supported: %s)", path, component, type ? type : "(no type)", supported);
}

/* One code point in UTF-8, as serde reads a Rust char. */
static pl_status one_char(const char *path, const char *where, const char *s, char out[4],
                          size_t *n)
{
    size_t len = strlen(s);
    int32_t cp;
    size_t k = len ? pl_utf8_next((const unsigned char *)s, len, &cp) : 0;
    if (len == 0 || cp < 0 || k != len)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: expected a single character, got \"%.40s\"", path,
                         where, s);
    memcpy(out, s, k);
    *n = k;
    return PL_OK;
}

/* --- normalizer -------------------------------------------------------------------------- */

static pl_status push_norm(pl_hf_model *m, hf_norm x)
{
    hf_norm *p = pl_realloc(m->norm, (size_t)(m->n_norm + 1) * sizeof *p);
    if (!p)
        return pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", m->path);
    m->norm = p;
    m->norm[m->n_norm++] = x;
    return PL_OK;
}

/* Replace's pattern: {"String": s}; {"Regex": r} is refused. */
static pl_status string_pattern(const char *path, const char *where, const cJSON *o,
                                const char **out)
{
    const cJSON *pat = get(o, "pattern");
    const cJSON *s = get(pat, "String");
    if (cJSON_IsString(s)) {
        *out = s->valuestring;
        return PL_OK;
    }
    if (get(pat, "Regex"))
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: %s with a Regex pattern is not supported (only "
                         "{\"String\": ...} patterns)", path, where);
    return pl_errorf(PL_ERR_FORMAT, "%s: %s.pattern: expected {\"String\": ...}", path, where);
}

static pl_status load_normalizer(pl_hf_model *m, const cJSON *o, int depth)
{
    pl_status st = PL_OK;
    hf_norm x = {0};
    const char *a = NULL, *b = NULL;
    if (!o || cJSON_IsNull(o))
        return PL_OK;
    const char *type = type_of(o);
    if (type && strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = get(o, "normalizers"), *it;
        if (!cJSON_IsArray(list))
            return pl_errorf(PL_ERR_FORMAT, "%s: normalizer Sequence: expected a list 'normalizers'",
                             m->path);
        cJSON_ArrayForEach(it, list) PL_TRY(load_normalizer(m, it, depth + 1));
        return PL_OK;
    }
    if (type && strcmp(type, "Prepend") == 0) {
        PL_TRY(get_str(m->path, "normalizer Prepend", o, "prepend", &a));
        x.kind = HF_NORM_PREPEND;
        PL_TRY(dup_str(a, &x.a, &x.na));
    } else if (type && strcmp(type, "Replace") == 0) {
        PL_TRY(string_pattern(m->path, "normalizer Replace", o, &a));
        PL_TRY(get_str(m->path, "normalizer Replace", o, "content", &b));
        if (!*a)
            return pl_errorf(PL_ERR_UNSUPPORTED, "%s: normalizer Replace with an empty pattern",
                             m->path);
        x.kind = HF_NORM_REPLACE;
        PL_TRY(dup_str(a, &x.a, &x.na));
        PL_TRY(dup_str(b, &x.b, &x.nb));
    } else {
        return unsupported(m->path, "normalizer", type, "Sequence, Prepend, Replace");
    }
    PL_TRY(push_norm(m, x));
    return PL_OK;
fail:
    pl_free(x.a);
    pl_free(x.b);
    return st;
}

/* --- pre-tokenizer --------------------------------------------------------------------- */

static const char LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static pl_status push_pre(pl_hf_model *m, hf_pre x)
{
    hf_pre *p = pl_realloc(m->pre, (size_t)(m->n_pre + 1) * sizeof *p);
    if (!p)
        return pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", m->path);
    m->pre = p;
    m->pre[m->n_pre++] = x;
    return PL_OK;
}

static pl_status prepend_scheme(const char *path, const char *where, const cJSON *o,
                                hf_prepend_scheme *out)
{
    const cJSON *v = get(o, "prepend_scheme");
    *out = HF_PREPEND_ALWAYS; /* serde default */
    if (v && !cJSON_IsNull(v)) {
        const char *s = cJSON_IsString(v) ? v->valuestring : "";
        if (strcmp(s, "always") == 0)
            *out = HF_PREPEND_ALWAYS;
        else if (strcmp(s, "first") == 0)
            *out = HF_PREPEND_FIRST;
        else if (strcmp(s, "never") == 0)
            *out = HF_PREPEND_NEVER;
        else
            return pl_errorf(PL_ERR_FORMAT, "%s: %s.prepend_scheme: expected always, first or never",
                             path, where);
    }
    const cJSON *aps = get(o, "add_prefix_space");
    if (cJSON_IsFalse(aps)) {
        if (*out != HF_PREPEND_NEVER && v && !cJSON_IsNull(v))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: add_prefix_space does not match declared "
                             "prepend_scheme", path, where);
        *out = HF_PREPEND_NEVER;
    }
    return PL_OK;
}

static pl_status load_pre(pl_hf_model *m, const cJSON *o, int depth)
{
    pl_status st = PL_OK;
    if (!o || cJSON_IsNull(o))
        return PL_OK;
    const char *type = type_of(o);
    hf_pre x;
    memset(&x, 0, sizeof x);
    if (type && strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = get(o, "pretokenizers"), *it;
        if (!cJSON_IsArray(list))
            return pl_errorf(PL_ERR_FORMAT, "%s: pre_tokenizer Sequence: expected a list "
                             "'pretokenizers'", m->path);
        cJSON_ArrayForEach(it, list) PL_TRY(load_pre(m, it, depth + 1));
        return PL_OK;
    }
    if (type && strcmp(type, "Split") == 0) {
        const cJSON *re = get(get(o, "pattern"), "Regex");
        if (!cJSON_IsString(re))
            return pl_errorf(PL_ERR_UNSUPPORTED, "%s: pre_tokenizer Split: only a Regex pattern is "
                             "supported", m->path);
        x.kind = HF_PRE_SPLIT;
        if (strcmp(re->valuestring, LLAMA3_RE) == 0)
            x.regex = HF_RE_LLAMA3;
        else if (strcmp(re->valuestring, GPT2_RE) == 0)
            x.regex = HF_RE_GPT2;
        else
            return pl_errorf(PL_ERR_UNSUPPORTED, "%s: pre_tokenizer Split: regex \"%.300s\" is not "
                             "one plait implements (the Llama 3 and GPT-2 patterns)", m->path,
                             re->valuestring);
        static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                      "MergedWithNext", "Contiguous"};
        const cJSON *beh = get(o, "behavior");
        int k = 0;
        while (k < 5 && !(cJSON_IsString(beh) && strcmp(beh->valuestring, names[k]) == 0))
            k++;
        if (k == 5)
            return pl_errorf(PL_ERR_FORMAT, "%s: pre_tokenizer Split: behavior must be one of "
                             "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
                             m->path);
        x.behavior = (hf_split_behavior)k;
        PL_TRY(get_bool(m->path, "pre_tokenizer Split", o, "invert", 0, &x.invert));
    } else if (type && strcmp(type, "ByteLevel") == 0) {
        x.kind = HF_PRE_BYTELEVEL;
        x.regex = HF_RE_GPT2;
        PL_TRY(get_bool(m->path, "pre_tokenizer ByteLevel", o, "add_prefix_space", 1,
                        &x.add_prefix_space));
        PL_TRY(get_bool(m->path, "pre_tokenizer ByteLevel", o, "use_regex", 1, &x.use_regex));
    } else if (type && strcmp(type, "Metaspace") == 0) {
        const char *rep = NULL;
        x.kind = HF_PRE_METASPACE;
        PL_TRY(get_str(m->path, "pre_tokenizer Metaspace", o, "replacement", &rep));
        PL_TRY(one_char(m->path, "pre_tokenizer Metaspace.replacement", rep, x.replacement, &x.nrep));
        PL_TRY(prepend_scheme(m->path, "pre_tokenizer Metaspace", o, &x.scheme));
        PL_TRY(get_bool(m->path, "pre_tokenizer Metaspace", o, "split", 1, &x.split));
    } else {
        return unsupported(m->path, "pre_tokenizer", type, "Sequence, Split, ByteLevel, Metaspace");
    }
    return push_pre(m, x);
fail:
    return st;
}

/* --- decoder ------------------------------------------------------------------------------- */

static pl_status load_decoder(pl_hf_model *m, const cJSON *o, int depth)
{
    pl_status st = PL_OK;
    if (!o || cJSON_IsNull(o))
        return PL_OK;
    m->has_decoder = 1;
    const char *type = type_of(o), *a = NULL, *b = NULL;
    hf_dec x;
    memset(&x, 0, sizeof x);
    if (type && strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = get(o, "decoders"), *it;
        if (!cJSON_IsArray(list))
            return pl_errorf(PL_ERR_FORMAT, "%s: decoder Sequence: expected a list 'decoders'",
                             m->path);
        cJSON_ArrayForEach(it, list) PL_TRY(load_decoder(m, it, depth + 1));
        return PL_OK;
    }
    if (type && strcmp(type, "ByteLevel") == 0) {
        x.kind = HF_DEC_BYTELEVEL;
    } else if (type && strcmp(type, "Replace") == 0) {
        x.kind = HF_DEC_REPLACE;
        PL_TRY(string_pattern(m->path, "decoder Replace", o, &a));
        PL_TRY(get_str(m->path, "decoder Replace", o, "content", &b));
        if (!*a)
            return pl_errorf(PL_ERR_UNSUPPORTED, "%s: decoder Replace with an empty pattern", m->path);
        PL_TRY(dup_str(a, &x.a, &x.na));
        PL_TRY(dup_str(b, &x.b, &x.nb));
    } else if (type && strcmp(type, "ByteFallback") == 0) {
        x.kind = HF_DEC_BYTEFALLBACK;
    } else if (type && strcmp(type, "Fuse") == 0) {
        x.kind = HF_DEC_FUSE;
    } else if (type && strcmp(type, "Strip") == 0) {
        x.kind = HF_DEC_STRIP;
        PL_TRY(get_str(m->path, "decoder Strip", o, "content", &a));
        PL_TRY(one_char(m->path, "decoder Strip.content", a, x.ch, &x.nch));
        const cJSON *s0 = get(o, "start"), *s1 = get(o, "stop");
        if (!cJSON_IsNumber(s0) || !cJSON_IsNumber(s1) || s0->valuedouble < 0 || s1->valuedouble < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: decoder Strip: start and stop must be counts",
                             m->path);
        x.start = (int64_t)s0->valuedouble;
        x.stop = (int64_t)s1->valuedouble;
    } else if (type && strcmp(type, "Metaspace") == 0) {
        x.kind = HF_DEC_METASPACE;
        PL_TRY(get_str(m->path, "decoder Metaspace", o, "replacement", &a));
        PL_TRY(one_char(m->path, "decoder Metaspace.replacement", a, x.ch, &x.nch));
        PL_TRY(prepend_scheme(m->path, "decoder Metaspace", o, &x.scheme));
    } else {
        return unsupported(m->path, "decoder", type,
                           "Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace");
    }
    hf_dec *p = pl_realloc(m->dec, (size_t)(m->n_dec + 1) * sizeof *p);
    if (!p) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", m->path);
        goto fail;
    }
    m->dec = p;
    m->dec[m->n_dec++] = x;
    return PL_OK;
fail:
    pl_free(x.a);
    pl_free(x.b);
    return st;
}

/* --- model: BPE ------------------------------------------------------------------------------ */

static int32_t vocab_find(const pl_hf_model *m, const char *s, size_t n)
{
    return pl_strtab_find(&m->vocab, s, n);
}

static pl_status load_vocab(pl_hf_model *m, const cJSON *vocab)
{
    pl_status st = PL_OK;
    const cJSON **by_id = NULL;
    if (!cJSON_IsObject(vocab))
        return pl_errorf(PL_ERR_FORMAT, "%s: model.vocab: expected an object of token -> id", m->path);
    int64_t n = cJSON_GetArraySize(vocab);
    if (n <= 0 || n >= INT32_MAX)
        return pl_errorf(PL_ERR_FORMAT, "%s: model.vocab: %lld entries", m->path, (long long)n);
    by_id = pl_calloc((size_t)n, sizeof *by_id);
    if (!by_id)
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld tokens", m->path, (long long)n);
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        double d = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(d >= 0 && d < (double)n) || d != (double)(int32_t)d) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.vocab: token \"%.200s\": ids must be the "
                           "integers 0..%lld", m->path, it->string, (long long)n - 1);
            goto fail;
        }
        if (by_id[(int32_t)d]) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.vocab: tokens \"%.200s\" and \"%.200s\" both "
                           "have id %d", m->path, by_id[(int32_t)d]->string, it->string, (int)d);
            goto fail;
        }
        by_id[(int32_t)d] = it;
    }
    for (int32_t id = 0; id < n; id++) {
        int32_t got;
        int added;
        PL_TRY(pl_strtab_add(&m->vocab, by_id[id]->string, strlen(by_id[id]->string), &got, &added));
        if (!added) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.vocab: token \"%.200s\" appears twice", m->path,
                           by_id[id]->string);
            goto fail;
        }
    }
fail:
    pl_free(by_id);
    return st;
}

/* One merge: its two tokens. */
static pl_status merge_parts(const pl_hf_model *m, const cJSON *it, int64_t rank, const char **a,
                             size_t *na, const char **b, size_t *nb)
{
    if (cJSON_IsString(it)) { /* "a b": exactly one space, as tokenizers requires */
        const char *s = it->valuestring, *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return pl_errorf(PL_ERR_FORMAT, "%s: model.merges[%lld]: \"%.200s\" is not two tokens "
                             "separated by one space", m->path, (long long)rank, s);
        *a = s;
        *na = (size_t)(sp - s);
        *b = sp + 1;
        *nb = strlen(sp + 1);
        return PL_OK;
    }
    if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
        cJSON_IsString(it->child->next)) {
        *a = it->child->valuestring;
        *na = strlen(*a);
        *b = it->child->next->valuestring;
        *nb = strlen(*b);
        return PL_OK;
    }
    return pl_errorf(PL_ERR_FORMAT, "%s: model.merges[%lld]: expected \"a b\" or [\"a\", \"b\"]",
                     m->path, (long long)rank);
}

static pl_status load_merges(pl_hf_model *m, const cJSON *merges)
{
    pl_status st = PL_OK;
    char *cat = NULL;
    size_t cap = 0;
    if (!cJSON_IsArray(merges))
        return pl_errorf(PL_ERR_FORMAT, "%s: model.merges: expected a list", m->path);
    int64_t n = cJSON_GetArraySize(merges), rank = 0;
    PL_TRY(pl_bpe_table_init(&m->merges, n));
    const cJSON *it;
    cJSON_ArrayForEach(it, merges) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        PL_TRY(merge_parts(m, it, rank, &a, &na, &b, &nb));
        int32_t ia = vocab_find(m, a, na), ib = vocab_find(m, b, nb);
        if (ia < 0 || ib < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.merges[%lld]: token \"%.*s\" is not in the "
                           "vocabulary", m->path, (long long)rank, (int)(ia < 0 ? na : nb),
                           ia < 0 ? a : b);
            goto fail;
        }
        if (na + nb > cap) {
            pl_free(cat);
            cap = 2 * (na + nb);
            if (!(cat = pl_malloc(cap))) {
                st = pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", m->path);
                goto fail;
            }
        }
        memcpy(cat, a, na);
        memcpy(cat + na, b, nb);
        int32_t merged = vocab_find(m, cat, na + nb);
        if (merged < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.merges[%lld]: merged token \"%.*s\" is not in "
                           "the vocabulary", m->path, (long long)rank, (int)(na + nb), cat);
            goto fail;
        }
        PL_TRY(pl_bpe_table_put(&m->merges, ia, ib, (uint32_t)rank, merged, 0));
        rank++;
    }
fail:
    pl_free(cat);
    return st;
}

static pl_status load_model(pl_hf_model *m, const cJSON *o)
{
    pl_status st = PL_OK;
    const char *type = type_of(o);
    if (!cJSON_IsObject(o))
        return pl_errorf(PL_ERR_FORMAT, "%s: no 'model' object", m->path);
    if (type ? strcmp(type, "BPE") != 0 : !get(o, "merges"))
        return unsupported(m->path, "model", type, "BPE");
    const cJSON *drop = get(o, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: model.dropout %g: BPE dropout samples merges at "
                         "random; only null or 0 is supported", m->path,
                         cJSON_IsNumber(drop) ? drop->valuedouble : -1.0);
    static const char *absent[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = get(o, absent[k]);
        if (v && !cJSON_IsNull(v))
            return pl_errorf(PL_ERR_UNSUPPORTED, "%s: model.%s is not supported (must be null)",
                             m->path, absent[k]);
    }
    PL_TRY(get_bool(m->path, "model", o, "fuse_unk", 0, &m->fuse_unk));
    PL_TRY(get_bool(m->path, "model", o, "byte_fallback", 0, &m->byte_fallback));
    PL_TRY(get_bool(m->path, "model", o, "ignore_merges", 0, &m->ignore_merges));
    PL_TRY(load_vocab(m, get(o, "vocab")));
    PL_TRY(load_merges(m, get(o, "merges")));
    m->unk = -1;
    const cJSON *unk = get(o, "unk_token");
    if (cJSON_IsString(unk)) {
        m->unk = vocab_find(m, unk->valuestring, strlen(unk->valuestring));
        if (m->unk < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: model.unk_token \"%.100s\" is not in the vocabulary",
                             m->path, unk->valuestring);
    } else if (unk && !cJSON_IsNull(unk)) {
        return pl_errorf(PL_ERR_FORMAT, "%s: model.unk_token: expected a string or null", m->path);
    }
    m->split_words = !m->ignore_merges && vocab_find(m, "\xE2\x96\x81", 3) >= 0;
    for (int32_t id = 0; id < m->vocab.n && m->split_words; id++) {
        const char *s = pl_strtab_str(&m->vocab, id);
        size_t len = pl_strtab_len(&m->vocab, id), k = 0;
        while (len - k >= 3 && memcmp(s + k, "\xE2\x96\x81", 3) == 0)
            k += 3;
        for (; len - k >= 3 && m->split_words; k++)
            if (memcmp(s + k, "\xE2\x96\x81", 3) == 0)
                m->split_words = 0;
    }
    for (int b = 0; b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        m->byte_piece[b] = vocab_find(m, piece, 6);
    }
fail:
    return st;
}

/* --- added tokens ----------------------------------------------------------------------------- */

static int32_t added_find(const pl_hf_model *m, const char *s, size_t n)
{
    for (int32_t i = 0; i < m->n_added; i++)
        if (m->added[i].len == n && memcmp(m->added[i].content, s, n) == 0)
            return i;
    return -1;
}

static pl_status load_added(pl_hf_model *m, const cJSON *list)
{
    pl_status st = PL_OK;
    if (!list || cJSON_IsNull(list))
        return PL_OK;
    if (!cJSON_IsArray(list))
        return pl_errorf(PL_ERR_FORMAT, "%s: added_tokens: expected a list", m->path);
    int n = cJSON_GetArraySize(list);
    m->added = pl_calloc((size_t)n + 1, sizeof *m->added);
    if (!m->added)
        return pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", m->path);
    int32_t next_id = m->vocab.n;
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, list) {
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%d]", k++);
        const char *content = NULL;
        hf_added x = {0};
        PL_TRY(get_str(m->path, where, it, "content", &content));
        PL_TRY(get_bool(m->path, where, it, "special", 0, &x.special));
        PL_TRY(get_bool(m->path, where, it, "normalized", !x.special, &x.normalized));
        PL_TRY(get_bool(m->path, where, it, "lstrip", 0, &x.lstrip));
        PL_TRY(get_bool(m->path, where, it, "rstrip", 0, &x.rstrip));
        PL_TRY(get_bool(m->path, where, it, "single_word", 0, &x.single_word));
        size_t len = strlen(content);
        if (len == 0)
            continue; /* tokenizers ignores empty contents */
        int32_t prev = added_find(m, content, len);
        if (prev >= 0) { /* the same content again: its id stays, the later flags win */
            x.content = m->added[prev].content;
            x.len = len;
            x.id = m->added[prev].id;
            m->added[prev] = x;
            continue;
        }
        int32_t id = vocab_find(m, content, len);
        if (id < 0)
            id = next_id++;
        const cJSON *fid = get(it, "id");
        if (cJSON_IsNumber(fid) && fid->valuedouble != (double)id)
            pl_log_warn("%s: %s: token '%.100s' was expected to have id %.0f but was given id %d "
                        "(as tokenizers does)", m->path, where, content, fid->valuedouble, (int)id);
        PL_TRY(dup_str(content, &x.content, &x.len));
        x.id = id;
        m->added[m->n_added++] = x;
    }
    /* The matchers: special tokens first, then the others (tokenizers' order). */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < m->n_added; i++) {
            const hf_added *a = &m->added[i];
            if (a->special == (pass == 0) && !a->normalized)
                PL_TRY(pl_trie_add(&m->raw_trie, a->content, a->len, i));
        }
fail:
    return st;
}

/* --- post-processor ------------------------------------------------------------------------- */

static pl_status load_template(pl_hf_model *m, const cJSON *o, pl_ids *pre, pl_ids *suf)
{
    pl_status st = PL_OK;
    const cJSON *single = get(o, "single"), *specials = get(o, "special_tokens"), *it;
    if (!cJSON_IsArray(single))
        return pl_errorf(PL_ERR_FORMAT, "%s: post_processor TemplateProcessing: expected a list "
                         "'single'", m->path);
    int seen_a = 0;
    cJSON_ArrayForEach(it, single) {
        const cJSON *sp = get(it, "SpecialToken"), *seq = get(it, "Sequence");
        if (seq) {
            const cJSON *id = get(seq, "id");
            if (seen_a || !cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0)
                return pl_errorf(PL_ERR_UNSUPPORTED, "%s: post_processor TemplateProcessing: the "
                                 "single template must hold $A exactly once", m->path);
            seen_a = 1;
            continue;
        }
        const cJSON *name = get(sp, "id");
        if (!cJSON_IsString(name))
            return pl_errorf(PL_ERR_FORMAT, "%s: post_processor TemplateProcessing: a piece that is "
                             "neither SpecialToken nor Sequence", m->path);
        const cJSON *ids = get(get(specials, name->valuestring), "ids"), *x;
        if (!cJSON_IsArray(ids))
            return pl_errorf(PL_ERR_FORMAT, "%s: post_processor TemplateProcessing: special token "
                             "'%.100s' is not in special_tokens", m->path, name->valuestring);
        cJSON_ArrayForEach(x, ids) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > INT32_MAX)
                return pl_errorf(PL_ERR_FORMAT, "%s: post_processor TemplateProcessing: bad id of "
                                 "'%.100s'", m->path, name->valuestring);
            PL_TRY(pl_ids_push(seen_a ? suf : pre, (int32_t)x->valuedouble));
        }
    }
    if (!seen_a)
        return pl_errorf(PL_ERR_UNSUPPORTED, "%s: post_processor TemplateProcessing: the single "
                         "template has no $A", m->path);
fail:
    return st;
}

static pl_status load_post(pl_hf_model *m, const cJSON *o, int depth)
{
    pl_status st = PL_OK;
    if (!o || cJSON_IsNull(o))
        return PL_OK;
    const char *type = type_of(o);
    if (type && strcmp(type, "Sequence") == 0 && depth < 8) {
        const cJSON *list = get(o, "processors"), *it;
        if (!cJSON_IsArray(list))
            return pl_errorf(PL_ERR_FORMAT, "%s: post_processor Sequence: expected a list "
                             "'processors'", m->path);
        cJSON_ArrayForEach(it, list) PL_TRY(load_post(m, it, depth + 1));
        return PL_OK;
    }
    if (type && strcmp(type, "ByteLevel") == 0)
        return PL_OK; /* it only trims offsets */
    if (type && strcmp(type, "TemplateProcessing") == 0) {
        /* A later processor wraps the earlier output: prefix2 prefix1 $A suffix1 suffix2. */
        pl_ids pre = {0}, suf = {0};
        st = load_template(m, o, &pre, &suf);
        if (!st)
            st = pl_ids_append(&pre, m->post_prefix.data, m->post_prefix.n);
        if (!st)
            st = pl_ids_append(&m->post_suffix, suf.data, suf.n);
        if (!st) {
            pl_ids_free(&m->post_prefix);
            m->post_prefix = pre;
            pre = (pl_ids){0};
        }
        pl_ids_free(&pre);
        pl_ids_free(&suf);
        return st;
    }
    return unsupported(m->path, "post_processor", type, "Sequence, ByteLevel, TemplateProcessing");
fail:
    return st;
}

/* --- tokenizer_config.json ------------------------------------------------------------------- */

/* A token given as "text" or {"content": "text", ...} (a serialized AddedToken). */
static const char *token_text(const cJSON *v)
{
    if (cJSON_IsString(v))
        return v->valuestring;
    const cJSON *c = get(v, "content");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int32_t token_to_id(const pl_hf_model *m, const char *s)
{
    size_t n = strlen(s);
    int32_t a = added_find(m, s, n);
    return a >= 0 ? m->added[a].id : vocab_find(m, s, n);
}

static pl_status read_json(const char *path, cJSON **out)
{
    pl_status st;
    char *buf = NULL;
    size_t size;
    *out = NULL;
    if ((st = pl_file_read_all(path, &buf, &size)) != PL_OK)
        return st;
    pl_json_init();
    pl_json_oom_take();
    const char *err = NULL;
    *out = cJSON_ParseWithLengthOpts(buf, size, &err, 0);
    if (!*out) {
        if (pl_json_oom_take())
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory parsing JSON", path);
        else
            st = pl_errorf(PL_ERR_FORMAT, "%s: malformed JSON at byte %lld", path,
                           (long long)(err ? err - buf : 0));
    }
    pl_free(buf);
    return st;
}

/* eos_token and the Llama post-processor rule from the tokenizer's directory. */
static pl_status load_config(pl_hf_model *m, const char *dir)
{
    pl_status st = PL_OK;
    char path[4200];
    cJSON *cfg = NULL, *map = NULL;
    const char *eos = NULL, *from = NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (pl_file_exists(path)) {
        PL_TRY(read_json(path, &cfg));
        eos = token_text(get(cfg, "eos_token"));
        from = "tokenizer_config.json";
        const cJSON *cls = get(cfg, "tokenizer_class");
        if (cJSON_IsString(cls) && (strcmp(cls->valuestring, "LlamaTokenizer") == 0 ||
                                    strcmp(cls->valuestring, "LlamaTokenizerFast") == 0)) {
            /* transformers' LlamaTokenizerFast.update_post_processor():
             * single = [bos if add_bos_token] $A [eos if add_eos_token]. */
            int add_bos, add_eos;
            PL_TRY(get_bool(path, "config", cfg, "add_bos_token", 1, &add_bos));
            PL_TRY(get_bool(path, "config", cfg, "add_eos_token", 0, &add_eos));
            const char *names[2] = {add_bos ? token_text(get(cfg, "bos_token")) : NULL,
                                    add_eos ? eos : NULL};
            pl_ids *dst[2] = {&m->post_prefix, &m->post_suffix};
            for (int k = 0; k < 2; k++) {
                dst[k]->n = 0;
                if (!(k == 0 ? add_bos : add_eos))
                    continue;
                int32_t id = names[k] ? token_to_id(m, names[k]) : -1;
                if (id < 0) {
                    st = pl_errorf(PL_ERR_FORMAT, "%s: %s is set but %s is %s", path,
                                   k == 0 ? "add_bos_token" : "add_eos_token",
                                   k == 0 ? "bos_token" : "eos_token",
                                   names[k] ? "not a token of tokenizer.json" : "missing");
                    goto fail;
                }
                PL_TRY(pl_ids_push(dst[k], id));
            }
        }
    }
    if (!eos) {
        snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
        if (pl_file_exists(path)) {
            PL_TRY(read_json(path, &map));
            eos = token_text(get(map, "eos_token"));
            from = "special_tokens_map.json";
        }
    }
    if (eos) {
        m->eod = token_to_id(m, eos);
        if (m->eod < 0) {
            st = pl_errorf(PL_ERR_FORMAT, "%s/%s: eos_token '%.100s' is not a token of %s", dir,
                           from, eos, m->path);
            goto fail;
        }
    } else {
        static const char *conventional[] = {"</s>", "<|end_of_text|>", "<|endoftext|>"};
        for (int k = 0; k < 3 && m->eod < 0; k++)
            if ((m->eod = token_to_id(m, conventional[k])) >= 0)
                eos = conventional[k];
        from = "the conventional names (no eos_token in tokenizer_config.json)";
        if (eos)
            pl_log_warn("%s: no tokenizer_config.json eos_token; eod is '%s' (%d). Megatron would "
                        "have no eod here", m->path, eos, (int)m->eod);
    }
    if (eos) {
        char *p = pl_malloc(strlen(eos) + strlen(from) + 8);
        if (!p) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", m->path);
            goto fail;
        }
        sprintf(p, "%s (%s)", eos, from);
        m->eos_name = p;
    }
fail:
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    return st;
}

/* --- the whole -------------------------------------------------------------------------------- */

static void model_free(pl_hf_model *m)
{
    if (!m)
        return;
    pl_free(m->path);
    pl_strtab_free(&m->vocab);
    pl_bpe_table_free(&m->merges);
    for (int i = 0; i < m->n_norm; i++) {
        pl_free(m->norm[i].a);
        pl_free(m->norm[i].b);
    }
    pl_free(m->norm);
    pl_free(m->pre);
    for (int i = 0; i < m->n_dec; i++) {
        pl_free(m->dec[i].a);
        pl_free(m->dec[i].b);
    }
    pl_free(m->dec);
    pl_ids_free(&m->post_prefix);
    pl_ids_free(&m->post_suffix);
    for (int32_t i = 0; i < m->n_added; i++)
        pl_free(m->added[i].content);
    pl_free(m->added);
    pl_trie_free(&m->raw_trie);
    pl_trie_free(&m->norm_trie);
    pl_free(m->added_of_id);
    pl_free(m->eos_name);
    pl_free(m);
}

/* Added tokens with normalized = true match the normalized text: their patterns are
 * their contents passed through the normalizer. */
static pl_status build_norm_trie(pl_hf_model *m)
{
    pl_status st = PL_OK;
    pl_bytes b = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < m->n_added; i++) {
            const hf_added *a = &m->added[i];
            if (a->special != (pass == 0) || !a->normalized)
                continue;
            b.n = 0;
            PL_TRY(pl_hf_normalize(m, a->content, a->len, &b));
            PL_TRY(pl_trie_add(&m->norm_trie, b.data ? b.data : "", b.n, i));
        }
fail:
    pl_bytes_free(&b);
    return st;
}

pl_status pl_hf_model_load(pl_hf_model **out, const char *path)
{
    pl_status st = PL_OK;
    cJSON *root = NULL;
    char file[4096], dir[4096];
    struct stat sb;
    *out = NULL;
    if (stat(path, &sb) != 0)
        return pl_errorf(PL_ERR_IO, "--tokenizer-model %s: no such file or directory", path);
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
        if (!pl_file_exists(file))
            return pl_errorf(PL_ERR_IO, "--tokenizer-model %s: the directory has no tokenizer.json",
                             path);
    } else {
        snprintf(file, sizeof file, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
    }
    pl_hf_model *m = pl_calloc(1, sizeof *m);
    if (!m)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening %s", file);
    atomic_init(&m->refs, 1);
    m->eod = -1;
    size_t nl;
    PL_TRY(dup_str(file, &m->path, &nl));
    PL_TRY(read_json(file, &root));
    if (!cJSON_IsObject(root)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected a JSON object", file);
        goto fail;
    }
    const cJSON *ver = get(root, "version");
    if (ver && !(cJSON_IsString(ver) && strcmp(ver->valuestring, "1.0") == 0)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: unknown tokenizer version (expected \"1.0\")", file);
        goto fail;
    }
    PL_TRY(load_model(m, get(root, "model")));
    PL_TRY(load_normalizer(m, get(root, "normalizer"), 0));
    PL_TRY(load_pre(m, get(root, "pre_tokenizer"), 0));
    PL_TRY(load_post(m, get(root, "post_processor"), 0));
    PL_TRY(load_decoder(m, get(root, "decoder"), 0));
    PL_TRY(load_added(m, get(root, "added_tokens")));
    PL_TRY(build_norm_trie(m));
    for (int32_t i = 0; i < m->post_prefix.n + m->post_suffix.n; i++) {
        int32_t id = i < m->post_prefix.n ? m->post_prefix.data[i]
                                          : m->post_suffix.data[i - m->post_prefix.n];
        if (id >= m->vocab.n + m->n_added) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: post_processor: id %d is not a token", file, (int)id);
            goto fail;
        }
    }
    /* len(tokenizer): the vocabulary plus the added contents it lacks. */
    m->vocab_size = m->vocab.n;
    m->id_limit = m->vocab.n;
    for (int32_t i = 0; i < m->n_added; i++) {
        if (vocab_find(m, m->added[i].content, m->added[i].len) < 0)
            m->vocab_size++;
        if (m->added[i].id + 1 > m->id_limit)
            m->id_limit = m->added[i].id + 1;
    }
    m->added_of_id = pl_malloc((size_t)m->id_limit * sizeof *m->added_of_id);
    if (!m->added_of_id) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", file);
        goto fail;
    }
    memset(m->added_of_id, 0xff, (size_t)m->id_limit * sizeof *m->added_of_id);
    for (int32_t i = 0; i < m->n_added; i++)
        m->added_of_id[m->added[i].id] = i;
    PL_TRY(load_config(m, dir));
    cJSON_Delete(root);
    *out = m;
    return PL_OK;
fail:
    cJSON_Delete(root);
    model_free(m);
    return st;
}

const char *pl_hf_id_token(const pl_hf_model *m, int32_t id, size_t *len)
{
    if (id < 0 || id >= m->id_limit)
        return NULL;
    int32_t a = m->added_of_id[id];
    if (a >= 0) {
        *len = m->added[a].len;
        return m->added[a].content;
    }
    if (id >= m->vocab.n)
        return NULL;
    *len = pl_strtab_len(&m->vocab, id);
    return pl_strtab_str(&m->vocab, id);
}

void pl_hf_model_retain(pl_hf_model *m) { atomic_fetch_add(&m->refs, 1); }

void pl_hf_model_release(pl_hf_model *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1)
        model_free(m);
}
