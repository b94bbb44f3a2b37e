/* The parameter table and its flat-buffer layout. */
#include "model/registry.h"

#include "base/alloc.h"
#include "base/rng.h"
#include "base/status.h"

#include <string.h>

/* Puts entry i, whose name hashes to h, into the first free slot from h on (linear
 * probing; the table is at most half full, so a free slot exists). */
static void index_put(int32_t *slots, int64_t nslots, uint64_t h, int i)
{
    const uint64_t mask = (uint64_t)nslots - 1;
    for (h &= mask; slots[h]; h = (h + 1) & mask)
        ;
    slots[h] = i + 1;
}

/* Doubles the index (at least 128 slots) and re-inserts every entry. */
static pl_status index_grow(pl_registry *r)
{
    const int64_t n = r->nslots ? 2 * r->nslots : 128;
    int32_t *slots = pl_calloc((size_t)n, sizeof *slots);
    if (!slots)
        return pl_errorf(PL_ERR_NOMEM, "out of memory growing the parameter registry's index "
                         "(%lld slots)", (long long)n);
    for (int i = 0; i < r->n; i++)
        index_put(slots, n, pl_hash_str(r->params[i].name), i);
    pl_free(r->slots);
    r->slots = slots;
    r->nslots = n;
    return PL_OK;
}

void pl_registry_init(pl_registry *r, int tp_size, int tp_rank, int pp_rank)
{
    memset(r, 0, sizeof *r);
    r->tp_size = tp_size;
    r->tp_rank = tp_rank;
    r->pp_rank = pp_rank;
}

void pl_registry_free(pl_registry *r)
{
    pl_free(r->params);
    pl_free(r->slots);
    memset(r, 0, sizeof *r);
}

