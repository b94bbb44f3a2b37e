/* Megatron-LM's --ckpt-format torch_dist checkpoints -> plait release checkpoints
 * (megatron_internal.h), read without Python.
 *
 * Megatron core's dist_checkpointing (serialization.save, strategies/torch.py,
 * filesystem_async.py) writes an iteration directory as a PyTorch Distributed Checkpoint:
 *
 *   iter_N/metadata.json      {"sharded_backend": "torch_dist", "sharded_backend_version": 1}
 *   iter_N/.metadata          pickle.dump of torch.distributed.checkpoint.metadata.Metadata:
 *     state_dict_metadata     key -> TensorStorageMetadata(properties, size: the global shape,
 *                             chunks: [ChunkStorageMetadata(offsets, sizes)]) or
 *                             BytesStorageMetadata() (a ShardedObject's pickled bytes)
 *     storage_data            MetadataIndex(fqn, offset: a chunk's offsets or None) ->
 *                             torch.distributed.checkpoint.filesystem._StorageInfo(relative_path,
 *                             offset, length[, transform_descriptors])
 *   iter_N/__R_K.distcp       global rank R's items back to back: each tensor chunk is a whole
 *                             torch.save archive of the chunk (read by ckpt/torch_file.h), each
 *                             ShardedObject the bytes of torch.save([object])
 *   iter_N/common.pt          (Megatron before the common state moved into the DCP checkpoint)
 *
 * The common state (args, checkpoint_version, iteration) is common.pt's dict or the
 * ShardedObject common_state (item common_state/shard_0_1). The keys are Megatron's
 * ShardedTensor keys, each a global tensor whatever the TP / PP layout that saved it: a
 * transformer layer's tensors stacked over layers as decoder.layers.<name> [L, ...] (the
 * layer axis sharded_offsets prepends), or decoder.layers.<l>.<name> with non-homogeneous
 * layers; TP slices are chunks at their global offsets; SwiGLU's linear_fc1 is [gate; up] (or
 * linear_fc1.weight_w / _v with singleton local shards); the vocabulary padded as
 * args.padded_vocab_size. Those global tensors are plait's, so each chunk is copied to its
 * place in the global model, and every element of every plait tensor must be written once.
 * Skipped: bytes items (_extra_state, rng_state, ...), optimizer.* tensors (the distributed
 * optimizer's state, fp32 master weights included: the model's own weights are read, in
 * their dtype). Refused naming the file and key: a backend other than torch_dist, a class or
 * global the pickle reader does not know, a relative_path that leaves the directory, an item
 * past its file's end, transform_descriptors (compressed items), a chunk whose archive is not
 * one tensor of its sizes, chunks outside or overlapping their tensor, a key plait has no place
 * for, a plait tensor no chunk writes. */
#include "ckpt/megatron_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "model/spec.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TD_PATH = 4096, TD_FILE = TD_PATH + 300, TD_NAME = 256 };

static const char MD[] = "torch.distributed.checkpoint.metadata.";

typedef struct td_item { /* one storage_data entry */
    const char *fqn;
    int64_t off[PL_PK_MAX_DIMS];
    int nd;      /* -1: a bytes item (offset None) */
    int file;
    uint64_t at, len;
} td_item;

typedef struct td_file {
    char name[TD_NAME];
    pl_mmap map;
    int mapped;
} td_file;

typedef struct td_ckpt {
    const char *dir;
    char what[TD_FILE];  /* DIR/.metadata */
    pl_mmap meta_map;
    pl_pickle *meta;
    const pl_pk *sdm;    /* state_dict_metadata */
    td_item *items;
    int64_t nitems;
    td_file *files;
    int nfiles;
    pl_pt common;
    int common_open;
} td_ckpt;

/* Whether o is an instance of module's class cls (a dataclass: NEWOBJ, then BUILD unless
 * its state is empty). */
static int is_class(const pl_pk *o, const char *module, const char *cls)
{
    const size_t ml = strlen(module);
    return o && o->kind == PL_PK_OBJECT && !strncmp(o->s, module, ml) && !strcmp(o->s + ml, cls) &&
           o->n == 2;
}

/* o's BUILD state (a dict) when o is an instance of module's class cls. */
static const pl_pk *instance(const pl_pk *o, const char *module, const char *cls)
{
    if (!is_class(o, module, cls) || !o->v[1] || o->v[1]->kind != PL_PK_DICT)
        return NULL;
    return o->v[1];
}

