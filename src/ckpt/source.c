/* A saved checkpoint read by global slices (ckpt/source.h). */
#include "ckpt/source.h"

#include "base/alloc.h"
#include "base/xxh64.h"
#include "ckpt/files.h"
#include "ckpt/manifest.h"
#include "ckpt/safetensors.h"
#include "model/spec.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

enum { PATH_MAX_ = 4096, RANK_MAX = 1 << 24 };
static const double COUNT_MAX = 9007199254740992.0; /* 2^53 */

typedef struct zshard {
    int tp, pp;
    int64_t lo, count;
    const char *file; /* in the manifest tree */
    pl_safetensors sf;
    int open;
} zshard;

struct pl_ckpt_source {
    int idfd;
    char idir[PATH_MAX_], mpath[PATH_MAX_ + 32];
    cJSON *root;
    pl_model_config cfg;
    pl_ckpt_meta meta;
    char *strings;
    int tp, pp, zero_stage;
    pl_registry *regs;     /* tp: saved TP rank t's tensors, manifest order, stage offsets */
    pl_safetensors *files; /* tp * pp model files, mapped on first use */
    unsigned char *open;
    zshard *z;       /* sorted by (tp, pp, lo) */
    int nz;
    int *zfirst;     /* tp * pp + 1: rank (t, p)'s shards are z[zfirst[i] .. zfirst[i + 1]) */
    int64_t *numel;  /* tp * pp: the saved flat buffer's length of rank (t, p) */
};

static void rank_dir(char *out, size_t n, int tp_rank, int pp_rank, int pp)
{
    if (pp == 1)
        snprintf(out, n, "mp_rank_%02d", tp_rank);
    else
        snprintf(out, n, "mp_rank_%02d_%03d", tp_rank, pp_rank);
}

/* Maps rel of the iteration directory, checks its xxh64 against the
 * manifest's "files" and parses it as safetensors. */
static pl_status open_verified(const pl_ckpt_source *s, const char *rel, pl_safetensors *sf)
{
    char path[2 * PATH_MAX_];
    snprintf(path, sizeof path, "%s/%s", s->idir, rel);
    memset(sf, 0, sizeof *sf);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s->root, "files"), rel),
        "xxh64");
    if (!cJSON_IsString(want))
        return pl_errorf(PL_ERR_FORMAT, "%s: no checksum recorded for %s", s->mpath, rel);
    pl_mmap m;
    pl_status st = pl_ckpt_map_in(s->idfd, s->idir, rel, &m);
    if (st)
        return st;
    char got[17];
    snprintf(got, sizeof got, "%016" PRIx64, pl_xxh64(m.data ? m.data : (const uint8_t *)"", m.size, 0));
    if (strcmp(got, want->valuestring) != 0) {
        pl_mmap_close(&m);
        return pl_errorf(PL_ERR_FORMAT, "%s: xxh64 %s, the manifest says %.20s (corrupt file)",
                         path, got, want->valuestring);
    }
    sf->map = m;
    st = pl_safetensors_parse(sf, m.data, m.size, path);
    if (st)
        pl_mmap_close(&sf->map);
    return st;
}

/* An integer field of o in [0, hi]; *ok = 0 (and 0 returned) when it is
 * missing, fractional or out of range, so no cast below overflows. */
static int64_t num(const cJSON *o, const char *key, double hi, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= hi) ||
        v->valuedouble != (double)(int64_t)v->valuedouble) {
        *ok = 0;
        return 0;
    }
    return (int64_t)v->valuedouble;
}

static int zshard_order(const void *a, const void *b)
{
    const zshard *x = a, *y = b;
    if (x->tp != y->tp)
        return x->tp < y->tp ? -1 : 1;
    if (x->pp != y->pp)
        return x->pp < y->pp ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The manifest's ZeRO shards (entries without rank fields, written before
 * tensor parallelism, are TP and PP rank 0). */
