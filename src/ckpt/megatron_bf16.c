/* DeepSpeed's BF16_Optimizer shards -> fp32 weights (megatron_internal.h).
 *
 * DeepSpeed (deepspeed/runtime/engine.py) uses BF16_Optimizer with bf16 weights and fp32
 * gradient accumulation under ZeRO stage 1 (or 0 with pipeline parallelism); it saves, per
 * DP rank D of model-parallel rank TT (the bf16_ prefix: engine._get_zero_ckpt_name),
 *
 *   global_stepN/bf16_zero_pp_rank_D_mp_rank_TT_optim_states.pt
 *     optimizer_state_dict (deepspeed/runtime/bf16_optimizer.py state_dict): no zero_stage;
 *       single_partition_of_fp32_groups  per param group the rank's flat fp32 partition: the
 *                                        group's bf16 parameters flattened back to back,
 *                                        padded to a multiple of 2 x DP, split into DP equal
 *                                        partitions (the padding left in the last one)
 *       group_paddings                   per group that padding (0 but on the last rank)
 *       partition_count                  per group the DP size
 *       param_slice_mappings             per group an OrderedDict: each parameter that
 *                                        overlaps the partition -> fragment_address(numel,
 *                                        start): its piece, start within the partition
 *
 * A group's partitions concatenated over the ranks are its parameters back to back, then
 * the padding; the mappings, read in rank order, name the parameters in that order, and
 * each parameter's pieces must follow one another (a piece that is not the parameter's last
 * ends its partition, the next starts the next one) and the parameters one another. The
 * model states (mp_rank_TT_model_states.pt, DP rank 0's) give the shapes: their module's
 * tensor of each name (bf16 copies), whose elements must be the parameter's. Each parameter
 * is then placed as the ZeRO import places its own.
 *
 * DeepSpeed's pipeline engine (Megatron-DeepSpeed's GPTModelPipe, module None, layer files):
 * each stage p has its own optimizer, whose shards carry the pipeline grid's model-parallel
 * rank p x TP + t (deepspeed/runtime/pipe/topology.py: ds_model_rank, the rank's index among
 * those of its data-parallel index, axes pipe, data, model) and PipelineModule's parameter
 * names: "N.<name>" (layer list entry N) and "tied_modules.embed.<name>" (the tied
 * EmbeddingPipe, on the first and the last stage: the first's read). They are mapped as the
 * layer files' keys (megatron_pipe.c) and shaped as plait's slices, which the layer files,
 * read before, were checked to match. Not read: the Adam moments (base_optimizer_state),
 * groups of different partition counts (experts). */
#include "ckpt/megatron_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>

enum { BF_FILE = 4200 };

static int get_int(const pl_pk *x, int64_t *v)
{
    if (!x || x->kind != PL_PK_INT)
        return 0;
    *v = x->i;
    return 1;
}

static const pl_pk *osd_list(const pl_pt *f, const char *key)
{
    const pl_pk *x = pl_pk_get(pl_pk_get(pl_pt_root(f), "optimizer_state_dict"), key);
    return x && x->kind == PL_PK_LIST ? x : NULL;
}

/* A shard's DP size (partition_count: every group's the same) and group count, checked. */
static pl_status header(const pl_pt *f, int64_t *dp, int64_t *groups)
{
    const pl_pk *pc = osd_list(f, "partition_count"), *gs = osd_list(f, "single_partition_of_fp32_groups");
    const pl_pk *pad = osd_list(f, "group_paddings"), *map = osd_list(f, "param_slice_mappings");
    if (!pc || !gs || !pad || !map || pc->n < 1 || gs->n != pc->n || pad->n != pc->n ||
        map->n != pc->n)
        return pl_errorf(PL_ERR_FORMAT, "%s: expected BF16_Optimizer's optimizer_state_dict: "
                         "partition_count, single_partition_of_fp32_groups, group_paddings and "
                         "param_slice_mappings, one per param group", f->what);
    for (int64_t i = 0; i < pc->n; i++) {
        int64_t v;
        if (!get_int(pc->v[i], &v) || v < 1 || v > 65536 || (i > 0 && v != *dp))
            return pl_errorf(PL_ERR_FORMAT, "%s: partition_count[%lld] is not the DP size of the "
                             "other groups (groups of experts are not read)", f->what, (long long)i);
        *dp = v;
        const pl_pk *x = gs->v[i];
        if (x->kind != PL_PK_TENSOR || x->ndim != 1 || map->v[i]->kind != PL_PK_DICT)
            return pl_errorf(PL_ERR_FORMAT, "%s: group %lld: expected a flat fp32 partition and a "
                             "dict of fragment addresses", f->what, (long long)i);
    }
    *groups = pc->n;
    return PL_OK;
}