static int as_int(const pl_pk *x, int64_t *v)
{
    if (!x || x->kind != PL_PK_INT)
        return 0;
    *v = x->i;
    return 1;
}

static int cmp_item(const void *a, const void *b)
{
    const td_item *x = a, *y = b;
    const int c = strcmp(x->fqn, y->fqn);
    if (c || x->nd != y->nd)
        return c ? c : (x->nd < y->nd ? -1 : 1);
    for (int d = 0; d < x->nd; d++)
        if (x->off[d] != y->off[d])
            return x->off[d] < y->off[d] ? -1 : 1;
    return 0;
}

/* A relative_path confined to the directory: a plain file name. */
static int plain_name(const char *s)
{
    const size_t n = strlen(s);
    if (n == 0 || n >= TD_NAME || s[0] == '.')
        return 0;
    for (size_t k = 0; k < n; k++)
        if (s[k] == '/' || s[k] == '\\' || (unsigned char)s[k] < 0x20)
            return 0;
    return 1;
}

static int file_index(td_ckpt *c, const char *name)
{
    for (int k = 0; k < c->nfiles; k++)
        if (!strcmp(c->files[k].name, name))
            return k;
    return -1;
}

/* storage_data -> c->items (sorted, no duplicates), and the files they name. */
static pl_status take_items(td_ckpt *c, const pl_pk *sd)
{
    if (!sd || sd->kind != PL_PK_DICT)
        return pl_errorf(PL_ERR_FORMAT, "%s: Metadata.storage_data is not a dict of MetadataIndex "
                         "-> _StorageInfo", c->what);
    const int64_t n = sd->n / 2;
    if (!(c->items = pl_calloc((size_t)(n > 0 ? n : 1), sizeof *c->items)) ||
        !(c->files = pl_calloc((size_t)(n > 0 ? n : 1), sizeof *c->files)))
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld items", c->what, (long long)n);
    for (int64_t k = 0; k < n; k++) {
        const pl_pk *idx = instance(sd->v[2 * k], MD, "MetadataIndex");
        const pl_pk *info = instance(sd->v[2 * k + 1], "torch.distributed.checkpoint.filesystem.",
                                     "_StorageInfo");
        const pl_pk *fqn = pl_pk_get(idx, "fqn"), *off = pl_pk_get(idx, "offset");
        const pl_pk *path = pl_pk_get(info, "relative_path"), *tr = pl_pk_get(info, "transform_descriptors");
        td_item *it = &c->items[k];
        int64_t at, len;
        if (!fqn || fqn->kind != PL_PK_STR || !info)
            return pl_errorf(PL_ERR_FORMAT, "%s: storage_data entry %lld is not a MetadataIndex "
                             "(with its fqn) -> _StorageInfo", c->what, (long long)k);
        it->fqn = fqn->s;
        it->nd = -1;
        if (off && off->kind != PL_PK_NONE && !pl_mg_size_dims(off, it->off, &it->nd))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: MetadataIndex.offset is not a torch.Size",
                             c->what, it->fqn);
        if (!path || path->kind != PL_PK_STR || !as_int(pl_pk_get(info, "offset"), &at) ||
            !as_int(pl_pk_get(info, "length"), &len) || at < 0 || len < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: _StorageInfo without a relative_path, offset "
                             "and length >= 0", c->what, it->fqn);
        if (tr && tr->kind != PL_PK_NONE && !(tr->kind == PL_PK_LIST && tr->n == 0))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: _StorageInfo.transform_descriptors (a "
                             "compressed or transformed item), which the import does not read",
                             c->what, it->fqn);
        if (!plain_name(path->s))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: relative_path \"%.200s\" is not a file name "
                             "inside the checkpoint directory", c->what, it->fqn, path->s);
        it->at = (uint64_t)at;
        it->len = (uint64_t)len;
        if ((it->file = file_index(c, path->s)) < 0) {
            it->file = c->nfiles++;
            snprintf(c->files[it->file].name, TD_NAME, "%s", path->s);
        }
    }
    c->nitems = n;
    qsort(c->items, (size_t)n, sizeof *c->items, cmp_item);
    for (int64_t k = 1; k < n; k++)
        if (!cmp_item(&c->items[k - 1], &c->items[k]))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: two storage_data entries at the same offsets",
                             c->what, c->items[k].fqn);
    return PL_OK;
}