static pl_status read_zero(pl_ckpt_source *s)
{
    const cJSON *zo = cJSON_GetObjectItemCaseSensitive(s->root, "zero");
    if (!zo)
        return PL_OK;
    int ok = 1;
    s->zero_stage = (int)num(zo, "stage", 3, &ok);
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(zo, "shards");
    int n = cJSON_GetArraySize(shards);
    if (!ok || s->zero_stage < 1 || !cJSON_IsArray(shards) || n < 1)
        return pl_errorf(PL_ERR_FORMAT, "%s: the \"zero\" object is malformed", s->mpath);
    s->z = pl_calloc((size_t)n, sizeof *s->z);
    if (!s->z)
        return pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", s->mpath);
    const cJSON *e;
    cJSON_ArrayForEach(e, shards)
    {
        zshard *z = &s->z[s->nz++];
        const int has = cJSON_HasObjectItem(e, "tp_rank");
        z->tp = has ? (int)num(e, "tp_rank", RANK_MAX, &ok) : 0;
        z->pp = has ? (int)num(e, "pp_rank", RANK_MAX, &ok) : 0;
        z->lo = num(e, "offset", COUNT_MAX, &ok);
        z->count = num(e, "count", COUNT_MAX, &ok);
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
        if (!ok || !cJSON_IsString(file) || z->tp >= s->tp || z->pp >= s->pp)
            return pl_errorf(PL_ERR_FORMAT, "%s: ZeRO shard %d is malformed (file, ranks within "
                             "TP %d x PP %d, offset, count)", s->mpath, s->nz - 1, s->tp, s->pp);
        pl_status st = pl_ckpt_rel_check(file->valuestring, "a ZeRO shard's \"file\"", s->mpath);
        if (st)
            return st;
        z->file = file->valuestring;
    }
    qsort(s->z, (size_t)s->nz, sizeof *s->z, zshard_order);
    s->zfirst = pl_calloc((size_t)s->tp * (size_t)s->pp + 1, sizeof *s->zfirst);
    if (!s->zfirst)
        return pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", s->mpath);
    for (int i = 0, r = 0; r <= s->tp * s->pp; r++) {
        while (i < s->nz && s->z[i].tp * s->pp + s->z[i].pp < r)
            i++;
        s->zfirst[r] = i;
    }
    /* each rank's shards tile its flat buffer from 0 (the tensors' offsets follow
     * from the manifest: a disagreement would read moments of the wrong tensors) */
    for (int r = 0; r < s->tp * s->pp; r++) {
        int64_t end = 0;
        for (int i = s->zfirst[r]; i < s->zfirst[r + 1] && s->z[i].lo == end; i++)
            end += s->z[i].count;
        if (end < s->numel[r] || (s->zfirst[r + 1] > s->zfirst[r] &&
                                  s->z[s->zfirst[r + 1] - 1].lo + s->z[s->zfirst[r + 1] - 1].count != end))
            return pl_errorf(PL_ERR_FORMAT, "%s: the ZeRO shards of TP rank %d, stage %d cover "
                             "[0, %lld) without gaps, but its tensors take %lld elements",
                             s->mpath, r / s->pp, r % s->pp, (long long)end,
                             (long long)s->numel[r]);
    }
    return PL_OK;
}

/* Saved TP rank t's registry: cfg registered at the saved TP size on one stage,
 * then ordered as the manifest's "tensors", each at its recorded stage and at
 * its offset in that stage's flat buffer (the save's registry arithmetic). */
static pl_status build_saved(pl_ckpt_source *s, int t, pl_registry *out)
{
    pl_model_config c = s->cfg;
    c.pp_chunks = 0;
    c.pp_first_layers = c.pp_last_layers = 0;
    c.pp_split = 0;
    pl_registry full;
    pl_registry_init(&full, s->tp, t, 0);
    pl_registry_init(out, s->tp, t, -1);
    int64_t *run = NULL;
    pl_status st = pl_model_register(&full, &c, 1);
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(s->root, "tensors");
    const int n = cJSON_GetArraySize(tensors);
    if (!st) {
        out->params = pl_calloc((size_t)(n > 0 ? n : 1), sizeof *out->params);
        run = pl_calloc((size_t)s->pp, sizeof *run);
        if (!out->params || !run)
            st = pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", s->mpath);
        out->cap = n;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, tensors)
    {
        if (st)
            break;
        const pl_param *q = pl_registry_find(&full, e->string);
        int tied = 0;
        /* a pipelined run's copies: the last stage's output layer (tied), the
         * decoder's first stage's embeddings (t5, bart) */
        const char *orig = pl_model_tied_original(e->string);
        if (!q && orig && (strcmp(e->string, "output_layer.weight") != 0 || !c.untie)) {
            q = pl_registry_find(&full, orig);
            tied = 1;
        }
        if (!q) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: tensor %s is not one of a %s model's", s->mpath,
                           e->string, pl_family_get(c.family)->name);
            break;
        }
        char what[PL_PARAM_NAME_MAX + 16];
        snprintf(what, sizeof what, "tensors.%s", e->string);
        double x;
        if ((st = pl_ckpt_jfield(e, what, "pipeline_stage", 0, s->pp - 1, 1, s->mpath, &x)))
            break;
        pl_param *p = &out->params[out->n++];
        *p = *q;
        snprintf(p->name, sizeof p->name, "%s", e->string);
        p->tied_copy = tied;
        p->stage = (int)x;
        p->offset = run[p->stage];
        run[p->stage] += (p->numel + PL_PARAM_ALIGN - 1) / PL_PARAM_ALIGN * PL_PARAM_ALIGN;
    }
    for (int p = 0; p < s->pp && run; p++)
        s->numel[t * s->pp + p] = run[p];
    pl_free(run);
    pl_registry_free(&full);
    return st;
}

