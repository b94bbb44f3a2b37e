/* Megatron core's GPTDataset: split, sample counts, indices, caches, windows.
 * Each rule names the Megatron-LM file it reproduces (see gpt_dataset.h). */
#include "data/gpt_dataset.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/md5.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pl_split_name(pl_split s)
{
    static const char *names[] = {"train", "valid", "test"};
    return names[s];
}

void pl_gpt_dataset_config_defaults(pl_gpt_dataset_config *c)
{
    memset(c, 0, sizeof *c);
    c->seed = 1234;
    c->split = PL_DEFAULT_SPLIT;
    c->add_extra_token = 1;
    c->drop_last_partial_validation_sequence = 1;
    pl_split_parse(PL_DEFAULT_SPLIT, &c->split_matrix);
}

/* ---- --split (blended_megatron_dataset_config.py) ------------------------- */

/* parse_and_normalize_split extracts numbers with the regex [.0-9]+, pads to
 * three with 0.0 and normalises; convert_split_vector_to_split_matrix makes
 * the cumulative book-ends [0, a, a+b, a+b+c] (Python float additions from
 * the int 0) and drops a split whose book-ends do not increase. Unlike the
 * regex, anything but numbers, ',', '/' and blanks is rejected here, so a
 * sign or a letter is an error instead of being skipped. */
pl_status pl_split_parse(const char *text, pl_split_matrix *m)
{
    memset(m, 0, sizeof *m);
    double v[PL_N_SPLITS] = {0.0, 0.0, 0.0};
    int n = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '/')
            p++;
        if (!*p)
            break;
        const char *q = p;
        while (isdigit((unsigned char)*q) || *q == '.')
            q++;
        if (q == p)
            return pl_errorf(PL_ERR_ARG,
                             "--split '%s': unexpected '%c'; expected up to three non-negative "
                             "weights such as 969,30,1 or 98/2/0",
                             text, *p);
        char num[64];
        char *end;
        size_t len = (size_t)(q - p);
        if (len >= sizeof num)
            return pl_errorf(PL_ERR_ARG, "--split '%s': number too long", text);
        memcpy(num, p, len);
        num[len] = '\0';
        double x = strtod(num, &end);
        if (*end || !isfinite(x))
            return pl_errorf(PL_ERR_ARG, "--split '%s': '%s' is not a number", text, num);
        if (n == PL_N_SPLITS)
            return pl_errorf(PL_ERR_ARG, "--split '%s': more than three weights (train, valid, test)",
                             text);
        v[n++] = x;
        p = q;
    }
    if (n == 0)
        return pl_errorf(PL_ERR_ARG, "--split '%s': no weights; expected e.g. 969,30,1", text);
    double sum = pl_np_sum_f64(v, PL_N_SPLITS);
    if (!(sum > 0.0))
        return pl_errorf(PL_ERR_ARG, "--split '%s': the weights sum to 0", text);
    double edge[PL_N_SPLITS + 1];
    edge[0] = 0.0;
    for (int i = 0; i < PL_N_SPLITS; i++)
        edge[i + 1] = edge[i] + v[i] / sum;
    for (int i = 0; i < PL_N_SPLITS; i++) {
        m->present[i] = edge[i + 1] > edge[i];
        m->lo[i] = edge[i];
        m->hi[i] = edge[i + 1];
    }
    return PL_OK;
}

/* _build_megatron_dataset_splits: int(round(bookend * float(num_elements))). */
void pl_split_range(const pl_split_matrix *m, pl_split s, int64_t n, int64_t *beg, int64_t *end)
{
    *beg = (int64_t)pl_py_round(m->lo[s] * (double)n);
    *end = (int64_t)pl_py_round(m->hi[s] * (double)n);
}

/* ---- samples per split (megatron/training/training.py) -------------------- */

static int mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

