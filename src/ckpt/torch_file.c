/* torch.save files (ckpt/torch_file.h). */
#include "ckpt/torch_file.h"

#include "base/alloc.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

static pl_status bind_storages(pl_pt *f, const char *prefix, const pl_pk *o, int depth,
                               uint64_t stamp)
{
    if (!o)
        return PL_OK;
    const int enter = pl_pk_enter(o, stamp);
    if (enter < 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: the pickle holds a cycle (an object inside itself)",
                         f->what);
    if (enter == 0)
        return PL_OK; /* walked already (the memo shares it) */
    if (depth > 64)
        return pl_errorf(PL_ERR_FORMAT, "%s: the pickle nests deeper than 64 levels", f->what);
    const pl_pk *node = o;
    if (o->kind == PL_PK_TENSOR)
        o = o->storage;
    if (o->kind == PL_PK_STORAGE) {
        pl_pk_leave(node, stamp);
        if (o->data)
            return PL_OK;
        char name[512];
        snprintf(name, sizeof name, "%s/data/%s", prefix, o->s);
        const pl_zip_entry *e = pl_zip_find(&f->zip, name);
        const int es = pl_pk_dtype_size(o->dtype);
        if (!e)
            return pl_errorf(PL_ERR_FORMAT, "%s: storage %s has no entry %s", f->what, o->s, name);
        if (o->i > 0 && (uint64_t)o->i > e->size / (uint64_t)es)
            return pl_errorf(PL_ERR_FORMAT, "%s: storage %s claims %lld elements of %d bytes, its "
                             "entry holds %llu bytes", f->what, o->s, (long long)o->i, es,
                             (unsigned long long)e->size);
        ((pl_pk *)o)->data = e->data;
        return PL_OK;
    }
    for (int64_t k = 0; k < o->n && (o->kind == PL_PK_LIST || o->kind == PL_PK_TUPLE ||
                                     o->kind == PL_PK_DICT || o->kind == PL_PK_OBJECT); k++) {
        pl_status st = bind_storages(f, prefix, o->v[k], depth + 1, stamp);
        if (st)
            return st;
    }
    pl_pk_leave(node, stamp);
    return PL_OK;
}

pl_status pl_pt_parse(pl_pt *f, const uint8_t *image, size_t size, const char *what)
{
    snprintf(f->what, sizeof f->what, "%s", what);
    pl_status st = pl_zip_parse(&f->zip, image, size, what);
    if (st)
        return st;
    const pl_zip_entry *pkl = NULL;
    for (int k = 0; k < f->zip.n; k++) {
        const char *n = f->zip.e[k].name, *slash = strchr(n, '/');
        if (slash && strcmp(slash, "/data.pkl") == 0) {
            if (pkl)
                return pl_errorf(PL_ERR_FORMAT, "%s: two data.pkl entries", what);
            pkl = &f->zip.e[k];
        }
    }
    if (!pkl)
        return pl_errorf(PL_ERR_FORMAT, "%s: no NAME/data.pkl entry: not a torch.save file (or "
                         "one of torch's older, non-zip format, which plait does not read)", what);
    char prefix[256], name[300];
    const size_t plen = strlen(pkl->name) - strlen("/data.pkl");
    if (plen >= sizeof prefix)
        return pl_errorf(PL_ERR_FORMAT, "%s: entry name too long", what);
    memcpy(prefix, pkl->name, plen);
    prefix[plen] = 0;
    snprintf(name, sizeof name, "%s/byteorder", prefix);
    const pl_zip_entry *bo = pl_zip_find(&f->zip, name);
    if (bo && !(bo->size == 6 && memcmp(bo->data, "little", 6) == 0))
        return pl_errorf(PL_ERR_FORMAT, "%s: %s is not \"little\"", what, name);
    if ((st = pl_pickle_parse(pkl->data, pkl->size, what, &f->pk)))
        return st;
    return bind_storages(f, prefix, pl_pickle_root(f->pk), 0, pl_pickle_stamp(f->pk));
}

pl_status pl_pt_open(pl_pt *f, const char *path)
{
    memset(f, 0, sizeof *f);
    pl_status st = pl_mmap_open(&f->map, path);
    if (st)
        return st;
    return pl_pt_parse(f, f->map.data, f->map.size, path);
}

void pl_pt_close(pl_pt *f)
{
    pl_pickle_free(f->pk);
    pl_zip_free(&f->zip);
    pl_mmap_close(&f->map);
    memset(f, 0, sizeof *f);
}

const pl_pk *pl_pt_root(const pl_pt *f) { return f->pk ? pl_pickle_root(f->pk) : NULL; }

int64_t pl_pk_numel(const pl_pk *t)
{
    int64_t n = 1;
    for (int k = 0; k < t->ndim; k++)
        n *= t->shape[k];
    return n;
}

pl_status pl_pt_tensor_floats(const pl_pt *f, const pl_pk *t, float *out, int64_t n)
{
    if (t->kind != PL_PK_TENSOR || !t->storage->data)
        return pl_errorf(PL_ERR_FORMAT, "%s: not a tensor", f->what);
    if (n != pl_pk_numel(t))
        return pl_errorf(PL_ERR_ARG, "%s: a tensor of %lld elements read as %lld", f->what,
                         (long long)pl_pk_numel(t), (long long)n);
    const char *dt = t->storage->dtype;
    const int es = pl_pk_dtype_size(dt);
    if (strcmp(dt, "F32") && strcmp(dt, "BF16") && strcmp(dt, "F16") && strcmp(dt, "F64"))
        return pl_errorf(PL_ERR_FORMAT, "%s: a %s tensor where floats were expected", f->what, dt);
    int64_t idx[PL_PK_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t off = t->i;
        for (int k = 0; k < t->ndim; k++)
            off += idx[k] * t->stride[k];
        const uint8_t *p = t->storage->data + off * es;
        if (es == 4) {
            memcpy(&out[e], p, 4);
        } else if (es == 8) {
            double d;
            memcpy(&d, p, 8);
            out[e] = (float)d;
        } else {
            uint16_t h;
            memcpy(&h, p, 2);
            out[e] = dt[0] == 'B' ? pl_ref_bf16_to_f32(h) : pl_ref_fp16_to_f32(h);
        }
        for (int k = t->ndim - 1; k >= 0; k--) {
            if (++idx[k] < t->shape[k])
                break;
            idx[k] = 0;
        }
    }
    return PL_OK;
}