pl_status pl_ckpt_source_open(const char *dir, int64_t it, pl_ckpt_source **out)
{
    *out = NULL;
    pl_ckpt_source *s = pl_calloc(1, sizeof *s);
    if (!s)
        return pl_errorf(PL_ERR_NOMEM, "out of memory opening checkpoint %s", dir);
    s->idfd = -1;
    int aside;
    pl_status st = pl_ckpt_iter_open(dir, it, &s->idfd, s->idir, sizeof s->idir, &aside);
    if (st)
        goto fail;
    snprintf(s->mpath, sizeof s->mpath, "%s/manifest.json", s->idir);
    PL_TRY(pl_ckpt_manifest_read(s->idfd, s->idir, it, &s->root, &s->cfg, &s->meta, &s->strings));
    s->tp = s->meta.tp;
    s->pp = s->meta.pp;
    s->meta.padded_vocab = s->cfg.padded_vocab;
    if (s->tp < 1 || s->pp < 1 || s->tp > RANK_MAX || s->pp > RANK_MAX) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: bad layout TP %d x PP %d", s->mpath, s->tp, s->pp);
        goto fail;
    }
    s->regs = pl_calloc((size_t)s->tp, sizeof *s->regs);
    s->files = pl_calloc((size_t)s->tp * (size_t)s->pp, sizeof *s->files);
    s->open = pl_calloc((size_t)s->tp * (size_t)s->pp, 1);
    s->numel = pl_calloc((size_t)s->tp * (size_t)s->pp, sizeof *s->numel);
    if (!s->regs || !s->files || !s->open || !s->numel) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory opening %s", s->mpath);
        goto fail;
    }
    for (int t = 0; t < s->tp; t++)
        PL_TRY(build_saved(s, t, &s->regs[t]));
    PL_TRY(read_zero(s));
    *out = s;
    return PL_OK;
fail:
    pl_ckpt_source_close(s);
    return st;
}

void pl_ckpt_source_close(pl_ckpt_source *s)
{
    if (!s)
        return;
    for (int i = 0; s->open && i < s->tp * s->pp; i++)
        if (s->open[i])
            pl_safetensors_close(&s->files[i]);
    for (int i = 0; i < s->nz; i++)
        if (s->z[i].open)
            pl_safetensors_close(&s->z[i].sf);
    for (int t = 0; s->regs && t < s->tp; t++)
        pl_registry_free(&s->regs[t]);
    pl_free(s->regs);
    pl_free(s->files);
    pl_free(s->open);
    pl_free(s->z);
    pl_free(s->zfirst);
    pl_free(s->numel);
    cJSON_Delete(s->root);
    pl_free(s->strings);
    if (s->idfd >= 0)
        close(s->idfd);
    pl_free(s);
}

const pl_model_config *pl_ckpt_source_config(const pl_ckpt_source *s) { return &s->cfg; }
const pl_ckpt_meta *pl_ckpt_source_meta(const pl_ckpt_source *s) { return &s->meta; }
const char *pl_ckpt_source_manifest_path(const pl_ckpt_source *s) { return s->mpath; }
int pl_ckpt_source_zero_stage(const pl_ckpt_source *s) { return s->zero_stage; }