/* The .metadata pickle data[0..size) -> c (no file is opened). */
static pl_status parse_metadata(td_ckpt *c, const uint8_t *data, size_t size)
{
    pl_status st = pl_pickle_parse(data, size, c->what, &c->meta);
    if (st)
        return st;
    const pl_pk *md = instance(pl_pickle_root(c->meta), MD, "Metadata");
    c->sdm = pl_pk_get(md, "state_dict_metadata");
    if (!md || !c->sdm || c->sdm->kind != PL_PK_DICT)
        return pl_errorf(PL_ERR_FORMAT, "%s: not a torch.distributed.checkpoint Metadata with a "
                         "state_dict_metadata dict", c->what);
    return take_items(c, pl_pk_get(md, "storage_data"));
}

static void td_close(td_ckpt *c)
{
    for (int k = 0; k < c->nfiles; k++)
        if (c->files[k].mapped)
            pl_mmap_close(&c->files[k].map);
    if (c->common_open)
        pl_pt_close(&c->common);
    pl_pickle_free(c->meta);
    pl_mmap_close(&c->meta_map);
    pl_free(c->items);
    pl_free(c->files);
}

/* Maps every file the items name and checks each item lies inside its file. */
static pl_status map_files(td_ckpt *c)
{
    char path[TD_FILE];
    for (int k = 0; k < c->nfiles; k++) {
        snprintf(path, sizeof path, "%.4000s/%s", c->dir, c->files[k].name);
        pl_status st = pl_mmap_open(&c->files[k].map, path);
        if (st)
            return st;
        c->files[k].mapped = 1;
    }
    for (int64_t k = 0; k < c->nitems; k++) {
        const td_item *it = &c->items[k];
        const uint64_t size = c->files[it->file].map.size;
        if (it->at > size || it->len > size - it->at)
            return pl_errorf(PL_ERR_FORMAT, "%.4000s/%s: %s: bytes [%llu, %llu) past the file's "
                             "end (%llu bytes): a truncated or foreign file", c->dir,
                             c->files[it->file].name, it->fqn, (unsigned long long)it->at,
                             (unsigned long long)(it->at + it->len), (unsigned long long)size);
    }
    return PL_OK;
}

static const td_item *find_item(const td_ckpt *c, const char *fqn, const int64_t *off, int nd)
{
    td_item key = {.fqn = fqn, .nd = nd};
    if (nd > 0)
        memcpy(key.off, off, (size_t)nd * sizeof *off);
    return bsearch(&key, c->items, (size_t)c->nitems, sizeof key, cmp_item);
}

/* The common state dict: common.pt's, or the ShardedObject common_state's ([dict]). */
static pl_status open_common(td_ckpt *c, const pl_pk **root)
{
    char path[TD_FILE];
    snprintf(path, sizeof path, "%.4000s/common.pt", c->dir);
    pl_status st;
    if (pl_file_exists(path)) {
        c->common_open = 1;
        if ((st = pl_pt_open(&c->common, path)))
            return st;
        *root = pl_pt_root(&c->common);
    } else {
        const td_item *it = find_item(c, "common_state/shard_0_1", NULL, -1);
        if (!it)
            return pl_errorf(PL_ERR_FORMAT, "%s: neither common.pt nor the item "
                             "common_state/shard_0_1 (Megatron's common state: args, iteration)",
                             c->what);
        snprintf(path, sizeof path, "%.4000s/%s: common_state/shard_0_1", c->dir,
                 c->files[it->file].name);
        c->common_open = 1;
        if ((st = pl_pt_parse(&c->common, c->files[it->file].map.data + it->at, it->len, path)))
            return st;
        const pl_pk *list = pl_pt_root(&c->common);
        *root = list && list->kind == PL_PK_LIST && list->n == 1 ? list->v[0] : NULL;
    }
    if (!*root || (*root)->kind != PL_PK_DICT)
        return pl_errorf(PL_ERR_FORMAT, "%s: the common state is not a dict", c->common.what);
    return PL_OK;
}

/* ---- placing chunks ---- */

typedef struct td_place {
    const td_ckpt *c;
    const pl_model_config *cfg;
    const pl_registry *g;
    float *global;
    unsigned char *seen; /* per element of global */
    float *buf;
    int64_t cap;
} td_place;

/* Megatron's key (at layer l when stacked) -> plait's tensor; half: the SwiGLU half a
 * linear_fc1 ..._w / _v key holds (-1: the whole tensor). */