pl_status pl_gpt_num_samples(const pl_sample_request *r, int64_t out[PL_N_SPLITS])
{
    if (r->global_batch_size <= 0)
        return pl_errorf(PL_ERR_ARG, "--global-batch-size must be positive, got %lld",
                         (long long)r->global_batch_size);
    if (r->train_iters < 0 || r->train_samples < 0)
        return pl_errorf(PL_ERR_ARG, "--train-iters %lld / --train-samples %lld must not be negative",
                         (long long)r->train_iters, (long long)r->train_samples);
    if (r->train_iters > 0 && r->train_samples > 0)
        return pl_errorf(PL_ERR_ARG,
                         "--train-iters and --train-samples are exclusive (got %lld and %lld)",
                         (long long)r->train_iters, (long long)r->train_samples);
    if (r->eval_interval <= 0)
        return pl_errorf(PL_ERR_ARG, "--eval-interval must be positive, got %lld",
                         (long long)r->eval_interval);
    if (r->eval_iters < 0)
        return pl_errorf(PL_ERR_ARG, "--eval-iters must not be negative, got %lld",
                         (long long)r->eval_iters);
    int64_t train, iters;
    if (r->train_samples > 0) {
        train = r->train_samples;
        iters = r->train_samples / r->global_batch_size; /* update_train_iters, no ramp-up */
    } else {
        iters = r->train_iters;
        if (!mul_ok(iters, r->global_batch_size, &train))
            return pl_errorf(PL_ERR_ARG, "--train-iters %lld x --global-batch-size %lld overflows",
                             (long long)iters, (long long)r->global_batch_size);
    }
    if (train <= 0)
        return pl_errorf(PL_ERR_ARG,
                         "--train-iters %lld / --train-samples %lld request no training samples",
                         (long long)r->train_iters, (long long)r->train_samples);
    int64_t evals = iters / r->eval_interval + 1, valid, test;
    if (!mul_ok(evals, r->eval_iters, &valid) || !mul_ok(valid, r->global_batch_size, &valid) ||
        !mul_ok(r->eval_iters, r->global_batch_size, &test))
        return pl_errorf(PL_ERR_ARG, "--eval-iters %lld x --global-batch-size %lld overflows",
                         (long long)r->eval_iters, (long long)r->global_batch_size);
    out[PL_SPLIT_TRAIN] = train;
    out[PL_SPLIT_VALID] = valid;
    out[PL_SPLIT_TEST] = test;
    return PL_OK;
}

/* ---- Python formatting ----------------------------------------------------- */

void pl_py_float_repr(double x, char *buf)
{
    if (isnan(x)) {
        strcpy(buf, "NaN"); /* json.dumps spelling */
        return;
    }
    if (isinf(x)) {
        strcpy(buf, x > 0 ? "Infinity" : "-Infinity");
        return;
    }
    if (x == 0.0) {
        strcpy(buf, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digit string that reads back as x (Python's repr, mode 'r'). */
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    char digits[24];
    int nd = 0, neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p))
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int exp10 = atoi(p + 1), decpt = exp10 + 1;
    char *o = buf;
    if (neg)
        *o++ = '-';
    if (decpt <= -4 || decpt > 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++)
            *o++ = '0';
        strcpy(o, digits);
    } else if (decpt >= nd) {
        memcpy(o, digits, (size_t)nd);
        o += nd;
        for (int i = nd; i < decpt; i++)
            *o++ = '0';
        strcpy(o, ".0");
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        strcpy(o, digits + decpt);
    }
}

/* Decodes one UTF-8 code point at s (strict: no overlongs, no surrogates);
 * returns its length, or 0 if the bytes there are not valid UTF-8. */