char *pl_ckpt_source_take_strings(pl_ckpt_source *s)
{
    char *p = s->strings;
    s->strings = NULL;
    return p;
}

/* Saved TP rank t / stage p's model file, mapped on first use. */
static pl_status model_file(pl_ckpt_source *s, int t, int p, const pl_safetensors **out)
{
    const int i = t * s->pp + p;
    if (!s->open[i]) {
        char sub[64], rel[128];
        rank_dir(sub, sizeof sub, t, p, s->pp);
        snprintf(rel, sizeof rel, "%s/model_optim.safetensors", sub);
        pl_status st = open_verified(s, rel, &s->files[i]);
        if (st)
            return st;
        s->open[i] = 1;
    }
    *out = &s->files[i];
    return PL_OK;
}

static const char *const PREFIX[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};

/* A saved local tensor's bytes: F32, or BF16 (parameters written by plait
 * ckpt convert --bf16). */
typedef struct src_ptr {
    const uint8_t *p;
    int bf16;
} src_ptr;

/* Copies n elements from element e of src into out. */
static void src_copy(src_ptr src, int64_t e, int64_t n, float *out)
{
    if (!src.bf16) {
        memcpy(out, src.p + (size_t)e * sizeof(float), (size_t)n * sizeof(float));
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        const uint8_t *b = src.p + (size_t)(e + k) * 2;
        const uint32_t bits = (uint32_t)(b[0] | b[1] << 8) << 16;
        memcpy(&out[k], &bits, sizeof bits);
    }
}

/* The bytes of kind's saved local tensor sp of TP rank t in its model file
 * (stage 0 moments, or the parameters). */
static pl_status tensor_bytes(pl_ckpt_source *s, int t, const pl_param *sp, pl_ckpt_kind kind,
                              src_ptr *out)
{
    const pl_safetensors *sf;
    pl_status st = model_file(s, t, sp->stage, &sf);
    if (st)
        return st;
    char name[PL_ST_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", PREFIX[kind], sp->name);
    const pl_st_tensor *x = pl_safetensors_find(sf, name);
    char sub[64];
    rank_dir(sub, sizeof sub, t, sp->stage, s->pp);
    if (!x && kind != PL_CKPT_PARAMS)
        return pl_errorf(PL_ERR_FORMAT, "%s/%s/model_optim.safetensors: no optimizer state (%s "
                         "is missing): a weights-only checkpoint loads with --no-load-optim or "
                         "--finetune", s->idir, sub, name);
    if (!x)
        return pl_errorf(PL_ERR_FORMAT, "%s/%s/model_optim.safetensors: tensor %s is missing",
                         s->idir, sub, name);
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        n *= x->shape[d];
    const int bf16 = kind == PL_CKPT_PARAMS && strcmp(x->dtype, "BF16") == 0;
    if ((strcmp(x->dtype, "F32") != 0 && !bf16) || x->ndim != sp->ndim ||
        x->shape[0] != sp->local_shape[0] || n != sp->numel)
        return pl_errorf(PL_ERR_FORMAT, "%s/%s/model_optim.safetensors: tensor %s is %s of another "
                         "shape than the manifest's slice [%lld, %lld] F32", s->idir, sub, name,
                         x->dtype, (long long)sp->local_shape[0], (long long)sp->local_shape[1]);
    out->p = sf->data + x->begin;
    out->bf16 = bf16;
    return PL_OK;
}

/* Copies n elements from flat offset f of saved TP rank t / stage p's ZeRO
 * moments (kind) into out. */
static pl_status zero_read(pl_ckpt_source *s, int t, int p, pl_ckpt_kind kind, int64_t f,
                           int64_t n, float *out)
{
    static const char *names[3] = {"", "exp_avg", "exp_avg_sq"};
    int64_t done = 0;
    int i = s->zfirst[t * s->pp + p], end = s->zfirst[t * s->pp + p + 1];
    for (int lo = i, hi = end; lo < hi;) { /* the first shard ending past f */
        const int mid = lo + (hi - lo) / 2;
        if (s->z[mid].lo + s->z[mid].count <= f)
            lo = i = mid + 1;
        else
            hi = mid;
    }
    for (; i < end && done < n; i++) {
        zshard *z = &s->z[i];
        const int64_t a = f > z->lo ? f : z->lo;
        const int64_t b = f + n < z->lo + z->count ? f + n : z->lo + z->count;
        if (a >= b)
            continue;
        if (!z->open) {
            pl_status st = open_verified(s, z->file, &z->sf);
            if (st)
                return st;
            z->open = 1;
        }
        const pl_st_tensor *x = pl_safetensors_find(&z->sf, names[kind]);
        if (!x || strcmp(x->dtype, "F32") != 0 || x->shape[0] != z->count ||
            x->end - x->begin != (uint64_t)z->count * sizeof(float))
            return pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s missing or not F32 [%lld]", s->idir,
                             z->file, names[kind], (long long)z->count);
        memcpy(out + (a - f), z->sf.data + x->begin + (size_t)(a - z->lo) * sizeof(float),
               (size_t)(b - a) * sizeof(float));
        done += b - a;
    }
    if (done != n)
        return pl_errorf(PL_ERR_FORMAT, "%s: the ZeRO shards of TP rank %d, stage %d do not cover "
                         "flat elements [%lld, %lld)", s->mpath, t, p, (long long)f,
                         (long long)(f + n));
    return PL_OK;
}

