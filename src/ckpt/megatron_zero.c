/* DeepSpeed ZeRO optimizer shards -> fp32 weights (megatron_internal.h).
 *
 * Follows DeepSpeed's deepspeed/utils/zero_to_fp32.py (v0.16.5, commit 38327e07):
 * each DP rank D of model-parallel rank TT saves
 *
 *   global_stepN/zero_pp_rank_D_mp_rank_TT_optim_states.pt
 *     optimizer_state_dict: zero_stage (ZeroStageEnum 1-3), partition_count (an int, or one
 *       per group: the largest is the DP size), and
 *       stage 1-2: single_partition_of_fp32_groups, one flat fp32 tensor per param group: the
 *         rank's contiguous partition, the alignment padding already cut from the last rank's;
 *       stage 3: fp32_flat_groups, flat fp32 tensors per sub-group holding, back to back, the
 *         rank's piece of each parameter (ceil(numel / DP) elements, the last rank's padded)
 *
 * and the model states (mp_rank_TT_model_states.pt; stage 3: zero_pp_rank_0_mp_rank_TT_...)
 * hold param_shapes: per group an OrderedDict of parameter name -> torch.Size in the order
 * flattened. Stage 1-2: the ranks' partitions of a group concatenate to its parameters back
 * to back; what is left over must vanish when both ends are rounded up to 2 x DP elements
 * (zero_to_fp32's check). Stage 3: each parameter is its pieces at the same offset of every
 * rank's groups (concatenated), cut to its numel; the pieces must use up every rank's
 * elements exactly. DeepSpeed names the files bf16_zero_pp_rank_D_... under bf16; those without
 * zero_stage are BF16_Optimizer's (megatron_bf16.c). Not read: frozen parameters
 * (frozen_param_shapes, refused), shared_params, the Adam moments. */
#include "ckpt/megatron_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>

enum { ZR_FILE = 4200 };

/* DeepSpeed names the shards bf16_zero_pp_rank_* whenever bf16 is on (engine.py
 * _get_zero_ckpt_name), ZeRO's and BF16_Optimizer's alike. */
static void shard_name(const char *idir, int bf16, int d, int t, char *out, size_t n)
{
    snprintf(out, n, "%.4000s/%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt", idir,
             bf16 ? "bf16_" : "", d, t);
}

/* An int, or DeepSpeed's ZeroStageEnum(n) (an object whose argument is n). */
static int pk_int(const pl_pk *x, int64_t *v)
{
    if (x && x->kind == PL_PK_OBJECT && x->n > 0 && x->v[0] && x->v[0]->kind == PL_PK_TUPLE &&
        x->v[0]->n == 1)
        x = x->v[0]->v[0];
    if (!x || x->kind != PL_PK_INT)
        return 0;
    *v = x->i;
    return 1;
}

int pl_mg_size_dims(const pl_pk *s, int64_t *dims, int *nd)
{
    if (!s || s->kind != PL_PK_OBJECT || strcmp(s->s, "torch.Size") || s->n < 1 || !s->v[0] ||
        s->v[0]->kind != PL_PK_TUPLE || s->v[0]->n != 1)
        return 0;
    const pl_pk *t = s->v[0]->v[0];
    if (!t || (t->kind != PL_PK_TUPLE && t->kind != PL_PK_LIST) || t->n > PL_PK_MAX_DIMS)
        return 0;
    *nd = (int)t->n;
    for (int k = 0; k < *nd; k++)
        if (!pk_int(t->v[k], &dims[k]) || dims[k] < 0 || dims[k] > ((int64_t)1 << 40))
            return 0;
    return 1;
}

/* zero_stage: an int, ZeroStageEnum(n), or getattr(ZeroStageEnum, "gradients") as Python >= 3.12
 * pickles an enum member. */