pl_status pl_registry_add(pl_registry *r, const pl_param_spec *s)
{
    if (strlen(s->name) >= PL_PARAM_NAME_MAX)
        return pl_errorf(PL_ERR_ARG, "parameter name too long: %s", s->name);
    if (s->ndim < 1 || s->ndim > 2 || s->shape[0] <= 0 || (s->ndim == 2 && s->shape[1] <= 0))
        return pl_errorf(PL_ERR_ARG, "parameter %s: bad shape", s->name);
    if (pl_registry_find(r, s->name))
        return pl_errorf(PL_ERR_ARG, "parameter %s registered twice", s->name);
    if (r->n >= PL_REGISTRY_MAX)
        return pl_errorf(PL_ERR_ARG, "parameter %s: more than %d parameters in the registry",
                         s->name, PL_REGISTRY_MAX);
    if (2 * ((int64_t)r->n + 1) > r->nslots) {
        pl_status st = index_grow(r);
        if (st != PL_OK)
            return st;
    }
    if (r->n == r->cap) {
        int ncap = r->cap ? 2 * r->cap : 64;
        pl_param *np = pl_realloc(r->params, (size_t)ncap * sizeof *np);
        if (!np)
            return pl_errorf(PL_ERR_NOMEM, "out of memory growing the parameter registry");
        r->params = np;
        r->cap = ncap;
    }
    pl_param *p = &r->params[r->n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", s->name);
    p->ndim = s->ndim;
    p->shape[0] = s->shape[0];
    p->shape[1] = s->ndim == 2 ? s->shape[1] : 1;
    p->split = s->split;
    p->stage = s->stage;
    p->layer = s->layer;
    p->weight_decay = s->weight_decay;
    p->init = s->init;
    p->init_std = s->init_std;
    p->init_stream = pl_hash_str(s->name);
    p->local_shape[0] = p->shape[0];
    p->local_shape[1] = p->shape[1];
    int dim = s->split == PL_TP_ROWS || s->split == PL_TP_VOCAB || s->split == PL_TP_ROWS_HALVES ? 0
              : s->split == PL_TP_COLS                         ? 1
                                                               : -1;
    if (dim == 1 && s->ndim != 2)
        return pl_errorf(PL_ERR_ARG, "parameter %s: a column split needs 2 dimensions", s->name);
    if (s->split == PL_TP_ROWS_HALVES && p->shape[0] % (2 * r->tp_size))
        return pl_errorf(PL_ERR_ARG,
                         "parameter %s: each half of dimension 0 (%lld rows) must divide by "
                         "--tensor-model-parallel-size %d",
                         s->name, (long long)p->shape[0] / 2, r->tp_size);
    if (s->split == PL_TP_QKV_SHARED_KV) {
        const int64_t NH = s->heads, G = s->groups, tp = r->tp_size;
        if (G < 1 || NH % tp || tp % G || p->shape[0] % (NH + 2 * G))
            return pl_errorf(PL_ERR_ARG, "parameter %s: %lld query heads in %lld key/value groups "
                             "cannot be shared out over --tensor-model-parallel-size %d", s->name,
                             (long long)NH, (long long)G, r->tp_size);
        const int64_t HS = p->shape[0] / (NH + 2 * G), R = tp / G, g = r->tp_rank / R;
        p->kv_replica = (int)(r->tp_rank % R);
        p->q_rows = NH / tp * HS;
        p->local_shape[0] = p->q_rows + 2 * HS;
        p->slice_start[0] = (g * (NH / G + 2)) * HS + p->kv_replica * p->q_rows;
        p->kv_start = (g * (NH / G + 2) + NH / G) * HS;
    }
    if (dim >= 0) {
        if (p->shape[dim] % r->tp_size)
            return pl_errorf(PL_ERR_ARG,
                             "parameter %s: dimension %d of size %lld is not divisible by "
                             "--tensor-model-parallel-size %d",
                             s->name, dim, (long long)p->shape[dim], r->tp_size);
        p->local_shape[dim] = p->shape[dim] / r->tp_size;
        p->slice_start[dim] = p->local_shape[dim] * r->tp_rank;
        if (s->split == PL_TP_ROWS_HALVES)
            p->slice_start[0] = p->local_shape[0] / 2 * r->tp_rank;
    }
    p->numel = p->local_shape[0] * p->local_shape[1];
    if (p->stage == r->pp_rank) {
        p->offset = r->numel;
        int64_t padded = (p->numel + PL_PARAM_ALIGN - 1) / PL_PARAM_ALIGN * PL_PARAM_ALIGN;
        r->numel += padded;
    } else {
        p->offset = -1;
    }
    index_put(r->slots, r->nslots, pl_hash_str(p->name), r->n);
    r->n++;
    return PL_OK;
}

const pl_param *pl_registry_find(const pl_registry *r, const char *name)
{
    if (!r->nslots)
        return NULL;
    const uint64_t mask = (uint64_t)r->nslots - 1;
    for (uint64_t h = pl_hash_str(name) & mask;; h = (h + 1) & mask) {
        const int32_t e = r->slots[h];
        if (!e)
            return NULL;
        if (strcmp(r->params[e - 1].name, name) == 0)
            return &r->params[e - 1];
    }
}

int64_t pl_param_global_index(const pl_param *p, int64_t row, int64_t col)
{
    if (p->split == PL_TP_QKV_SHARED_KV) /* [this rank's q heads; its group's k, v] */
        return (row < p->q_rows ? p->slice_start[0] + row : p->kv_start + row - p->q_rows) *
                   p->shape[1] + col;
    if (p->split == PL_TP_ROWS_HALVES) { /* local [gate_r; up_r] */
        const int64_t h = p->local_shape[0] / 2;
        if (row >= h)
            row += p->shape[0] / 2 - h;
    }
    return (p->slice_start[0] + row) * p->shape[1] + p->slice_start[1] + col;
}

void pl_registry_init_values(const pl_registry *r, float *flat, uint64_t seed)
{
    memset(flat, 0, (size_t)r->numel * sizeof *flat);
    for (int i = 0; i < r->n; i++) {
        const pl_param *p = &r->params[i];
        if (p->offset < 0)
            continue;
        float *w = flat + p->offset;
        uint64_t stream = p->init_stream;
        int64_t rows = p->local_shape[0], cols = p->local_shape[1];
#pragma omp parallel for schedule(static)
        for (int64_t a = 0; a < rows; a++)
            for (int64_t b = 0; b < cols; b++) {
                float v = p->init == PL_INIT_ONES ? 1.0f : 0.0f;
                if (p->init == PL_INIT_NORMAL)
                    v = (float)(p->init_std *
                                pl_rng_normal(seed, stream, (uint64_t)pl_param_global_index(p, a, b)));
                w[a * cols + b] = v;
            }
    }
}

void pl_registry_init_range(const pl_registry *r, int64_t lo, int64_t hi, float *out,
                            uint64_t seed)
{
    memset(out, 0, (size_t)(hi - lo) * sizeof *out);
    for (int i = 0; i < r->n; i++) {
        const pl_param *p = &r->params[i];
        if (p->offset < 0)
            continue;
        int64_t a = p->offset > lo ? p->offset : lo;
        int64_t b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a >= b)
            continue;
        uint64_t stream = p->init_stream;
        int64_t cols = p->local_shape[1];
#pragma omp parallel for schedule(static)
        for (int64_t e = a; e < b; e++) {
            int64_t k = e - p->offset;
            float v = p->init == PL_INIT_ONES ? 1.0f : 0.0f;
            if (p->init == PL_INIT_NORMAL)
                v = (float)(p->init_std *
                            pl_rng_normal(seed, stream,
                                          (uint64_t)pl_param_global_index(p, k / cols, k % cols)));
            out[e - lo] = v;
        }
    }
}
