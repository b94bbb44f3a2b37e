/* Blending GPT datasets and the split builder (see blended.h for sources). */
#include "data/blended.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/md5.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- --data-path (utils.py get_blend_from_list) ---------------------------- */

static int parse_weight(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static char *strip_copy(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *c = pl_malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

pl_status pl_blend_spec_parse(pl_blend_spec *b, const char *const *items, int n)
{
    pl_status st = PL_OK;
    memset(b, 0, sizeof *b);
    if (n <= 0)
        return pl_errorf(PL_ERR_ARG, "--data-path: no dataset prefix given");
    double w;
    /* Weighted iff the list pairs up and every even entry is a number. Megatron
     * silently treats a malformed list as prefixes; here it is an error. */
    int n_numeric = 0, weighted = 0;
    for (int i = 0; i < n; i += 2)
        n_numeric += parse_weight(items[i], &w);
    if (n % 2 == 0 && n_numeric == n / 2) {
        weighted = 1;
    } else if (n_numeric > 0) {
        for (int i = 0; i < n; i += 2)
            if (n % 2 == 0 && !parse_weight(items[i], &w))
                return pl_errorf(PL_ERR_ARG,
                                 "--data-path: '%s' is not a weight; give weight-prefix pairs "
                                 "(0.3 A 0.7 B) or prefixes only",
                                 items[i]);
        return pl_errorf(PL_ERR_ARG,
                         "--data-path: %d values with weights among them; weights and prefixes "
                         "must pair up (0.3 A 0.7 B)",
                         n);
    }
    b->n = weighted ? n / 2 : n;
    b->prefixes = pl_calloc((size_t)b->n, sizeof *b->prefixes);
    if (weighted)
        b->weights = pl_malloc((size_t)b->n * sizeof *b->weights);
    if (!b->prefixes || (weighted && !b->weights)) {
        st = pl_errorf(PL_ERR_NOMEM, "--data-path: out of memory");
        goto fail;
    }
    for (int i = 0; i < b->n; i++) {
        const char *prefix = weighted ? items[2 * i + 1] : items[i];
        if (weighted) {
            parse_weight(items[2 * i], &b->weights[i]);
            if (!(b->weights[i] > 0.0)) {
                st = pl_errorf(PL_ERR_ARG, "--data-path: weight '%s' of %s must be positive",
                               items[2 * i], prefix);
                goto fail;
            }
        }
        b->prefixes[i] = strip_copy(prefix);
        if (!b->prefixes[i]) {
            st = pl_errorf(PL_ERR_NOMEM, "--data-path: out of memory");
            goto fail;
        }
        if (!b->prefixes[i][0]) {
            st = pl_errorf(PL_ERR_ARG, "--data-path: empty prefix");
            goto fail;
        }
    }
    return PL_OK;
fail:
    pl_blend_spec_free(b);
    return st;
}

void pl_blend_spec_free(pl_blend_spec *b)
{
    if (b->prefixes)
        for (int i = 0; i < b->n; i++)
            pl_free(b->prefixes[i]);
    pl_free(b->prefixes);
    pl_free(b->weights);
    memset(b, 0, sizeof *b);
}

/* ---- arithmetic ------------------------------------------------------------- */

void pl_blend_normalize(const double *w, int n, double *out)
{
    double sum = pl_np_sum_f64(w, n);
    for (int i = 0; i < n; i++)
        out[i] = w[i] / sum;
}

int64_t pl_blend_request(int64_t target, double weight, double surplus)
{
    double inner = ceil((double)target * weight);
    return (int64_t)ceil(inner * (1.0 + surplus));
}

pl_status pl_blend_indices(const double *weights, int n, int64_t size, int16_t *dataset_index,
                           int64_t *dataset_sample_index)
{
    if (n < 1 || n > 32767)
        return pl_errorf(PL_ERR_ARG, "blend of %d datasets: expected 1 to 32767", n);
    int64_t *count = pl_calloc((size_t)n, sizeof *count);
    if (!count)
        return pl_errorf(PL_ERR_NOMEM, "blend: out of memory");
    for (int64_t i = 0; i < size; i++) {
        double s = (double)i > 1.0 ? (double)i : 1.0;
        int best = 0;
        double max_error = weights[0] * s - (double)count[0];
        for (int d = 1; d < n; d++) {
            double error = weights[d] * s - (double)count[d];
            if (error > max_error) {
                max_error = error;
                best = d;
            }
        }
        dataset_index[i] = (int16_t)best;
        dataset_sample_index[i] = count[best]++;
    }
    pl_free(count);
    return PL_OK;
}

/* ---- BlendedDataset (blended_dataset.py) ------------------------------------ */

static pl_status indent(pl_bytes *b, int level)
{
    pl_status st = pl_bytes_append(b, "\n", 1);
    for (int i = 0; i < level && st == PL_OK; i++)
        st = pl_bytes_append(b, "    ", 4);
    return st;
}

/* OrderedDict(class, datasets, split, weights, size) through json.dumps(indent=4). */
static pl_status describe(pl_bytes *b, const pl_blend_dataset *bd)
{
    pl_status st = pl_bytes_append(b, "{", 1);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "\"class\": \"BlendedDataset\",", 26);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "\"datasets\": [", 13);
    for (int i = 0; i < bd->n && st == PL_OK; i++) {
        if ((st = indent(b, 2)) == PL_OK)
            st = pl_gpt_dataset_identifiers(b, bd->members[i], 2);
        if (st == PL_OK && i + 1 < bd->n)
            st = pl_bytes_append(b, ",", 1);
    }
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "],", 2);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_printf(b, "\"split\": \"%s\",", pl_split_name(bd->split));
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "\"weights\": [", 12);
    for (int i = 0; i < bd->n && st == PL_OK; i++) {
        char r[32];
        pl_py_float_repr(bd->weights[i], r);
        if ((st = indent(b, 2)) == PL_OK)
            st = pl_bytes_printf(b, "%s%s", r, i + 1 < bd->n ? "," : "");
    }
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_append(b, "],", 2);
    if (st == PL_OK && (st = indent(b, 1)) == PL_OK)
        st = pl_bytes_printf(b, "\"size\": %lld", (long long)bd->size);
    if (st == PL_OK && (st = indent(b, 0)) == PL_OK)
        st = pl_bytes_append(b, "}", 1);
    return st;
}