static const pl_param *param_of(const td_place *pl, const char *key, int stacked, int64_t l,
                                int *half)
{
    char name[600], pname[600];
    const size_t n = strlen(key);
    *half = -1;
    if (n > 2 && key[n - 2] == '_' && (key[n - 1] == 'w' || key[n - 1] == 'v') &&
        (strstr(key, "linear_fc1.weight_") || strstr(key, "linear_fc1.bias_")))
        *half = key[n - 1] == 'v';
    const int len = (int)(*half >= 0 ? n - 2 : n);
    if (stacked)
        snprintf(name, sizeof name, "decoder.layers.%lld.%.*s", (long long)l, len - 15, key + 15);
    else
        snprintf(name, sizeof name, "%.*s", len, key);
    if (!pl_mg_plait_name(name, 0, pl->cfg->num_layers, pname, sizeof pname))
        return NULL;
    return pl_registry_find(pl->g, pname);
}

/* One chunk (offsets off, sizes sz over nd dims; stacked: dim 0 the layers) of key. */
static pl_status place_chunk(td_place *pl, const char *key, const int64_t *gsize, int nd,
                             int stacked, const int64_t *off, const int64_t *sz)
{
    const td_ckpt *c = pl->c;
    const td_item *it = find_item(c, key, off, nd);
    if (!it)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: no storage_data entry for its chunk at offset "
                         "[%lld, ...]", c->what, key, (long long)(nd ? off[0] : 0));
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        if (off[d] < 0 || sz[d] < 0 || off[d] > gsize[d] || sz[d] > gsize[d] - off[d])
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: a chunk outside the tensor's size (dim %d: "
                             "%lld + %lld of %lld)", c->what, key, d, (long long)off[d],
                             (long long)sz[d], (long long)gsize[d]);
        numel *= sz[d];
    }
    char what[TD_FILE];
    snprintf(what, sizeof what, "%.4000s/%s: %s", c->dir, c->files[it->file].name, key);
    pl_pt f;
    pl_status st = pl_pt_parse(&f, c->files[it->file].map.data + it->at, it->len, what);
    const pl_pk *t = st ? NULL : pl_pt_root(&f);
    int same = t && t->kind == PL_PK_TENSOR && t->ndim == nd;
    for (int d = 0; same && d < nd; d++)
        same = t->shape[d] == sz[d];
    if (!st && !same)
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected one tensor of the chunk's %d-dimensional "
                       "sizes", what, nd);
    if (!st && numel > pl->cap) {
        pl_free(pl->buf);
        if (!(pl->buf = pl_malloc((size_t)numel * sizeof *pl->buf)))
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory for %lld elements", what,
                           (long long)numel);
        pl->cap = pl->buf ? numel : 0;
    }
    if (!st)
        st = pl_pt_tensor_floats(&f, t, pl->buf, numel);
    pl_pt_close(&f);
    /* the chunk as [layers][rows][cols] (no layer axis: one "layer") */
    const int td = nd - stacked;
    const int64_t nl = stacked ? sz[0] : 1, rows = td > 0 ? sz[stacked] : 1,
                  cols = td > 1 ? sz[stacked + 1] : 1;
    const int64_t r0 = td > 0 ? off[stacked] : 0, c0 = td > 1 ? off[stacked + 1] : 0;
    for (int64_t l = 0; l < nl && !st; l++) {
        int half;
        const pl_param *p = param_of(pl, key, stacked, stacked ? off[0] + l : 0, &half);
        if (!p)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s%s has no place in the model args describe",
                             c->what, key, stacked ? " (a layer's, stacked)" : "");
        const int64_t prow = half >= 0 ? p->shape[0] / 2 : p->shape[0];
        const int64_t pcol = p->ndim == 2 ? p->shape[1] : 1;
        if (td != p->ndim || gsize[stacked] != prow || (td == 2 && gsize[stacked + 1] != pcol) ||
            (stacked && gsize[0] != pl->cfg->num_layers))
            return pl_errorf(PL_ERR_FORMAT, "%s: %s is [%s%lld, %lld]: plait's %s is [%lld, %lld]%s "
                             "(args: %lld layers)", c->what, key, stacked ? "layers, " : "",
                             (long long)gsize[stacked], (long long)(td > 1 ? gsize[stacked + 1] : 0),
                             p->name, (long long)prow, (long long)(p->ndim == 2 ? pcol : 0),
                             half >= 0 ? " / 2" : "", (long long)pl->cfg->num_layers);
        const int64_t base = p->offset + (half > 0 ? prow * pcol : 0);
        const float *src = pl->buf + l * rows * cols;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                const int64_t at = base + (r0 + i) * pcol + c0 + j;
                if (pl->seen[at])
                    return pl_errorf(PL_ERR_FORMAT, "%s: %s: chunks overlap at element [%lld, "
                                     "%lld]", c->what, key, (long long)(r0 + i), (long long)(c0 + j));
                pl->seen[at] = 1;
                pl->global[at] = src[i * cols + j];
            }
    }
    return st;
}