static int utf8_decode(const unsigned char *s, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    int n;
    uint32_t c, min;
    if ((s[0] & 0xe0) == 0xc0) {
        n = 2, c = s[0] & 0x1f, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3, c = s[0] & 0x0f, min = 0x800;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4, c = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

pl_status pl_py_json_string(pl_bytes *b, const char *s)
{
    pl_status st = pl_bytes_append(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (st == PL_OK && *p) {
        uint32_t cp;
        int n = utf8_decode(p, &cp);
        if (n == 0) {
            cp = 0xdc00 + *p; /* surrogateescape */
            n = 1;
        }
        p += n;
        switch (cp) {
        case '"': st = pl_bytes_append(b, "\\\"", 2); break;
        case '\\': st = pl_bytes_append(b, "\\\\", 2); break;
        case '\n': st = pl_bytes_append(b, "\\n", 2); break;
        case '\r': st = pl_bytes_append(b, "\\r", 2); break;
        case '\t': st = pl_bytes_append(b, "\\t", 2); break;
        case '\b': st = pl_bytes_append(b, "\\b", 2); break;
        case '\f': st = pl_bytes_append(b, "\\f", 2); break;
        default:
            if (cp >= 0x20 && cp < 0x7f) {
                char c = (char)cp;
                st = pl_bytes_append(b, &c, 1);
            } else if (cp < 0x10000) {
                st = pl_bytes_printf(b, "\\u%04x", (unsigned)cp);
            } else {
                uint32_t v = cp - 0x10000;
                st = pl_bytes_printf(b, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)),
                                     (unsigned)(0xdc00 + (v & 0x3ff)));
            }
        }
    }
    if (st == PL_OK)
        st = pl_bytes_append(b, "\"", 1);
    return st;
}

/* ---- the index arithmetic (gpt_dataset.py, helpers.cpp) ------------------ */

/* _get_num_epochs: the smallest e >= 1 with e * T >= n * S + x. */
int64_t pl_gpt_num_epochs(int64_t tokens_per_epoch, int64_t num_samples, int64_t seq_length,
                          int x)
{
    if (num_samples < 0)
        return 1;
    if (tokens_per_epoch <= 0)
        return -1;
    int64_t need = num_samples * seq_length + x;
    int64_t e = (need + tokens_per_epoch - 1) / tokens_per_epoch;
    return e < 1 ? 1 : e;
}

/* _build_document_sample_shuffle_indices, the "threshold = 0.80" block. */
int pl_gpt_separate_final_epoch(int64_t tokens_per_epoch, int64_t num_epochs, int64_t num_samples,
                                int64_t seq_length, int x, int64_t *n_sans)
{
    *n_sans = 0;
    if (num_epochs <= 1)
        return 0;
    int64_t sans = ((num_epochs - 1) * tokens_per_epoch - x) / seq_length;
    int64_t from_final = num_samples - sans;
    int64_t per_epoch = (tokens_per_epoch - x) / seq_length;
    *n_sans = sans;
    /* int(threshold * num_samples_per_epoch): a float product, truncated. */
    return from_final < (int64_t)(0.80 * (double)per_epoch);
}

/* _build_document_index: numpy.mgrid tiling cast to int32, one shuffle, or
 * the first e-1 epochs and the last epoch shuffled separately. */
pl_status pl_gpt_build_document_index(int64_t beg, int64_t end, int64_t num_epochs, int separate,
                                      pl_np_rng *rng, pl_npy *out)
{
    int64_t n_docs = end - beg, total;
    if (n_docs < 0 || num_epochs < 1 || !mul_ok(n_docs, num_epochs, &total))
        return pl_errorf(PL_ERR_ARG, "document index of %lld epochs x %lld documents is too large",
                         (long long)num_epochs, (long long)n_docs);
    if (end > INT32_MAX)
        return pl_errorf(PL_ERR_UNSUPPORTED,
                         "document ids up to %lld do not fit the int32 document index",
                         (long long)end);
    pl_status st = pl_npy_alloc(out, PL_NPY_I32, 1, total, 1);
    if (st != PL_OK)
        return st;
    int32_t *d = out->owned;
    for (int64_t e = 0; e < num_epochs; e++)
        for (int64_t i = 0; i < n_docs; i++)
            d[e * n_docs + i] = (int32_t)(beg + i);
    if (!separate || num_epochs == 1) {
        pl_np_rng_shuffle_i32(rng, d, total);
    } else {
        int64_t first = (num_epochs - 1) * n_docs;
        pl_np_rng_shuffle_i32(rng, d, first);
        pl_np_rng_shuffle_i32(rng, d + first, n_docs);
    }
    return PL_OK;
}

static int32_t length_at(const uint8_t *lengths, int64_t id)
{
    int32_t v;
    memcpy(&v, lengths + 4 * id, 4);
    return v;
}

static void put_pair(pl_npy *a, int64_t row, int64_t doc, int64_t off)
{
    if (a->dtype == PL_NPY_I32) {
        int32_t *p = (int32_t *)a->owned + 2 * row;
        p[0] = (int32_t)doc;
        p[1] = (int32_t)off;
    } else {
        int64_t *p = (int64_t *)a->owned + 2 * row;
        p[0] = doc;
        p[1] = off;
    }
}

/* helpers.cpp build_sample_idx<T>, with helpers.py choosing T. */
pl_status pl_gpt_build_sample_index(const uint8_t *lengths, const pl_npy *document_index,
                                    int64_t seq_length, int64_t num_epochs,
                                    int64_t tokens_per_epoch, int drop_last, int x, pl_npy *out)
{
    int64_t n_doc = pl_npy_numel(document_index), total;
    if (seq_length < 2 || num_epochs < 1 || tokens_per_epoch < 2 ||
        !mul_ok(num_epochs, tokens_per_epoch, &total))
        return pl_errorf(PL_ERR_ARG,
                         "sample index: seq_length %lld, %lld epochs of %lld tokens (need S >= 2, "
                         "at least 2 tokens)",
                         (long long)seq_length, (long long)num_epochs, (long long)tokens_per_epoch);
    int64_t num_samples;
    if (drop_last)
        num_samples = (total - x) / seq_length;
    else /* C++: ceil(float(num_epochs * tokens_per_epoch - x) / seq_length), in float */
        num_samples = (int64_t)ceilf((float)(total - x) / (float)seq_length);
    pl_npy_dtype dt = n_doc <= INT32_MAX ? PL_NPY_I32 : PL_NPY_I64;
    pl_status st = pl_npy_alloc(out, dt, 2, num_samples + 1, 2);
    if (st != PL_OK)
        return st;
    const int32_t *doc = (const int32_t *)document_index->data;
    int64_t di = 0, off = 0;
    put_pair(out, 0, di, off);
    for (int64_t k = 1; k <= num_samples; k++) {
        int64_t remaining = seq_length + x;
        while (remaining != 0) {
            int64_t dlen = length_at(lengths, doc[di]) - off;
            remaining -= dlen;
            if (remaining <= 0) {
                off += remaining + dlen - x;
                remaining = 0;
            } else {
                if (di == n_doc - 1) { /* out of documents: the kept partial sample */
                    off = length_at(lengths, doc[di]) - x;
                    break;
                }
                di++;
                off = 0;
            }
        }
        put_pair(out, k, di, off);
    }
    return PL_OK;
}

/* _build_shuffle_index. */
pl_status pl_gpt_build_shuffle_index(int64_t n_first, int64_t total, pl_np_rng *rng, pl_npy *out)
{
    if (n_first < 0 || total < n_first)
        return pl_errorf(PL_ERR_INTERNAL, "shuffle index: first range %lld of %lld",
                         (long long)n_first, (long long)total);
    pl_npy_dtype dt = total >= (int64_t)UINT32_MAX - 1 ? PL_NPY_I64 : PL_NPY_U32;
    pl_status st = pl_npy_alloc(out, dt, 1, total, 1);
    if (st != PL_OK)
        return st;
    if (dt == PL_NPY_U32) {
        uint32_t *a = out->owned;
        for (int64_t i = 0; i < total; i++)
            a[i] = (uint32_t)i;
        pl_np_rng_shuffle_u32(rng, a, n_first);
        if (total > n_first)
            pl_np_rng_shuffle_u32(rng, a + n_first, total - n_first);
    } else {
        int64_t *a = out->owned;
        for (int64_t i = 0; i < total; i++)
            a[i] = i;
        pl_np_rng_shuffle_i64(rng, a, n_first);
        if (total > n_first)
            pl_np_rng_shuffle_i64(rng, a + n_first, total - n_first);
    }
    return PL_OK;
}

/* ---- description (megatron_dataset.py unique_identifiers) ----------------- */

static pl_status indent(pl_bytes *b, int level)
{
    static const char spaces[] = "                                ";
    pl_status st = pl_bytes_append(b, "\n", 1);
    for (int i = 0; i < level && st == PL_OK; i++)
        st = pl_bytes_append(b, spaces, 4);
    return st;
}

/* The split matrix as json.dumps prints a list of tuples (or None) at level 1. */
static pl_status describe_split_matrix(pl_bytes *b, const pl_split_matrix *m)
{
    pl_status st = pl_bytes_append(b, "[", 1);
    for (int i = 0; i < PL_N_SPLITS && st == PL_OK; i++) {
        st = indent(b, 2);
        if (st == PL_OK && !m->present[i]) {
            st = pl_bytes_append(b, "null", 4);
        } else if (st == PL_OK) {
            char lo[32], hi[32];
            if (i == 0)
                strcpy(lo, "0"); /* the Python int the expansion starts from */
            else
                pl_py_float_repr(m->lo[i], lo);
            pl_py_float_repr(m->hi[i], hi);
            st = pl_bytes_append(b, "[", 1);
            if (st == PL_OK && (st = indent(b, 3)) == PL_OK)
                st = pl_bytes_printf(b, "%s,", lo);
            if (st == PL_OK && (st = indent(b, 3)) == PL_OK)
                st = pl_bytes_printf(b, "%s", hi);
            if (st == PL_OK && (st = indent(b, 2)) == PL_OK)
                st = pl_bytes_append(b, "]", 1);
        }
        if (st == PL_OK && i + 1 < PL_N_SPLITS)
            st = pl_bytes_append(b, ",", 1);
    }
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "]", 1);
    return st;
}