static int zero_stage(const pl_pk *x, int64_t *v)
{
    static const char *const names[] = {"disabled", "optimizer_states", "gradients", "weights"};
    static const char cls[] = "deepspeed.runtime.zero.config.ZeroStageEnum.";
    if (x && x->kind == PL_PK_OBJECT && !strncmp(x->s, cls, sizeof cls - 1)) {
        for (int k = 0; k < 4; k++)
            if (!strcmp(x->s + sizeof cls - 1, names[k])) {
                *v = k;
                return 1;
            }
        return 0;
    }
    return pk_int(x, v);
}

static const pl_pk *groups_of(const pl_pt *f, int64_t stage)
{
    const pl_pk *osd = pl_pk_get(pl_pt_root(f), "optimizer_state_dict");
    const pl_pk *gs = pl_pk_get(osd, stage == 3 ? "fp32_flat_groups"
                                                : "single_partition_of_fp32_groups");
    return gs && gs->kind == PL_PK_LIST ? gs : NULL;
}

/* A shard's stage (1-3) and DP size, checked. */
static pl_status header(const pl_pt *f, int64_t *dp, int64_t *stage_out)
{
    const pl_pk *osd = pl_pk_get(pl_pt_root(f), "optimizer_state_dict");
    int64_t stage;
    if (!osd || osd->kind != PL_PK_DICT || !zero_stage(pl_pk_get(osd, "zero_stage"), &stage))
        return pl_errorf(PL_ERR_FORMAT, "%s: no optimizer_state_dict.zero_stage: not a ZeRO "
                         "checkpoint (give --no-zero-fp32 to read the model_states' weights)",
                         f->what);
    if (stage < 1 || stage > 3)
        return pl_errorf(PL_ERR_FORMAT, "%s: zero_stage %lld: expected 1, 2 or 3", f->what,
                         (long long)stage);
    *stage_out = stage;
    const pl_pk *pc = pl_pk_get(osd, "partition_count");
    *dp = 0;
    if (pc && pc->kind == PL_PK_LIST) /* one per group (experts): the largest is the DP size */
        for (int64_t k = 0; k < pc->n; k++) {
            int64_t v;
            if (pk_int(pc->v[k], &v) && v > *dp)
                *dp = v;
        }
    else if (!pk_int(pc, dp))
        *dp = 0;
    if (*dp < 1 || *dp > 65536)
        return pl_errorf(PL_ERR_FORMAT, "%s: optimizer_state_dict.partition_count is not a DP "
                         "size in [1, 65536]", f->what);
    if (!groups_of(f, stage))
        return pl_errorf(PL_ERR_FORMAT, "%s: no optimizer_state_dict.%s list", f->what,
                         stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups");
    return PL_OK;
}

/* Group i's parameters, read from buf[0..avail) (the ranks' partitions concatenated). */
static pl_status place_group(pl_mg_rank *r, const pl_pt *f, const pl_pk *shapes, float *buf,
                             int64_t avail, int64_t dp, const char *what, int i)
{
    pl_pk storage = {.kind = PL_PK_STORAGE, .dtype = "F32", .i = avail,
                     .data = (const uint8_t *)buf};
    int64_t offset = 0, dims[2 * PL_PK_MAX_DIMS];
    for (int64_t k = 0; k + 1 < shapes->n; k += 2) {
        const pl_pk *name = shapes->v[k];
        pl_pk t = {.kind = PL_PK_TENSOR, .storage = &storage, .dtype = "F32", .shape = dims,
                   .stride = dims + PL_PK_MAX_DIMS};
        if (name->kind != PL_PK_STR || !pl_mg_size_dims(shapes->v[k + 1], dims, &t.ndim))
            return pl_errorf(PL_ERR_FORMAT, "%s: param_shapes[%d] entry %lld is not a name and a "
                             "torch.Size", f->what, i, (long long)k / 2);
        int64_t numel = 1;
        for (int d = t.ndim - 1; d >= 0; d--) {
            t.stride[d] = numel;
            numel *= dims[d];
        }
        if (numel > avail - offset)
            return pl_errorf(PL_ERR_FORMAT, "%s: param_shapes[%d] needs more than the %lld fp32 "
                             "elements of group %d's %lld partitions (at %s)", what, i,
                             (long long)avail, i, (long long)dp, name->s);
        t.i = offset;
        pl_status st = pl_mg_rank_tensor(r, f, name->s, &t);
        if (st)
            return st;
        offset += numel;
    }
    const int64_t align = 2 * dp;
    if ((offset + align - 1) / align != (avail + align - 1) / align)
        return pl_errorf(PL_ERR_FORMAT, "%s: group %d's %lld partitions hold %lld fp32 elements, "
                         "param_shapes %lld: expected them equal up to the alignment to %lld",
                         what, i, (long long)dp, (long long)avail, (long long)offset,
                         (long long)align);
    return PL_OK;
}

/* Stage 3: every rank's groups concatenated (buf: rank d's n elements at d n), each parameter
 * in param_shapes' order (groups merged) holding ceil(numel / dp) elements at the same offset
 * of every rank, its last rank padded; the offsets must use up the n exactly. */
static pl_status place_stage3(pl_mg_rank *r, const pl_pt *f, const pl_pk *ps, const float *buf,
                              int64_t n, int64_t dp, const char *what)
{
    int64_t offset = 0, dims[2 * PL_PK_MAX_DIMS], most = 1;
    for (int64_t i = 0; i < ps->n; i++)
        for (int64_t k = 0; ps->v[i]->kind == PL_PK_DICT && k + 1 < ps->v[i]->n; k += 2) {
            int nd;
            int64_t e = 1;
            if (pl_mg_size_dims(ps->v[i]->v[k + 1], dims, &nd))
                for (int d = 0; d < nd; d++)
                    e *= dims[d];
            most = e > most ? e : most;
        }
    const int64_t cap = (most + dp - 1) / dp * dp;
    float *g = pl_malloc((size_t)cap * sizeof *g);
    if (!g)
        return pl_errorf(PL_ERR_NOMEM, "out of memory for a parameter of %lld elements",
                         (long long)most);
    pl_pk storage = {.kind = PL_PK_STORAGE, .dtype = "F32", .i = cap, .data = (const uint8_t *)g};
    pl_status st = PL_OK;
    for (int64_t i = 0; i < ps->n && !st; i++) {
        const pl_pk *shapes = ps->v[i];
        if (shapes->kind != PL_PK_DICT)
            st = pl_errorf(PL_ERR_FORMAT, "%s: param_shapes[%lld] is not a dict", what,
                           (long long)i);
        for (int64_t k = 0; !st && k + 1 < shapes->n; k += 2) {
            const pl_pk *name = shapes->v[k];
            pl_pk t = {.kind = PL_PK_TENSOR, .storage = &storage, .dtype = "F32", .shape = dims,
                       .stride = dims + PL_PK_MAX_DIMS};
            if (name->kind != PL_PK_STR || !pl_mg_size_dims(shapes->v[k + 1], dims, &t.ndim)) {
                st = pl_errorf(PL_ERR_FORMAT, "%s: param_shapes[%lld] entry %lld is not a name "
                               "and a torch.Size", f->what, (long long)i, (long long)k / 2);
                break;
            }
            int64_t numel = 1;
            for (int d = t.ndim - 1; d >= 0; d--) {
                t.stride[d] = numel;
                numel *= dims[d];
            }
            const int64_t pn = (numel + dp - 1) / dp;
            if (pn > n - offset) {
                st = pl_errorf(PL_ERR_FORMAT, "%s: %s needs %lld fp32 elements per rank past the "
                               "%lld each rank's fp32_flat_groups hold", what, name->s,
                               (long long)(offset + pn), (long long)n);
                break;
            }
            for (int64_t d = 0; d < dp; d++)
                memcpy(g + d * pn, buf + d * n + offset, (size_t)pn * sizeof *g);
            st = pl_mg_rank_tensor(r, f, name->s, &t);
            offset += pn;
        }
    }
    if (!st && offset != n)
        st = pl_errorf(PL_ERR_FORMAT, "%s: each rank's fp32_flat_groups hold %lld elements, "
                       "param_shapes' partitions %lld: expected them equal", what, (long long)n,
                       (long long)offset);
    pl_free(g);
    return st;
}

pl_status pl_mg_zero_read(const char *idir, const pl_pt *states, const pl_model_config *cfg,
                          int tp, int t, const pl_registry *g, float *global, int qkv_blocks,
                          int *used)
{
    char file[ZR_FILE], what[ZR_FILE + 64];
    int bf16 = 0;
    shard_name(idir, 0, 0, t, file, sizeof file);
    if (!pl_file_exists(file))
        shard_name(idir, bf16 = 1, 0, t, file, sizeof file);
    *used = pl_file_exists(file);
    if (!*used)
        return PL_OK;
    snprintf(what, sizeof what, "%.4000s/%szero_pp_rank_*_mp_rank_%02d_optim_states.pt", idir,
             bf16 ? "bf16_" : "", t);
    if (bf16) { /* BF16_Optimizer's shards (no zero_stage: megatron_bf16.c) or ZeRO's */
        pl_pt first;
        pl_status st = pl_pt_open(&first, file);
        const pl_pk *osd = st ? NULL : pl_pk_get(pl_pt_root(&first), "optimizer_state_dict");
        const int opt = osd && osd->kind == PL_PK_DICT && !pl_pk_get(osd, "zero_stage");
        pl_pt_close(&first);
        if (st || opt)
            return st ? st : pl_mg_bf16_read(idir, states, cfg, tp, t, g, global, qkv_blocks);
    }
    const pl_pk *ps = pl_pk_get(pl_pt_root(states), "param_shapes");
    if (!ps || ps->kind != PL_PK_LIST)
        return pl_errorf(PL_ERR_FORMAT, "%s: no param_shapes list (which ZeRO's shards need): "
                         "expected DeepSpeed's engine's model states", states->what);
    const pl_pk *frozen = pl_pk_get(pl_pt_root(states), "frozen_param_shapes");
    if (frozen && frozen->kind == PL_PK_DICT && frozen->n > 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: frozen_param_shapes names %lld frozen parameters, "
                         "which the import does not take from ZeRO's shards (give "
                         "--no-zero-fp32 to read the model_states' weights)", states->what,
                         (long long)frozen->n / 2);
    pl_pt *f = NULL;
    float *buf = NULL;
    int64_t dp = 0, stage = 0, opened = 0;
    pl_status st = PL_OK;
    pl_pt first;
    if ((st = pl_pt_open(&first, file)) || (st = header(&first, &dp, &stage))) {
        pl_pt_close(&first);
        return st;
    }
    pl_pt_close(&first);
    shard_name(idir, bf16, (int)dp, t, file, sizeof file);
    if (pl_file_exists(file))
        return pl_errorf(PL_ERR_FORMAT, "%s: present, but partition_count says %lld DP ranks "
                         "(0..%lld)", file, (long long)dp, (long long)dp - 1);
    if (!(f = pl_calloc((size_t)dp, sizeof *f)))
        return pl_errorf(PL_ERR_NOMEM, "out of memory for %lld shard files", (long long)dp);
    for (int64_t d = 0; d < dp && !st; d++, opened++) {
        shard_name(idir, bf16, (int)d, t, file, sizeof file);
        if (!pl_file_exists(file)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: missing: partition_count says %lld DP ranks", file,
                           (long long)dp);
            break;
        }
        st = pl_pt_open(&f[d], file);
        int64_t dd, sd;
        if (!st && (header(&f[d], &dd, &sd) || dd != dp || sd != stage))
            st = pl_errorf(PL_ERR_FORMAT, "%s: not a ZeRO stage %lld shard of partition_count "
                           "%lld (as rank 0's)", file, (long long)stage, (long long)dp);
        const pl_pk *gs = st ? NULL : groups_of(&f[d], stage);
        if (!st && stage < 3 && gs->n != ps->n)
            st = pl_errorf(PL_ERR_FORMAT, "%s: %lld fp32 groups, %s's param_shapes %lld", file,
                           (long long)gs->n, states->what, (long long)ps->n);
        for (int64_t i = 0; !st && i < gs->n; i++)
            if (gs->v[i]->kind != PL_PK_TENSOR || gs->v[i]->ndim != 1)
                st = pl_errorf(PL_ERR_FORMAT, "%s: fp32 group %lld is not a flat tensor", file,
                               (long long)i);
    }
    pl_mg_rank r;
    int begun = 0;
    if (!st && !(st = pl_mg_rank_begin(&r, cfg, tp, 1, t, 0, g, global))) {
        begun = 1;
        r.qkv_blocks = qkv_blocks;
        r.label = "";
    }
    if (!st && stage == 3) { /* each rank's groups back to back, the ranks side by side */
        int64_t n = 0;
        for (int64_t d = 0; d < dp && !st; d++) {
            const pl_pk *gs = groups_of(&f[d], stage);
            int64_t nd = 0;
            for (int64_t i = 0; i < gs->n; i++)
                nd += pl_pk_numel(gs->v[i]);
            if (d == 0)
                n = nd;
            else if (nd != n)
                st = pl_errorf(PL_ERR_FORMAT, "%s: fp32_flat_groups of %lld elements, rank 0's "
                               "%lld: expected equal partitions", f[d].what, (long long)nd,
                               (long long)n);
        }
        if (!st && !(buf = pl_malloc((size_t)(n > 0 ? n * dp : 1) * sizeof *buf)))
            st = pl_errorf(PL_ERR_NOMEM, "out of memory for %lld x %lld fp32 elements",
                           (long long)dp, (long long)n);
        for (int64_t d = 0, at = 0; d < dp && !st; d++) {
            const pl_pk *gs = groups_of(&f[d], stage);
            for (int64_t i = 0; i < gs->n && !st; i++) {
                st = pl_pt_tensor_floats(&f[d], gs->v[i], buf + at, pl_pk_numel(gs->v[i]));
                at += pl_pk_numel(gs->v[i]);
            }
        }
        if (!st)
            st = place_stage3(&r, &f[0], ps, buf, n, dp, what);
    }
    for (int64_t i = 0; i < ps->n && !st && stage < 3; i++) {
        int64_t avail = 0;
        for (int64_t d = 0; d < dp; d++)
            avail += pl_pk_numel(groups_of(&f[d], stage)->v[i]);
        pl_free(buf);
        buf = NULL;
        if (!(buf = pl_malloc((size_t)(avail > 0 ? avail : 1) * sizeof *buf))) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory for group %lld's %lld fp32 elements",
                           (long long)i, (long long)avail);
            break;
        }
        for (int64_t d = 0, at = 0; d < dp && !st; d++) {
            const pl_pk *x = groups_of(&f[d], stage)->v[i];
            st = pl_pt_tensor_floats(&f[d], x, buf + at, pl_pk_numel(x));
            at += pl_pk_numel(x);
        }
        if (!st && ps->v[i]->kind != PL_PK_DICT)
            st = pl_errorf(PL_ERR_FORMAT, "%s: param_shapes[%lld] is not a dict", states->what,
                           (long long)i);
        if (!st)
            st = place_group(&r, &f[0], ps->v[i], buf, avail, dp, what, (int)i);
    }
    if (begun)
        st = pl_mg_rank_end(&r, what, st);
    if (!st)
        pl_log_info("TP rank %d: fp32 weights from ZeRO stage %lld shards (%lld DP partitions, "
                    "%lld groups) instead of %s's %s", t, (long long)stage, (long long)dp,
                    (long long)ps->n, states->what, stage == 3 ? "placeholders" : "copies");
    pl_free(buf);
    for (int64_t d = 0; d < opened; d++)
        pl_pt_close(&f[d]);
    pl_free(f);
    return st;
}