/* Every chunk of tensor key (its TensorStorageMetadata tsm). */
static pl_status place_tensor(td_place *pl, const char *key, const pl_pk *tsm)
{
    int64_t gsize[PL_PK_MAX_DIMS], off[PL_PK_MAX_DIMS], sz[PL_PK_MAX_DIMS];
    int nd, ond, snd;
    const pl_pk *chunks = pl_pk_get(tsm, "chunks");
    if (!pl_mg_size_dims(pl_pk_get(tsm, "size"), gsize, &nd) || !chunks ||
        chunks->kind != PL_PK_LIST)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s: TensorStorageMetadata without a size and chunks",
                         pl->c->what, key);
    int stacked = 0;
    if (!strncmp(key, "decoder.layers.", 15)) {
        const char *r = key + 15;
        while (*r >= '0' && *r <= '9')
            r++;
        stacked = r == key + 15 || *r != '.';
    }
    if (nd < 1 + stacked || nd > 2 + stacked)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s has %d dimensions: expected %d or %d", pl->c->what,
                         key, nd, 1 + stacked, 2 + stacked);
    for (int64_t k = 0; k < chunks->n; k++) {
        const pl_pk *ch = instance(chunks->v[k], MD, "ChunkStorageMetadata");
        if (!ch || !pl_mg_size_dims(pl_pk_get(ch, "offsets"), off, &ond) ||
            !pl_mg_size_dims(pl_pk_get(ch, "sizes"), sz, &snd) || ond != nd || snd != nd)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: chunk %lld is not a ChunkStorageMetadata of "
                             "%d-dimensional offsets and sizes", pl->c->what, key, (long long)k, nd);
        pl_status st = place_chunk(pl, key, gsize, nd, stacked, off, sz);
        if (st)
            return st;
    }
    return PL_OK;
}

/* Every model tensor of the checkpoint into the global model; then every element placed. */
static pl_status place_all(td_place *pl)
{
    const pl_pk *sdm = pl->c->sdm;
    for (int64_t k = 0; k + 1 < sdm->n; k += 2) {
        const pl_pk *key = sdm->v[k], *val = sdm->v[k + 1];
        if (key->kind != PL_PK_STR)
            return pl_errorf(PL_ERR_FORMAT, "%s: a state_dict_metadata key that is not a string",
                             pl->c->what);
        if (is_class(val, MD, "BytesStorageMetadata"))
            continue; /* ShardedObjects: common state, _extra_state, RNG states */
        const pl_pk *tsm = instance(val, MD, "TensorStorageMetadata");
        if (!tsm)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s: neither TensorStorageMetadata nor "
                             "BytesStorageMetadata", pl->c->what, key->s);
        if (!strncmp(key->s, "optimizer.", 10) || strstr(key->s, "._extra_state"))
            continue;
        pl_status st = place_tensor(pl, key->s, tsm);
        if (st)
            return st;
    }
    const pl_registry *g = pl->g;
    for (int i = 0; i < g->n; i++) {
        const pl_param *p = &g->params[i];
        int64_t missing = 0;
        for (int64_t e = 0; p->offset >= 0 && e < p->numel; e++)
            missing += !pl->seen[p->offset + e];
        if (missing == p->numel && missing > 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: no tensor for plait's %s", pl->c->what, p->name);
        if (missing)
            return pl_errorf(PL_ERR_FORMAT, "%s: the chunks leave %lld of plait's %s %lld elements "
                             "unwritten", pl->c->what, (long long)missing, p->name,
                             (long long)p->numel);
    }
    return PL_OK;
}

/* ---- entry points ---- */

int pl_mg_dist_is(const char *idir)
{
    char path[TD_FILE];
    snprintf(path, sizeof path, "%.4000s/metadata.json", idir);
    return pl_file_exists(path);
}

/* metadata.json's sharded_backend must be torch_dist. */
static pl_status check_backend(const char *idir)
{
    char path[TD_FILE], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%.4000s/metadata.json", idir);
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st)
        return st;
    pl_json_init();
    cJSON *j = cJSON_ParseWithLength(text, n);
    pl_free(text);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "sharded_backend");
    if (!cJSON_IsString(b))
        st = pl_errorf(PL_ERR_FORMAT, "%s: expected a JSON object with sharded_backend (Megatron's "
                       "dist_checkpointing config)", path);
    else if (strcmp(b->valuestring, "torch_dist"))
        st = pl_errorf(PL_ERR_FORMAT, "%s: sharded_backend %.100s: the import reads torch_dist "
                       "(PyTorch Distributed Checkpoint) only", path, b->valuestring);
    cJSON_Delete(j);
    return st;
}