static pl_status describe_tokenizer(pl_bytes *b, const pl_tokenizer_id *t)
{
    if (!t->class_name)
        return pl_bytes_append(b, "null", 4);
    pl_status st = pl_bytes_append(b, "{", 1);
    if (st == PL_OK && (st = indent(b, 2)) == PL_OK &&
        (st = pl_bytes_append(b, "\"class\": ", 9)) == PL_OK &&
        (st = pl_py_json_string(b, t->class_name)) == PL_OK &&
        (st = pl_bytes_append(b, ",", 1)) == PL_OK && (st = indent(b, 2)) == PL_OK)
        st = pl_bytes_append(b, "\"tokenizer_path\": [", 19);
    for (int i = 0; i < t->n_paths && st == PL_OK; i++) {
        if ((st = indent(b, 3)) == PL_OK)
            st = pl_py_json_string(b, t->paths[i]);
        if (st == PL_OK && i + 1 < t->n_paths)
            st = pl_bytes_append(b, ",", 1);
    }
    if (st == PL_OK && t->n_paths > 0)
        st = indent(b, 2);
    if (st == PL_OK)
        st = pl_bytes_append(b, "]", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "}", 1);
    return st;
}

/* The OrderedDict of MegatronDataset.__init__ (class, dataset_path,
 * num_samples, index_split, then _key_config_attributes: random_seed,
 * sequence_length, split, split_matrix, tokenizer), as
 * json.dumps(indent=4) writes it, without the closing brace. */
