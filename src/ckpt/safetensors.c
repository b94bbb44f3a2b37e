/* safetensors reader and writer. The JSON header is handled by cJSON. */
#include "ckpt/safetensors.h"

#include "base/alloc.h"

#include "base/json.h"

#include <cjson/cJSON.h>
#include <string.h>

static const struct {
    const char *name;
    int size;
} dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
              {"I16", 2}, {"I8", 1},  {"U8", 1},  {"U16", 2},  {"U32", 4}, {"U64", 8}, {"BOOL", 1}};

int pl_st_dtype_size(const char *dtype)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (strcmp(dtypes[i].name, dtype) == 0)
            return dtypes[i].size;
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const pl_st_tensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* One tensor entry of the header. */
static pl_status parse_entry(const cJSON *e, pl_st_tensor *t, uint64_t data_size, const char *name)
{
    if (strlen(e->string) >= PL_ST_NAME_MAX)
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor name too long (%zu bytes)", name,
                         strlen(e->string));
    snprintf(t->name, sizeof t->name, "%s", e->string);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
        cJSON_GetArraySize(off) != 2)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: tensor %s: expected {\"dtype\", \"shape\", \"data_offsets\": [b, e]}",
                         name, t->name);
    int isz = pl_st_dtype_size(dt->valuestring);
    if (!isz || strlen(dt->valuestring) >= sizeof t->dtype)
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s: unknown dtype '%s'", name, t->name,
                         dt->valuestring);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
    t->ndim = cJSON_GetArraySize(sh);
    if (t->ndim > PL_ST_NDIM_MAX)
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s: %d dimensions (at most %d)", name, t->name,
                         t->ndim, PL_ST_NDIM_MAX);
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        const cJSON *d = cJSON_GetArrayItem(sh, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 9.0e15 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s: shape[%d] is not a size", name, t->name,
                             i);
        t->shape[i] = (int64_t)d->valuedouble;
        if (t->shape[i] && numel > UINT64_MAX / (uint64_t)t->shape[i] / 8)
            return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s: shape overflows", name, t->name);
        numel *= (uint64_t)t->shape[i];
    }
    const cJSON *b = cJSON_GetArrayItem(off, 0), *en = cJSON_GetArrayItem(off, 1);
    if (!cJSON_IsNumber(b) || !cJSON_IsNumber(en) || b->valuedouble < 0 ||
        en->valuedouble < b->valuedouble || en->valuedouble > (double)data_size)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: tensor %s: data_offsets outside the %llu-byte data section", name,
                         t->name, (unsigned long long)data_size);
    t->begin = (uint64_t)b->valuedouble;
    t->end = (uint64_t)en->valuedouble;
    if (t->end - t->begin != numel * (uint64_t)isz)
        return pl_errorf(PL_ERR_FORMAT,
                         "%s: tensor %s: %llu bytes for shape with %llu elements of %s", name,
                         t->name, (unsigned long long)(t->end - t->begin),
                         (unsigned long long)numel, t->dtype);
    return PL_OK;
}

static void free_meta(pl_safetensors *st)
{
    for (int i = 0; i < st->n_meta; i++) {
        pl_free(st->meta[i].key);
        pl_free(st->meta[i].value);
    }
    pl_free(st->meta);
    st->meta = NULL;
    st->n_meta = 0;
}