pl_status pl_mg_dist_metadata_check(const uint8_t *data, size_t size, const char *what)
{
    td_ckpt c;
    memset(&c, 0, sizeof c);
    c.dir = ".";
    snprintf(c.what, sizeof c.what, "%s", what);
    pl_status st = parse_metadata(&c, data, size);
    for (int64_t k = 0; !st && k + 1 < c.sdm->n; k += 2) {
        int64_t gsize[PL_PK_MAX_DIMS], off[PL_PK_MAX_DIMS], sz[PL_PK_MAX_DIMS];
        int nd, ond, snd;
        const pl_pk *tsm = instance(c.sdm->v[k + 1], MD, "TensorStorageMetadata");
        const pl_pk *chunks = pl_pk_get(tsm, "chunks");
        if (!tsm || c.sdm->v[k]->kind != PL_PK_STR)
            continue;
        if (!pl_mg_size_dims(pl_pk_get(tsm, "size"), gsize, &nd) || !chunks ||
            chunks->kind != PL_PK_LIST)
            st = pl_errorf(PL_ERR_FORMAT, "%s: a tensor without a size and chunks", what);
        for (int64_t i = 0; !st && i < chunks->n; i++) {
            const pl_pk *ch = instance(chunks->v[i], MD, "ChunkStorageMetadata");
            if (!ch || !pl_mg_size_dims(pl_pk_get(ch, "offsets"), off, &ond) ||
                !pl_mg_size_dims(pl_pk_get(ch, "sizes"), sz, &snd) || ond != nd || snd != nd)
                st = pl_errorf(PL_ERR_FORMAT, "%s: a malformed chunk", what);
            else if (!find_item(&c, c.sdm->v[k]->s, off, nd))
                st = pl_errorf(PL_ERR_FORMAT, "%s: a chunk without storage", what);
        }
    }
    td_close(&c);
    return st;
}

pl_status pl_mg_dist_import(const char *idir, const char *out, const pl_megatron_import_opts *o)
{
    td_ckpt c;
    memset(&c, 0, sizeof c);
    c.dir = idir;
    snprintf(c.what, sizeof c.what, "%.4000s/.metadata", idir);
    pl_registry g;
    pl_registry_init(&g, 1, 0, 0);
    td_place pl = {.c = &c};
    pl_model_config cfg;
    const pl_pk *root = NULL;
    int tp = 1, pp = 1;
    pl_status st = check_backend(idir);
    if (!st && !(st = pl_mmap_open(&c.meta_map, c.what)))
        st = parse_metadata(&c, c.meta_map.data, c.meta_map.size);
    if (!st)
        st = map_files(&c);
    if (!st)
        st = open_common(&c, &root);
    pl_mg_args a = {root ? pl_pk_get(root, "args") : NULL, NULL, 0, c.common.what, 1};
    if (!st && (!a.ns || a.ns->kind != PL_PK_OBJECT))
        st = pl_errorf(PL_ERR_FORMAT, "%s: no \"args\" (argparse.Namespace) in the common state: "
                       "the model's sizes are unknown", c.common.what);
    if (!st)
        st = pl_mg_config(&a, root, &cfg, &tp, &pp);
    if (!st)
        st = pl_model_register(&g, &cfg, 1);
    const size_t n = (size_t)(g.numel > 0 ? g.numel : 1);
    if (!st && (!(pl.global = pl_calloc(n, sizeof(float))) || !(pl.seen = pl_calloc(n, 1))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's %lld parameters",
                       (long long)g.numel);
    pl.cfg = &cfg;
    pl.g = &g;
    if (!st)
        st = place_all(&pl);
    if (!st)
        pl_log_info("%s: %lld items in %d files, the model's tensors read (optimizer state "
                    "skipped)", c.what, (long long)c.nitems, c.nfiles);
    if (!st)
        st = pl_mg_import_finish(out, &a, &cfg, tp, pp, &g, pl.global, o, "Megatron torch_dist");
    pl_free(pl.buf);
    pl_free(pl.seen);
    pl_free(pl.global);
    pl_registry_free(&g);
    td_close(&c);
    return st;
}