pl_status pl_dataset_describe_head(pl_bytes *b, const pl_dataset_identity *id)
{
    pl_status st = pl_bytes_append(b, "{", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK &&
        (st = pl_bytes_append(b, "\"class\": ", 9)) == PL_OK &&
        (st = pl_py_json_string(b, id->class_name)) == PL_OK)
        st = pl_bytes_append(b, ",", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK &&
        (st = pl_bytes_append(b, "\"dataset_path\": ", 16)) == PL_OK &&
        (st = pl_py_json_string(b, id->path)) == PL_OK)
        st = pl_bytes_append(b, ",", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK) {
        if (id->num_samples < 0)
            st = pl_bytes_append(b, "\"num_samples\": null,", 20);
        else
            st = pl_bytes_printf(b, "\"num_samples\": %lld,", (long long)id->num_samples);
    }
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_printf(b, "\"index_split\": \"%s\",", pl_split_name(id->split));
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_printf(b, "\"random_seed\": %lu,", (unsigned long)id->seed);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_printf(b, "\"sequence_length\": %lld,", (long long)id->seq_length);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK &&
        (st = pl_bytes_append(b, "\"split\": ", 9)) == PL_OK &&
        (st = pl_py_json_string(b, id->split_text)) == PL_OK)
        st = pl_bytes_append(b, ",", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK &&
        (st = pl_bytes_append(b, "\"split_matrix\": ", 16)) == PL_OK &&
        (st = describe_split_matrix(b, id->split_matrix)) == PL_OK)
        st = pl_bytes_append(b, ",", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK &&
        (st = pl_bytes_append(b, "\"tokenizer\": ", 13)) == PL_OK)
        st = describe_tokenizer(b, id->tokenizer);
    return st;
}

pl_status pl_dataset_describe_indent(pl_bytes *b, int level) { return indent(b, level); }

static pl_status describe(pl_bytes *b, const pl_gpt_dataset *g, const pl_gpt_dataset_config *cfg)
{
    pl_dataset_identity id = {"GPTDataset", g->path, g->num_samples, g->split, cfg->seed,
                              cfg->seq_length, cfg->split, &cfg->split_matrix, &cfg->tokenizer};
    pl_status st = pl_dataset_describe_head(b, &id);
    if (st == PL_OK && (st = indent(b, 0)) == PL_OK)
        st = pl_bytes_append(b, "}", 1);
    return st;
}

pl_status pl_gpt_dataset_identifiers(pl_bytes *b, const pl_gpt_dataset *g, int level)
{
    pl_status st = PL_OK;
    for (const char *p = g->description; *p && st == PL_OK; p++) {
        if (*p == '\n')
            st = indent(b, level);
        else
            st = pl_bytes_append(b, p, 1);
    }
    return st;
}

/* ---- the dataset ----------------------------------------------------------- */

static char *join3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = pl_malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* Expected shapes and dtypes of the three arrays, from the arithmetic alone. */
typedef struct gpt_shapes {
    int64_t n_doc, n_samples;
    pl_npy_dtype sample_dt, shuffle_dt;
} gpt_shapes;

static void expected_shapes(const pl_gpt_dataset *g, int drop_last, gpt_shapes *s)
{
    s->n_doc = g->num_epochs * (g->end - g->beg);
    int64_t total = g->num_epochs * g->tokens_per_epoch - g->x;
    s->n_samples = drop_last ? total / g->seq_length
                             : (int64_t)ceilf((float)total / (float)g->seq_length);
    s->sample_dt = s->n_doc <= INT32_MAX ? PL_NPY_I32 : PL_NPY_I64;
    s->shuffle_dt = s->n_samples >= (int64_t)UINT32_MAX - 1 ? PL_NPY_I64 : PL_NPY_U32;
}