static pl_status load_cached(pl_blend_dataset *b)
{
    pl_status st = pl_gpt_cache_check_description(b->files[PL_BLEND_DESC], b->description, "blend");
    if (st != PL_OK)
        return st;
    pl_npy *arrays[2] = {&b->dataset_index, &b->dataset_sample_index};
    pl_npy_dtype dts[2] = {PL_NPY_I16, PL_NPY_I64};
    for (int i = 0; i < 2; i++) {
        const char *path = b->files[PL_BLEND_INDEX + i];
        if ((st = pl_npy_load(arrays[i], path, dts[i], 1, 1)) != PL_OK)
            return pl_gpt_cache_error(st);
        if (arrays[i]->shape[0] != b->size)
            return pl_errorf(PL_ERR_FORMAT,
                             "%s: %lld entries, expected %lld (delete it to rebuild)", path,
                             (long long)arrays[i]->shape[0], (long long)b->size);
    }
    return PL_OK;
}

static pl_status build(pl_blend_dataset *b, const char *cache_dir)
{
    pl_status st = pl_npy_alloc(&b->dataset_index, PL_NPY_I16, 1, b->size, 1);
    if (st == PL_OK)
        st = pl_npy_alloc(&b->dataset_sample_index, PL_NPY_I64, 1, b->size, 1);
    if (st != PL_OK)
        return st;
    st = pl_blend_indices(b->weights, b->n, b->size, b->dataset_index.owned,
                          b->dataset_sample_index.owned);
    if (st != PL_OK)
        return st;
    /* The oversampling check of blended_dataset.py _build_indices. */
    const int16_t *di = b->dataset_index.owned;
    for (int d = 0; d < b->n; d++) {
        int64_t want = 0, have = pl_gpt_dataset_len(b->members[d]);
        for (int64_t i = 0; i < b->size; i++)
            want += di[i] == d;
        if (want > have)
            return pl_errorf(PL_ERR_ARG,
                             "the %s blend asks %s (dataset %d of --data-path) for %lld samples, "
                             "more than its %lld; raise --mid-level-dataset-surplus",
                             pl_split_name(b->split), b->members[d]->path, d, (long long)want,
                             (long long)have);
    }
    if (!cache_dir)
        return PL_OK;
    if ((st = pl_mkdirs(cache_dir)) != PL_OK ||
        (st = pl_npy_save(b->files[PL_BLEND_INDEX], &b->dataset_index)) != PL_OK ||
        (st = pl_npy_save(b->files[PL_BLEND_SAMPLE], &b->dataset_sample_index)) != PL_OK ||
        (st = pl_file_write_atomic(b->files[PL_BLEND_DESC], b->description,
                                   strlen(b->description))) != PL_OK) {
        if (st == PL_ERR_IO)
            pl_error_wrap(st, "cannot write the blend cache (--data-cache-path)");
        return st;
    }
    return PL_OK;
}