/* name's tensor in the module state dict m (flat keys or nested dicts), or NULL. */
static const pl_pk *module_tensor(const pl_pk *m, const char *name, int depth)
{
    for (int64_t k = 0; m && m->kind == PL_PK_DICT && depth < 16 && k + 1 < m->n; k += 2) {
        const pl_pk *key = m->v[k], *val = m->v[k + 1];
        if (key->kind != PL_PK_STR)
            continue;
        const size_t n = strlen(key->s);
        if (!strcmp(name, key->s) && val->kind == PL_PK_TENSOR)
            return val;
        if (val->kind == PL_PK_DICT && !strncmp(name, key->s, n) && name[n] == '.') {
            const pl_pk *t = module_tensor(val, name + n + 1, depth + 1);
            if (t)
                return t;
        }
    }
    return NULL;
}

/* Where the parameters' shapes and Megatron names come from: the model states' module
 * (DeepSpeed's engine), or (module NULL) DeepSpeed's pipeline engine's parameter names, shaped
 * as plait's slice of them (the layer files, read before, were checked to be so shaped). */
typedef struct bf_src {
    const pl_pk *module;
    const char *states; /* the model states file, named in errors */
    const pl_model_config *cfg;
    int stage;
} bf_src;

/* Parameter name, elements [start, start + numel) of the group (storage), into r. */
static pl_status take(pl_mg_rank *r, const pl_pt *f, pl_pk *storage, const bf_src *src,
                      const char *name, int64_t start, int64_t numel, const char *what)
{
    int64_t dims[2 * PL_PK_MAX_DIMS];
    char legacy[600], pname[600];
    pl_pk t = {.kind = PL_PK_TENSOR, .storage = storage, .dtype = "F32", .shape = dims,
               .stride = dims + PL_PK_MAX_DIMS, .i = start};
    if (src->module) {
        const pl_pk *mt = module_tensor(src->module, name, 0);
        if (!mt || mt->ndim > PL_PK_MAX_DIMS)
            return pl_errorf(PL_ERR_FORMAT, "%s: no tensor %s in %s's module, which would give its "
                             "shape", what, name, src->states);
        t.ndim = mt->ndim;
        memcpy(dims, mt->shape, (size_t)t.ndim * sizeof *dims);
        snprintf(legacy, sizeof legacy, "%s", name);
    } else {
        if (src->stage > 0 && !strncmp(name, "tied_modules.", 13))
            return PL_OK; /* the last stage's copy of the tied embedding: the first stage's read */
        const pl_param *p = NULL;
        if (pl_mg_pipe_legacy_name(name, src->cfg, legacy, sizeof legacy) &&
            pl_mg_plait_name(legacy, r->l0, r->nl, pname, sizeof pname))
            p = pl_registry_find(&r->reg, pname);
        if (!p || p->offset < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s is not a parameter of GPTModelPipe's layers "
                             "the args describe", what, name);
        t.ndim = p->ndim;
        memcpy(dims, p->local_shape, (size_t)t.ndim * sizeof *dims);
    }
    int64_t count = 1;
    for (int e = t.ndim - 1; e >= 0; e--) {
        t.stride[e] = count;
        count *= dims[e];
    }
    if (count != numel)
        return pl_errorf(PL_ERR_FORMAT, "%s: %s has %lld fp32 elements in the shards, its tensor "
                         "%lld", what, name, (long long)numel, (long long)count);
    return pl_mg_rank_tensor(r, f, legacy, &t);
}