pl_status pl_gpt_cache_error(pl_status st)
{
    char msg[900];
    snprintf(msg, sizeof msg, "%s", pl_error_msg());
    return pl_errorf(st, "%s (a cached index file: delete it to rebuild)", msg);
}

pl_status pl_gpt_cache_check_description(const char *path, const char *description,
                                         const char *what)
{
    char *text = NULL;
    size_t n = 0;
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st != PL_OK)
        return st;
    int same = n == strlen(description) && memcmp(text, description, n) == 0;
    pl_free(text);
    if (!same)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: cached description differs from this %s's (delete the cached "
                         "files to rebuild)", path, what);
    return PL_OK;
}

static pl_status load_cached(pl_gpt_dataset *g, const gpt_shapes *sh)
{
    pl_status st = pl_gpt_cache_check_description(g->files[PL_GPT_DESC], g->description, "dataset");
    if (st != PL_OK)
        return st;
    struct {
        pl_npy *a;
        int file;
        pl_npy_dtype dt;
        int ndim;
        int64_t rows;
    } want[] = {
        {&g->document_index, PL_GPT_DOC, PL_NPY_I32, 1, sh->n_doc},
        {&g->sample_index, PL_GPT_SAMPLE, sh->sample_dt, 2, sh->n_samples + 1},
        {&g->shuffle_index, PL_GPT_SHUFFLE, sh->shuffle_dt, 1, sh->n_samples},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *path = g->files[want[i].file];
        st = pl_npy_load(want[i].a, path, want[i].dt, want[i].ndim, 2);
        if (st != PL_OK)
            return pl_gpt_cache_error(st);
        if (want[i].a->shape[0] != want[i].rows)
            return pl_errorf(PL_ERR_FORMAT,
                             "%s: %lld rows, expected %lld for this dataset (delete it to rebuild)",
                             path, (long long)want[i].a->shape[0], (long long)want[i].rows);
    }
    return PL_OK;
}

static pl_status build(pl_gpt_dataset *g, const pl_gpt_dataset_config *cfg, int drop_last,
                       const char *cache_dir)
{
    pl_np_rng rng;
    pl_np_rng_seed(&rng, cfg->seed);
    pl_status st = pl_gpt_build_document_index(g->beg, g->end, g->num_epochs,
                                               g->separate_final_epoch, &rng, &g->document_index);
    if (st != PL_OK)
        return st;
    st = pl_gpt_build_sample_index(g->low->h.lengths, &g->document_index, g->seq_length,
                                   g->num_epochs, g->tokens_per_epoch, drop_last, g->x,
                                   &g->sample_index);
    if (st != PL_OK)
        return st;
    int64_t total = g->sample_index.shape[0] - 1;
    st = pl_gpt_build_shuffle_index(g->separate_final_epoch ? g->num_samples_sans_final_epoch
                                                            : total,
                                    total, &rng, &g->shuffle_index);
    if (st != PL_OK)
        return st;
    /* Arrays first, the description last: a reader needs all four files. */
    if ((st = pl_mkdirs(cache_dir)) != PL_OK ||
        (st = pl_npy_save(g->files[PL_GPT_DOC], &g->document_index)) != PL_OK ||
        (st = pl_npy_save(g->files[PL_GPT_SAMPLE], &g->sample_index)) != PL_OK ||
        (st = pl_npy_save(g->files[PL_GPT_SHUFFLE], &g->shuffle_index)) != PL_OK ||
        (st = pl_file_write_atomic(g->files[PL_GPT_DESC], g->description, strlen(g->description))) != PL_OK) {
        if (st == PL_ERR_IO)
            pl_error_wrap(st, "cannot write the index cache (set --data-cache-path to a "
                              "writable directory)");
        return st;
    }
    return PL_OK;
}