pl_status pl_blend_dataset_init(pl_blend_dataset *b, pl_gpt_dataset *const *members, int n,
                                const double *weights, int64_t size, pl_split s,
                                const char *cache_dir)
{
    static const char *suffix[PL_BLEND_N_FILES] = {"description.txt", "dataset_index.npy",
                                                   "dataset_sample_index.npy"};
    pl_status st = PL_OK;
    pl_bytes desc = {0};
    double t0 = pl_time_now();
    memset(b, 0, sizeof *b);
    if (n < 1 || n >= 32767) {
        st = pl_errorf(PL_ERR_ARG, "--data-path: %d datasets; a blend takes 1 to 32766", n);
        goto fail;
    }
    b->n = n;
    b->size = size;
    b->split = s;
    b->members = pl_malloc((size_t)n * sizeof *b->members);
    b->weights = pl_malloc((size_t)n * sizeof *b->weights);
    if (!b->members || !b->weights) {
        st = pl_errorf(PL_ERR_NOMEM, "blend: out of memory");
        goto fail;
    }
    memcpy(b->members, members, (size_t)n * sizeof *members);
    pl_blend_normalize(weights, n, b->weights);
    PL_TRY(describe(&desc, b));
    b->description = desc.data;
    desc.data = NULL;
    pl_md5_hex(b->description, strlen(b->description), b->hash);
    int hit = cache_dir != NULL;
    for (int f = 0; cache_dir && f < PL_BLEND_N_FILES; f++) {
        size_t len = strlen(cache_dir) + strlen(b->hash) + strlen(suffix[f]) + 40;
        b->files[f] = pl_malloc(len);
        if (!b->files[f]) {
            st = pl_errorf(PL_ERR_NOMEM, "blend: out of memory");
            goto fail;
        }
        snprintf(b->files[f], len, "%s/%s-BlendedDataset-%s-%s", cache_dir, b->hash,
                 pl_split_name(s), suffix[f]);
        hit = hit && pl_file_exists(b->files[f]);
    }
    if (hit) {
        PL_TRY(load_cached(b));
    } else {
        PL_TRY(build(b, cache_dir));
        b->built = 1;
    }
    b->seconds = pl_time_now() - t0;
    return PL_OK;
fail:
    pl_bytes_free(&desc);
    pl_blend_dataset_free(b);
    return st;
}

void pl_blend_dataset_free(pl_blend_dataset *b)
{
    pl_free(b->members);
    pl_free(b->weights);
    pl_npy_free(&b->dataset_index);
    pl_npy_free(&b->dataset_sample_index);
    pl_free(b->description);
    for (int f = 0; f < PL_BLEND_N_FILES; f++)
        pl_free(b->files[f]);
    memset(b, 0, sizeof *b);
}

/* ---- the builder (blended_megatron_dataset_builder.py) ---------------------- */

static pl_gpt_dataset *mid_at(const pl_blend_data *d, int ds, int s)
{
    return &d->mid[ds * PL_N_SPLITS + s];
}