/* Group i's parameters, read from buf (the ranks' partitions of psize elements concatenated). */
static pl_status place(pl_mg_rank *r, pl_pt *f, int64_t dp, int64_t i, int64_t psize, float *buf,
                       const bf_src *src, const char *what)
{
    pl_pk storage = {.kind = PL_PK_STORAGE, .dtype = "F32", .i = dp * psize,
                     .data = (const uint8_t *)buf};
    const char *open = NULL; /* the parameter whose pieces are being gathered */
    int64_t start = 0, numel = 0, end = 0; /* its elements; the placed ones' end */
    pl_status st = PL_OK;
    for (int64_t d = 0; d < dp && !st; d++) {
        const pl_pk *map = osd_list(&f[d], "param_slice_mappings")->v[i];
        for (int64_t k = 0; k + 1 < map->n && !st; k += 2) {
            const pl_pk *name = map->v[k], *fa = map->v[k + 1];
            int64_t n = 0, s = 0;
            if (name->kind != PL_PK_STR || !get_int(pl_pk_get(fa, "numel"), &n) ||
                !get_int(pl_pk_get(fa, "start"), &s) || n < 1 || s < 0 || s > psize - n)
                return pl_errorf(PL_ERR_FORMAT, "%s: param_slice_mappings[%lld] entry %lld is not "
                                 "a name and a fragment_address inside the %lld-element partition",
                                 f[d].what, (long long)i, (long long)k / 2, (long long)psize);
            if (open && !strcmp(open, name->s)) { /* its next piece: from this partition's start */
                if (s != 0 || start + numel != d * psize)
                    return pl_errorf(PL_ERR_FORMAT, "%s: %s's piece at %lld does not continue its "
                                     "piece on the previous rank", f[d].what, open, (long long)s);
                numel += n;
                continue;
            }
            if (open && !(st = take(r, &f[0], &storage, src, open, start, numel, what)))
                end = start + numel;
            if (!st && d * psize + s != end)
                return pl_errorf(PL_ERR_FORMAT, "%s: %s starts at element %lld of group %lld, the "
                                 "parameters before it end at %lld", f[d].what, name->s,
                                 (long long)(d * psize + s), (long long)i, (long long)end);
            open = name->s;
            start = d * psize + s;
            numel = n;
        }
    }
    if (!st && open && !(st = take(r, &f[0], &storage, src, open, start, numel, what)))
        end = start + numel;
    int64_t pad = 0;
    if (!st && (!get_int(osd_list(&f[dp - 1], "group_paddings")->v[i], &pad) ||
                end + pad != dp * psize))
        st = pl_errorf(PL_ERR_FORMAT, "%s: group %lld's %lld partitions of %lld elements hold "
                       "parameters of %lld and a padding of %lld: expected them to add up", what,
                       (long long)i, (long long)dp, (long long)psize, (long long)end, (long long)pad);
    return st;
}

static void shard_path(const char *idir, int d, int mp, char *out, size_t n)
{
    snprintf(out, n, "%.4000s/bf16_zero_pp_rank_%d_mp_rank_%02d_optim_states.pt", idir, d, mp);
}

/* Model-parallel rank mp's shards (every DP rank's) into r; *dp, *groups what they hold. */
static pl_status read_shards(pl_mg_rank *r, const char *idir, int mp, const bf_src *src,
                             int64_t *dp, int64_t *groups)
{
    char file[BF_FILE], what[BF_FILE + 64];
    snprintf(what, sizeof what, "%.4000s/bf16_zero_pp_rank_*_mp_rank_%02d_optim_states.pt", idir, mp);
    int64_t opened = 0;
    pl_pt first;
    memset(&first, 0, sizeof first);
    shard_path(idir, 0, mp, file, sizeof file);
    pl_status st = pl_file_exists(file) ? pl_pt_open(&first, file)
                 : pl_errorf(PL_ERR_FORMAT, "%s: missing beside DP rank 0's shards of model-"
                             "parallel rank 0", file);
    if (!st)
        st = header(&first, dp, groups);
    pl_pt_close(&first);
    if (st)
        return st;
    shard_path(idir, (int)*dp, mp, file, sizeof file);
    if (pl_file_exists(file))
        return pl_errorf(PL_ERR_FORMAT, "%s: present, but partition_count says %lld DP ranks", file,
                         (long long)*dp);
    pl_pt *f = pl_calloc((size_t)*dp, sizeof *f);
    float *buf = NULL;
    if (!f)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for %lld shard files", (long long)*dp);
    for (int64_t d = 0; d < *dp && !st; d++, opened++) {
        int64_t dd, gd;
        shard_path(idir, (int)d, mp, file, sizeof file);
        if (!pl_file_exists(file))
            st = pl_errorf(PL_ERR_FORMAT, "%s: missing: partition_count says %lld DP ranks", file,
                           (long long)*dp);
        else if (!(st = pl_pt_open(&f[d], file)) && !(st = header(&f[d], &dd, &gd)) &&
                 (dd != *dp || gd != *groups))
            st = pl_errorf(PL_ERR_FORMAT, "%s: %lld groups of partition_count %lld, rank 0's %lld "
                           "of %lld", file, (long long)gd, (long long)dd, (long long)*groups,
                           (long long)*dp);
    }
    for (int64_t i = 0; i < *groups && !st; i++) {
        const int64_t psize = pl_pk_numel(osd_list(&f[0], "single_partition_of_fp32_groups")->v[i]);
        for (int64_t d = 1; d < *dp && !st; d++)
            if (pl_pk_numel(osd_list(&f[d], "single_partition_of_fp32_groups")->v[i]) != psize)
                st = pl_errorf(PL_ERR_FORMAT, "%s: group %lld's partition is not rank 0's %lld "
                               "elements", f[d].what, (long long)i, (long long)psize);
        pl_free(buf);
        if (!st && !(buf = pl_malloc((size_t)(psize * *dp > 0 ? psize * *dp : 1) * sizeof *buf)))
            st = pl_errorf(PL_ERR_NOMEM, "out of memory for group %lld's %lld x %lld elements",
                           (long long)i, (long long)*dp, (long long)psize);
        for (int64_t d = 0; d < *dp && !st; d++)
            st = pl_pt_tensor_floats(&f[d], osd_list(&f[d], "single_partition_of_fp32_groups")->v[i],
                                     buf + d * psize, psize);
        if (!st)
            st = place(r, f, *dp, i, psize, buf, src, what);
    }
    pl_free(buf);
    for (int64_t d = 0; d < opened; d++)
        pl_pt_close(&f[d]);
    pl_free(f);
    return st;
}