pl_status pl_safetensors_parse(pl_safetensors *sf, const uint8_t *image, size_t size,
                               const char *name)
{
    pl_status st = PL_OK;
    cJSON *root = NULL;
    pl_mmap keep = sf->map;
    memset(sf, 0, sizeof *sf);
    sf->map = keep;
    if (size < 8)
        return pl_errorf(PL_ERR_FORMAT, "%s: %zu bytes, too short for a safetensors header", name,
                         size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | image[i];
    if (hlen > size - 8)
        return pl_errorf(PL_ERR_FORMAT, "%s: header length %llu exceeds the file (%zu bytes)", name,
                         (unsigned long long)hlen, size);
    pl_json_init();
    pl_json_oom_take();
    root = cJSON_ParseWithLength((const char *)image + 8, (size_t)hlen);
    if (!root && pl_json_oom_take()) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory parsing the header", name);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: header is not a JSON object", name);
        goto fail;
    }
    uint64_t data_size = size - 8 - hlen;
    int count = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        count += strcmp(e->string, "__metadata__") != 0;
    sf->tensors = pl_calloc((size_t)count, sizeof *sf->tensors);
    if (!sf->tensors) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) {
                st = pl_errorf(PL_ERR_FORMAT, "%s: __metadata__ is not an object", name);
                goto fail;
            }
            for (const cJSON *m = e->child; m; m = m->next) {
                if (!cJSON_IsString(m)) {
                    st = pl_errorf(PL_ERR_FORMAT, "%s: __metadata__.%s is not a string", name,
                                    m->string);
                    goto fail;
                }
                pl_st_meta *nm = pl_realloc(sf->meta, (size_t)(sf->n_meta + 1) * sizeof *nm);
                if (!nm) {
                    st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", name);
                    goto fail;
                }
                sf->meta = nm;
                nm[sf->n_meta].key = pl_strdup(m->string);
                nm[sf->n_meta].value = pl_strdup(m->valuestring);
                sf->n_meta++;
                if (!nm[sf->n_meta - 1].key || !nm[sf->n_meta - 1].value) {
                    st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", name);
                    goto fail;
                }
            }
            continue;
        }
        PL_TRY(parse_entry(e, &sf->tensors[sf->n], data_size, name));
        sf->n++;
    }
    /* The data section is covered exactly: no holes, no overlaps. */
    pl_st_tensor *sorted = pl_malloc((size_t)(sf->n ? sf->n : 1) * sizeof *sorted);
    if (!sorted) {
        st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    if (sf->n)
        memcpy(sorted, sf->tensors, (size_t)sf->n * sizeof *sorted);
    qsort(sorted, (size_t)sf->n, sizeof *sorted, cmp_begin);
    uint64_t pos = 0;
    for (int i = 0; i < sf->n; i++) {
        if (sorted[i].begin != pos) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: tensor %s starts at byte %llu, expected %llu "
                            "(tensors must tile the data section)",
                            name, sorted[i].name, (unsigned long long)sorted[i].begin,
                            (unsigned long long)pos);
            pl_free(sorted);
            goto fail;
        }
        pos = sorted[i].end;
    }
    pl_free(sorted);
    if (pos != data_size) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: tensors cover %llu of %llu data bytes", name,
                        (unsigned long long)pos, (unsigned long long)data_size);
        goto fail;
    }
    sf->data = image + 8 + hlen;
    cJSON_Delete(root);
    return PL_OK;
fail:
    cJSON_Delete(root);
    pl_free(sf->tensors);
    sf->tensors = NULL;
    sf->n = 0;
    free_meta(sf);
    return st;
}

pl_status pl_safetensors_open(pl_safetensors *st, const char *path)
{
    memset(st, 0, sizeof *st);
    pl_status s = pl_mmap_open(&st->map, path);
    if (s)
        return s;
    s = pl_safetensors_parse(st, st->map.data, st->map.size, path);
    if (s)
        pl_mmap_close(&st->map);
    return s;
}

void pl_safetensors_close(pl_safetensors *st)
{
    pl_free(st->tensors);
    free_meta(st);
    pl_mmap_close(&st->map);
    memset(st, 0, sizeof *st);
}