pl_status pl_blend_build(pl_blend_data *d, const pl_blend_spec *spec, const pl_blend_config *cfg,
                         const int64_t sizes[PL_N_SPLITS])
{
    pl_status st = PL_OK;
    double *w = NULL;
    int64_t *request = NULL, *target = NULL;
    pl_gpt_dataset **members = NULL;
    memset(d, 0, sizeof *d);
    int n = spec->n;
    d->n = n;
    d->blended = !(n == 1 && !spec->weights);
    d->low = pl_calloc((size_t)n, sizeof *d->low);
    d->mid = pl_calloc((size_t)n * PL_N_SPLITS, sizeof *d->mid);
    w = pl_malloc((size_t)n * sizeof *w);
    request = pl_malloc((size_t)n * PL_N_SPLITS * sizeof *request);
    target = pl_malloc((size_t)n * PL_N_SPLITS * sizeof *target);
    members = pl_malloc((size_t)n * sizeof *members);
    if (!d->low || !d->mid || !w || !request || !target || !members) {
        st = pl_errorf(PL_ERR_NOMEM, "--data-path: out of memory");
        goto fail;
    }
    for (int s = 0; s < PL_N_SPLITS; s++) {
        d->present[s] = cfg->gpt.split_matrix.present[s];
        d->requested[s] = sizes[s];
    }
    /* Requests per dataset and split: the size itself for a single prefix,
     * target and buffered sizes for weights, one epoch (None) without. */
    if (spec->weights)
        pl_blend_normalize(spec->weights, n, w);
    for (int ds = 0; ds < n; ds++)
        for (int s = 0; s < PL_N_SPLITS; s++) {
            int64_t *r = &request[ds * PL_N_SPLITS + s], *t = &target[ds * PL_N_SPLITS + s];
            if (!d->blended) {
                *r = *t = sizes[s];
            } else if (spec->weights) {
                *t = pl_blend_request(sizes[s], w[ds], 0.0);
                *r = pl_blend_request(sizes[s], w[ds], cfg->mid_level_dataset_surplus);
            } else {
                *r = *t = -1;
            }
        }
    for (int ds = 0; ds < n; ds++) {
        const char *prefix = spec->prefixes[ds];
        st = pl_indexed_open(&d->low[ds], prefix);
        if (st != PL_OK) {
            pl_error_wrap(st, "--data-path '%s'", prefix);
            goto fail;
        }
        for (int s = 0; s < PL_N_SPLITS; s++) {
            if (!d->present[s])
                continue;
            PL_TRY(pl_gpt_dataset_init(mid_at(d, ds, s), &d->low[ds], prefix, &cfg->gpt,
                                       (pl_split)s, request[ds * PL_N_SPLITS + s]));
        }
    }
    if (d->blended) {
        for (int s = 0; s < PL_N_SPLITS; s++) {
            if (!d->present[s])
                continue;
            int64_t size = 0;
            for (int ds = 0; ds < n; ds++) {
                members[ds] = mid_at(d, ds, s);
                if (spec->weights) {
                    size += target[ds * PL_N_SPLITS + s];
                } else {
                    /* blended_dataset.py asserts every weight (here: length) > 0. */
                    int64_t len = pl_gpt_dataset_len(members[ds]);
                    if (len == 0) {
                        st = pl_errorf(PL_ERR_ARG,
                                       "--data-path '%s': its %s split (%lld tokens) holds no "
                                       "sample of --seq-length %lld + 1 tokens, so it cannot be "
                                       "blended by length",
                                       members[ds]->path, pl_split_name((pl_split)s),
                                       (long long)members[ds]->tokens_per_epoch,
                                       (long long)cfg->gpt.seq_length);
                        goto fail;
                    }
                    w[ds] = (double)len;
                    size += len;
                }
            }
            if (!spec->weights && sizes[s] < size)
                size = sizes[s];
            PL_TRY(pl_blend_dataset_init(&d->top[s], members, n, w, size, (pl_split)s,
                                         cfg->gpt.cache_dir));
        }
    }
    pl_free(w);
    pl_free(request);
    pl_free(target);
    pl_free(members);
    return PL_OK;
fail:
    pl_free(w);
    pl_free(request);
    pl_free(target);
    pl_free(members);
    pl_blend_data_free(d);
    return st;
}

void pl_blend_data_free(pl_blend_data *d)
{
    for (int s = 0; s < PL_N_SPLITS; s++)
        pl_blend_dataset_free(&d->top[s]);
    if (d->mid)
        for (int i = 0; i < d->n * PL_N_SPLITS; i++)
            pl_gpt_dataset_free(&d->mid[i]);
    if (d->low)
        for (int i = 0; i < d->n; i++)
            pl_indexed_close(&d->low[i]);
    pl_free(d->mid);
    pl_free(d->low);
    memset(d, 0, sizeof *d);
}

int64_t pl_blend_data_len(const pl_blend_data *d, pl_split s)
{
    if (!d->present[s])
        return 0;
    return d->blended ? d->top[s].size : pl_gpt_dataset_len(mid_at(d, 0, s));
}

pl_status pl_blend_data_get(const pl_blend_data *d, pl_split s, int64_t idx, int32_t *tokens,
                            int64_t *n_real, int *dataset, int64_t *dataset_sample)
{
    int64_t len = pl_blend_data_len(d, s);
    if (idx < 0 || idx >= len)
        return pl_errorf(PL_ERR_ARG, "%s sample %lld out of range [0, %lld)", pl_split_name(s),
                         (long long)idx, (long long)len);
    int ds = 0;
    int64_t j = idx;
    if (d->blended) {
        ds = (int)pl_npy_get(&d->top[s].dataset_index, idx);
        j = pl_npy_get(&d->top[s].dataset_sample_index, idx);
        if (ds < 0 || ds >= d->n)
            return pl_errorf(PL_ERR_FORMAT, "%s: dataset_index[%lld] = %d out of range",
                             d->top[s].files[PL_BLEND_INDEX] ? d->top[s].files[PL_BLEND_INDEX]
                                                             : "blend",
                             (long long)idx, ds);
    }
    if (dataset)
        *dataset = ds;
    if (dataset_sample)
        *dataset_sample = j;
    return pl_gpt_dataset_get(mid_at(d, ds, s), j, tokens, n_real);
}

const pl_gpt_dataset *pl_blend_data_member(const pl_blend_data *d, pl_split s, int ds)
{
    return mid_at(d, ds, s);
}