pl_status pl_gpt_dataset_init(pl_gpt_dataset *g, const pl_indexed *low, const char *path,
                              const pl_gpt_dataset_config *cfg, pl_split s, int64_t num_samples)
{
    static const char *suffix[PL_GPT_N_FILES] = {"description.txt", "document_index.npy",
                                                 "sample_index.npy", "shuffle_index.npy"};
    pl_status st = PL_OK;
    char *dir = NULL, *base = NULL;
    pl_bytes desc = {0};
    double t0 = pl_time_now();
    memset(g, 0, sizeof *g);
    g->low = low;
    g->split = s;
    g->num_samples = num_samples;
    g->seq_length = cfg->seq_length;
    g->x = cfg->add_extra_token ? 1 : 0;
    if (!cfg->split_matrix.present[s]) {
        st = pl_errorf(PL_ERR_INTERNAL, "%s: split %s is absent from --split '%s'", path,
                       pl_split_name(s), cfg->split);
        goto fail;
    }
    if (cfg->seq_length < 2 || cfg->seq_length > INT32_MAX - 1) {
        st = pl_errorf(PL_ERR_ARG, "--seq-length %lld: expected at least 2 (and below 2^31 - 1)",
                       (long long)cfg->seq_length);
        goto fail;
    }
    g->path = pl_strdup(path);
    if (!g->path) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    pl_split_range(&cfg->split_matrix, s, low->h.n_sequences, &g->beg, &g->end);
    for (int64_t i = g->beg; i < g->end; i++)
        g->tokens_per_epoch += pl_indexed_length(&low->h, i);
    if (g->tokens_per_epoch < 2) {
        st = pl_errorf(PL_ERR_ARG,
                       "%s: --split '%s' gives the %s split sequences [%lld, %lld) of %lld, "
                       "holding %lld tokens; at least 2 are needed (use a larger dataset or "
                       "another --split)",
                       path, cfg->split, pl_split_name(s), (long long)g->beg, (long long)g->end,
                       (long long)low->h.n_sequences, (long long)g->tokens_per_epoch);
        goto fail;
    }
    if (num_samples > (INT64_MAX - 1) / cfg->seq_length) {
        st = pl_errorf(PL_ERR_ARG, "%s: %lld samples of %lld tokens overflow", path,
                       (long long)num_samples, (long long)cfg->seq_length);
        goto fail;
    }
    g->num_epochs = pl_gpt_num_epochs(g->tokens_per_epoch, num_samples, cfg->seq_length, g->x);
    g->separate_final_epoch =
        pl_gpt_separate_final_epoch(g->tokens_per_epoch, g->num_epochs, num_samples,
                                    cfg->seq_length, g->x, &g->num_samples_sans_final_epoch);
    int drop_last = s == PL_SPLIT_VALID ? cfg->drop_last_partial_validation_sequence : 1;
    gpt_shapes sh;
    expected_shapes(g, drop_last, &sh);

    PL_TRY(describe(&desc, g, cfg));
    g->description = desc.data;
    desc.data = NULL;
    pl_md5_hex(g->description, strlen(g->description), g->hash);

    /* Cache location and names: gpt_dataset.py (path_to_cache default). */
    dir = cfg->cache_dir ? pl_strdup(cfg->cache_dir) : join3(path, "/cache/", "GPTDataset_indices");
    base = dir ? join3(g->hash, "-GPTDataset-", pl_split_name(s)) : NULL;
    if (!dir || !base) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    int hit = 1;
    for (int f = 0; f < PL_GPT_N_FILES; f++) {
        size_t n = strlen(dir) + strlen(base) + strlen(suffix[f]) + 3;
        g->files[f] = pl_malloc(n);
        if (!g->files[f]) {
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        snprintf(g->files[f], n, "%s/%s-%s", dir, base, suffix[f]);
        hit = hit && pl_file_exists(g->files[f]);
    }
    if (hit) {
        PL_TRY(load_cached(g, &sh));
    } else {
        pl_log_debug("building the GPTDataset %s indices of %s", pl_split_name(s), path);
        PL_TRY(build(g, cfg, drop_last, dir));
        g->built = 1;
        if (g->sample_index.shape[0] - 1 != sh.n_samples ||
            g->sample_index.dtype != sh.sample_dt || g->shuffle_index.dtype != sh.shuffle_dt) {
            st = pl_errorf(PL_ERR_INTERNAL, "%s: built indices disagree with their expected shape",
                           path);
            goto fail;
        }
    }
    g->seconds = pl_time_now() - t0;
    pl_free(dir);
    pl_free(base);
    return PL_OK;
fail:
    pl_bytes_free(&desc);
    pl_free(dir);
    pl_free(base);
    pl_gpt_dataset_free(g);
    return st;
}

void pl_gpt_dataset_free(pl_gpt_dataset *g)
{
    pl_npy_free(&g->document_index);
    pl_npy_free(&g->sample_index);
    pl_npy_free(&g->shuffle_index);
    pl_free(g->path);
    pl_free(g->description);
    for (int f = 0; f < PL_GPT_N_FILES; f++)
        pl_free(g->files[f]);
    memset(g, 0, sizeof *g);
}

int64_t pl_gpt_dataset_len(const pl_gpt_dataset *g) { return g->sample_index.shape[0] - 1; }

/* The file an index came from, for messages (the path when it was not cached). */
static const char *origin(const pl_gpt_dataset *g, int f)
{
    return g->files[f] ? g->files[f] : g->path;
}

/* One document's part of a sample: sequence id's tokens [off, stop). visit
 * returns PL_OK to go on; *done = 1 stops the walk early. */
typedef pl_status (*piece_fn)(void *ctx, int64_t id, int64_t off, int64_t stop, int *done);

/* _query_document_sample_shuffle_indices's walk over sample idx's documents, with
 * every index read from the caches bounds-checked, each piece handed to visit. */
static pl_status sample_pieces(const pl_gpt_dataset *g, int64_t idx, piece_fn visit, void *ctx)
{
    int64_t n = pl_gpt_dataset_len(g);
    if (idx < 0 || idx >= n)
        return pl_errorf(PL_ERR_ARG, "%s: sample %lld out of range [0, %lld)", g->path,
                         (long long)idx, (long long)n);
    int64_t j = pl_npy_get(&g->shuffle_index, idx);
    if (j < 0 || j >= n)
        return pl_errorf(PL_ERR_FORMAT, "%s: shuffle_index[%lld] = %lld out of range",
                         origin(g, PL_GPT_SHUFFLE), (long long)idx, (long long)j);
    const pl_npy *si = &g->sample_index;
    int64_t db = pl_npy_get(si, 2 * j), ob = pl_npy_get(si, 2 * j + 1);
    int64_t de = pl_npy_get(si, 2 * j + 2), oe = pl_npy_get(si, 2 * j + 3);
    if (db < 0 || de < db || de >= pl_npy_numel(&g->document_index))
        return pl_errorf(PL_ERR_FORMAT, "%s: rows %lld, %lld point outside the document index",
                         origin(g, PL_GPT_SAMPLE), (long long)j, (long long)j + 1);
    int done = 0;
    for (int64_t i = db; i <= de && !done; i++) {
        int64_t id = pl_npy_get(&g->document_index, i);
        if (id < 0 || id >= g->low->h.n_sequences)
            return pl_errorf(PL_ERR_FORMAT, "%s: document_index[%lld] = %lld out of range",
                             origin(g, PL_GPT_DOC), (long long)i, (long long)id);
        int64_t len = pl_indexed_length(&g->low->h, id);
        int64_t off = i == db ? ob : 0;
        int64_t stop = i == de ? oe + g->x : len;
        if (off < 0 || stop > len || stop < off)
            return pl_errorf(PL_ERR_FORMAT,
                             "%s: sample %lld reads tokens [%lld, %lld) of sequence %lld "
                             "(length %lld)",
                             origin(g, PL_GPT_SAMPLE), (long long)idx, (long long)off,
                             (long long)stop, (long long)id, (long long)len);
        pl_status st = visit(ctx, id, off, stop, &done);
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}

typedef struct read_ctx {
    const pl_gpt_dataset *g;
    int64_t idx, got, want;
    int32_t *out;
} read_ctx;

static pl_status read_piece(void *ctx, int64_t id, int64_t off, int64_t stop, int *done)
{
    read_ctx *r = ctx;
    (void)done;
    if (r->got + (stop - off) > r->want)
        return pl_errorf(PL_ERR_FORMAT, "%s: sample %lld holds more than %lld tokens",
                         origin(r->g, PL_GPT_SAMPLE), (long long)r->idx, (long long)r->want);
    pl_status st = pl_indexed_read(r->g->low, id, off, stop - off, r->out + r->got);
    r->got += stop - off;
    return st;
}

pl_status pl_gpt_dataset_get(const pl_gpt_dataset *g, int64_t idx, int32_t *out, int64_t *n_real)
{
    read_ctx r = {g, idx, 0, g->seq_length + g->x, out};
    pl_status st = sample_pieces(g, idx, read_piece, &r);
    if (st != PL_OK)
        return st;
    for (int64_t k = r.got; k < r.want; k++)
        out[k] = -1;
    if (n_real)
        *n_real = r.got;
    return PL_OK;
}

typedef struct locate_ctx {
    int64_t pos, got, *sequence, *offset;
} locate_ctx;

static pl_status locate_piece(void *ctx, int64_t id, int64_t off, int64_t stop, int *done)
{
    locate_ctx *l = ctx;
    if (l->pos < l->got + (stop - off)) {
        *l->sequence = id;
        *l->offset = off + (l->pos - l->got);
        *done = 1;
    }
    l->got += stop - off;
    return PL_OK;
}

pl_status pl_gpt_dataset_locate(const pl_gpt_dataset *g, int64_t idx, int64_t pos,
                                int64_t *sequence, int64_t *offset)
{
    *sequence = *offset = -1;
    locate_ctx l = {pos, 0, sequence, offset};
    return sample_pieces(g, idx, locate_piece, &l);
}