const pl_st_tensor *pl_safetensors_find(const pl_safetensors *st, const char *name)
{
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

const char *pl_safetensors_meta(const pl_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

/* ---- writer ------------------------------------------------------------- */

typedef struct wtensor {
    pl_st_tensor t;
    const void *data;
} wtensor;

struct pl_st_writer {
    wtensor *items;
    int n, cap;
    cJSON *meta;
    uint64_t size;
};

pl_status pl_st_writer_new(pl_st_writer **out)
{
    *out = pl_calloc(1, sizeof **out);
    return *out ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory");
}

pl_status pl_st_writer_add(pl_st_writer *w, const char *name, const char *dtype, int ndim,
                           const int64_t *shape, const void *data)
{
    int isz = pl_st_dtype_size(dtype);
    if (!isz || ndim < 0 || ndim > PL_ST_NDIM_MAX || strlen(name) >= PL_ST_NAME_MAX ||
        strcmp(name, "__metadata__") == 0)
        return pl_errorf(PL_ERR_ARG, "safetensors: bad tensor %s (%s, %d dims)", name, dtype, ndim);
    if (w->n == w->cap) {
        int ncap = w->cap ? 2 * w->cap : 32;
        wtensor *ni = pl_realloc(w->items, (size_t)ncap * sizeof *ni);
        if (!ni)
            return pl_errorf(PL_ERR_NOMEM, "out of memory");
        w->items = ni;
        w->cap = ncap;
    }
    wtensor *it = &w->items[w->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->t.name, sizeof it->t.name, "%s", name);
    snprintf(it->t.dtype, sizeof it->t.dtype, "%s", dtype);
    it->t.ndim = ndim;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        it->t.shape[i] = shape[i];
        numel *= (uint64_t)shape[i];
    }
    it->t.begin = w->size;
    it->t.end = w->size + numel * (uint64_t)isz;
    w->size = it->t.end;
    it->data = data;
    return PL_OK;
}

pl_status pl_st_writer_meta(pl_st_writer *w, const char *key, const char *value)
{
    pl_json_init();
    if (!w->meta && !(w->meta = cJSON_CreateObject()))
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(w->meta, key);
    if (!cJSON_AddStringToObject(w->meta, key, value))
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    return PL_OK;
}

void pl_st_writer_free(pl_st_writer *w)
{
    if (!w)
        return;
    cJSON_Delete(w->meta);
    pl_free(w->items);
    pl_free(w);
}

/* The header entry of t, or NULL when memory runs out. */
static cJSON *entry_json(const pl_st_tensor *t)
{
    cJSON *e = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *off = cJSON_CreateArray();
    int ok = e && sh && off;
    for (int d = 0; ok && d < t->ndim; d++)
        ok = cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
    ok = ok && cJSON_AddItemToArray(off, cJSON_CreateNumber((double)t->begin)) &&
         cJSON_AddItemToArray(off, cJSON_CreateNumber((double)t->end));
    ok = ok && cJSON_AddStringToObject(e, "dtype", t->dtype);
    if (ok && cJSON_AddItemToObject(e, "shape", sh)) {
        sh = NULL;
        if (cJSON_AddItemToObject(e, "data_offsets", off))
            return e;
    }
    cJSON_Delete(e);
    cJSON_Delete(sh);
    cJSON_Delete(off);
    return NULL;
}

pl_status pl_st_writer_finish(pl_st_writer *w, const char *path)
{
    pl_status st = PL_OK;
    pl_wfile f = {0};
    char *json = NULL;
    pl_json_init();
    cJSON *root = cJSON_CreateObject();
    if (!root)
        goto nomem;
    if (w->meta) {
        if (!cJSON_AddItemToObject(root, "__metadata__", w->meta))
            goto nomem;
        w->meta = NULL; /* root owns it now */
    }
    for (int i = 0; i < w->n; i++) {
        cJSON *e = entry_json(&w->items[i].t);
        if (!e)
            goto nomem;
        if (!cJSON_AddItemToObject(root, w->items[i].t.name, e)) {
            cJSON_Delete(e);
            goto nomem;
        }
    }
    json = cJSON_PrintUnformatted(root);
    if (!json)
        goto nomem;
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8; /* pad with spaces to 8 bytes */
    uint8_t head[8];
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    PL_TRY(pl_wfile_open(&f, path));
    PL_TRY(pl_wfile_write(&f, head, 8));
    PL_TRY(pl_wfile_write(&f, json, jl));
    PL_TRY(pl_wfile_write(&f, "        ", padded - jl));
    for (int i = 0; i < w->n; i++)
        PL_TRY(pl_wfile_write(&f, w->items[i].data, w->items[i].t.end - w->items[i].t.begin));
    PL_TRY(pl_wfile_commit(&f));
    goto done;
nomem:
    st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", path);
fail:
    pl_wfile_abort(&f);
done:
    cJSON_free(json);
    cJSON_Delete(root);
    pl_st_writer_free(w);
    return st;
}