/* The local row of saved slice sp that holds global row g, or -1. */
static int64_t saved_row(const pl_param *sp, int64_t g)
{
    const int64_t s0 = sp->slice_start[0], l0 = sp->local_shape[0];
    switch (sp->split) {
    case PL_TP_REPLICATED:
    case PL_TP_COLS:
        return g;
    case PL_TP_ROWS:
    case PL_TP_VOCAB:
        return g >= s0 && g < s0 + l0 ? g - s0 : -1;
    case PL_TP_ROWS_HALVES: {
        const int64_t h = l0 / 2, H = sp->shape[0] / 2;
        if (g >= s0 && g < s0 + h)
            return g - s0;
        return g >= H + s0 && g < H + s0 + h ? h + g - H - s0 : -1;
    }
    case PL_TP_QKV_SHARED_KV:
        if (g >= s0 && g < s0 + sp->q_rows)
            return g - s0;
        return g >= sp->kv_start && g < sp->kv_start + l0 - sp->q_rows
                   ? sp->q_rows + g - sp->kv_start
                   : -1;
    }
    return -1;
}

/* Index in the saved registries of the tensor that fills run tensor p. */
static int saved_index(const pl_ckpt_source *s, const pl_param *p)
{
    const pl_registry *r = &s->regs[0];
    for (int pass = 0; pass < 2; pass++) {
        const char *want = pass == 0 ? p->name : pl_model_tied_original(p->name);
        if (pass == 1 && (!p->tied_copy || !want))
            break;
        for (int i = 0; i < r->n; i++)
            if (strcmp(r->params[i].name, want) == 0)
                return i;
    }
    return -1;
}