pl_status pl_mg_bf16_read(const char *idir, const pl_pt *states, const pl_model_config *cfg,
                          int tp, int t, const pl_registry *g, float *global, int qkv_blocks)
{
    char what[BF_FILE + 64];
    snprintf(what, sizeof what, "%.4000s/bf16_zero_pp_rank_*_mp_rank_%02d_optim_states.pt", idir, t);
    const bf_src src = {pl_pk_get(pl_pt_root(states), "module"), states->what, cfg, 0};
    if (!src.module || src.module->kind != PL_PK_DICT)
        return pl_errorf(PL_ERR_FORMAT, "%s: no module state dict, whose tensors give the shapes "
                         "of BF16_Optimizer's fp32 weights", states->what);
    pl_mg_rank r;
    int64_t dp = 0, groups = 0;
    pl_status st = pl_mg_rank_begin(&r, cfg, tp, 1, t, 0, g, global);
    if (st)
        return st;
    r.qkv_blocks = qkv_blocks;
    r.label = "";
    st = pl_mg_rank_end(&r, what, read_shards(&r, idir, t, &src, &dp, &groups));
    if (!st)
        pl_log_info("TP rank %d: fp32 weights from BF16_Optimizer's shards (%lld DP partitions, "
                    "%lld groups) instead of %s's bf16 copies", t, (long long)dp, (long long)groups,
                    states->what);
    return st;
}

pl_status pl_mg_bf16_pipe_read(const char *idir, const pl_model_config *cfg, int tp, int pp,
                               const pl_registry *g, float *global, int qkv_blocks, int *used)
{
    char file[BF_FILE], what[BF_FILE + 64];
    pl_pt first;
    shard_path(idir, 0, 0, file, sizeof file);
    *used = pl_file_exists(file);
    if (!*used)
        return PL_OK;
    pl_status st = pl_pt_open(&first, file);
    const pl_pk *osd = st ? NULL : pl_pk_get(pl_pt_root(&first), "optimizer_state_dict");
    *used = osd && osd->kind == PL_PK_DICT && !pl_pk_get(osd, "zero_stage");
    pl_pt_close(&first);
    if (st || !*used)
        return st;
    shard_path(idir, 0, pp * tp, file, sizeof file);
    if (pl_file_exists(file))
        return pl_errorf(PL_ERR_FORMAT, "%s: present, but args say PP %d x TP %d model-parallel "
                         "ranks", file, pp, tp);
    for (int t = 0; t < tp && !st; t++) {
        pl_mg_rank r;
        int64_t dp = 0, groups = 0;
        if ((st = pl_mg_rank_begin(&r, cfg, tp, 1, t, 0, g, global)))
            break;
        r.qkv_blocks = qkv_blocks;
        r.label = "";
        for (int p = 0; p < pp && !st; p++) {
            const bf_src src = {NULL, NULL, cfg, p};
            st = read_shards(&r, idir, p * tp + t, &src, &dp, &groups);
        }
        snprintf(what, sizeof what, "%.4000s/bf16_zero_pp_rank_*_mp_rank_*_optim_states.pt of TP "
                 "rank %d", idir, t);
        st = pl_mg_rank_end(&r, what, st);
        if (!st)
            pl_log_info("TP rank %d: fp32 weights from BF16_Optimizer's shards of %d stages (%lld "
                        "DP partitions) instead of the layer files' bf16 copies", t, pp,
                        (long long)dp);
    }
    return st;
}