/* Fills the part of run tensor p in the window [lo, hi) from saved tensor si. */
static pl_status fill_one(pl_ckpt_source *s, const pl_param *p, int si, pl_ckpt_kind kind,
                          float *dst, int64_t lo, int64_t hi, src_ptr *base)
{
    const pl_param *s0 = &s->regs[0].params[si];
    const int zero = kind != PL_CKPT_PARAMS && s->zero_stage > 0;
    if (s0->ndim != p->ndim || s0->shape[1] != p->shape[1] ||
        (s0->split != PL_TP_VOCAB && s0->shape[0] != p->shape[0]))
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s is [%lld, %lld] in the checkpoint, "
                         "[%lld, %lld] in this run", s->mpath, p->name, (long long)s0->shape[0],
                         (long long)s0->shape[1], (long long)p->shape[0], (long long)p->shape[1]);
    for (int t = 0; t < s->tp && !zero; t++) {
        pl_status st = tensor_bytes(s, t, &s->regs[t].params[si], kind, &base[t]);
        if (st)
            return st;
    }
    const int64_t rows = p->local_shape[0], cols = p->local_shape[1], C = p->shape[1];
    for (int64_t r = 0; r < rows; r++) {
        const int64_t f0 = p->offset + r * cols;
        const int64_t a = f0 > lo ? f0 : lo, b = f0 + cols < hi ? f0 + cols : hi;
        if (a >= b)
            continue;
        const int64_t g = pl_param_global_index(p, r, a - f0);
        const int64_t grow = g / C, gc0 = g % C, need = b - a;
        float *out = dst + (a - lo);
        if (grow >= s0->shape[0]) { /* a padding row the checkpoint lacks */
            memset(out, 0, (size_t)need * sizeof *out);
            continue;
        }
        int64_t got = 0;
        for (int t = 0; t < s->tp && got < need; t++) {
            const pl_param *sp = &s->regs[t].params[si];
            const int64_t lr = saved_row(sp, grow);
            if (lr < 0)
                continue;
            const int64_t sc0 = sp->split == PL_TP_COLS ? sp->slice_start[1] : 0;
            const int64_t x0 = gc0 > sc0 ? gc0 : sc0;
            const int64_t x1 = gc0 + need < sc0 + sp->local_shape[1] ? gc0 + need
                                                                     : sc0 + sp->local_shape[1];
            if (x0 >= x1)
                continue;
            const int64_t e = lr * sp->local_shape[1] + (x0 - sc0);
            if (zero) {
                pl_status st = zero_read(s, t, sp->stage, kind, sp->offset + e, x1 - x0,
                                         out + (x0 - gc0));
                if (st)
                    return st;
            } else {
                src_copy(base[t], e, x1 - x0, out + (x0 - gc0));
            }
            got += x1 - x0;
        }
        if (got != need)
            return pl_errorf(PL_ERR_FORMAT, "%s: no saved slice of %s holds global row %lld "
                             "(columns %lld..%lld)", s->mpath, p->name, (long long)grow,
                             (long long)gc0, (long long)(gc0 + need - 1));
    }
    return PL_OK;
}

pl_status pl_ckpt_source_fill(pl_ckpt_source *s, const pl_registry *reg, pl_ckpt_kind kind,
                              float *dst, int64_t lo, int64_t hi)
{
    src_ptr *base = pl_calloc((size_t)s->tp, sizeof *base);
    if (!base)
        return pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", s->mpath);
    pl_status st = PL_OK;
    for (int i = 0; i < reg->n && !st; i++) {
        const pl_param *p = &reg->params[i];
        if (p->offset < 0 || p->offset + p->numel <= lo || p->offset >= hi)
            continue;
        const int si = saved_index(s, p);
        if (si < 0)
            st = pl_errorf(PL_ERR_FORMAT, "%s: the checkpoint has no tensor %s (written by "
                           "another model family or configuration?)", s->mpath, p->name);
        else
            st = fill_one(s, p, si, kind, dst, lo, hi, base);
    }
    pl_free(base);
    return st;
}

const cJSON *pl_ckpt_source_manifest(const pl_ckpt_source *s) { return s->root; }

pl_status pl_ckpt_source_dtype(pl_ckpt_source *s, const char *name, const char **dtype)
{
    const pl_registry *r = &s->regs[0];
    for (int i = 0; i < r->n; i++) {
        if (strcmp(r->params[i].name, name) != 0)
            continue;
        const pl_safetensors *sf;
        pl_status st = model_file(s, 0, r->params[i].stage, &sf);
        if (st)
            return st;
        const pl_st_tensor *x = pl_safetensors_find(sf, name);
        if (!x)
            return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s is in the manifest, not in its file",
                             s->mpath, name);
        *dtype = x->dtype;
        return PL_OK;
    }
    return pl_errorf(PL_ERR_ARG, "%s: no tensor %s", s->mpath, name);
}

int pl_ckpt_source_has_moments(pl_ckpt_source *s)
{
    if (s->zero_stage > 0)
        return 1;
    const pl_safetensors *sf;
    if (s->regs[0].n < 1 || model_file(s, 0, s->regs[0].params[0].stage, &sf))
        return 0;
    char name[PL_ST_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", PREFIX[1], s->regs[0].params[0].name);
    return pl_safetensors_find(sf, name) != NULL;
}

pl_status pl_ckpt_source_verify(pl_ckpt_source *s, const char *rel, int64_t *bytes)
{
    pl_status st = pl_ckpt_rel_check(rel, "a \"files\" entry", s->mpath);
    if (st)
        return st;
    pl_safetensors sf;
    if ((st = open_verified(s, rel, &sf)))
        return st;
    *bytes = (int64_t)sf.map.size;
    pl_safetensors_close(&sf);
    return PL_OK;
}
