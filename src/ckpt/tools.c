/* plait ckpt's library: describe, reshard, convert (ckpt/tools.h). */
#include "ckpt/tools.h"

#include "base/alloc.h"
#include "base/log.h"
#include "ckpt/files.h"
#include "ckpt/manifest.h"
#include "ckpt/source.h"
#include "model/spec.h"

#include <string.h>
#include <stdlib.h>

pl_status pl_ckpt_resolve(const char *path, int64_t step, char *dir, size_t n, int64_t *it)
{
    size_t len = strlen(path), b;
    while (len > 1 && path[len - 1] == '/')
        len--;
    for (b = len; b > 0 && path[b - 1] != '/'; b--)
        ;
    int is_iter = len - b == 12 && strncmp(path + b, "iter_", 5) == 0;
    for (size_t k = b + 5; is_iter && k < len; k++)
        is_iter = path[k] >= '0' && path[k] <= '9';
    const int is_release = len - b == 7 && strncmp(path + b, "release", 7) == 0;
    if (is_iter || is_release) {
        snprintf(dir, n, "%.*s", b == 0 ? 1 : (int)(b > 1 ? b - 1 : 1), b == 0 ? "." : path);
        *it = is_release ? PL_CKPT_RELEASE : strtoll(path + b + 5, NULL, 10);
        if (step >= 0 && step != *it)
            return pl_errorf(PL_ERR_ARG, "--load %s names iteration %lld%s but --ckpt-step is "
                             "%lld", path, (long long)(is_release ? 0 : *it),
                             is_release ? " (the release)" : "", (long long)step);
        return PL_OK;
    }
    snprintf(dir, n, "%s", path);
    if (step >= 0) {
        *it = step;
        return PL_OK;
    }
    return pl_ckpt_latest(path, it);
}

static int add_num(cJSON *o, const char *k, double v) { return cJSON_AddNumberToObject(o, k, v) != NULL; }

static pl_status describe_tensors(pl_ckpt_source *s, cJSON *root, int64_t *total)
{
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(pl_ckpt_source_manifest(s), "tensors");
    cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
    int ok = arr != NULL;
    const cJSON *e;
    *total = 0;
    cJSON_ArrayForEach(e, tensors)
    {
        if (!ok)
            break;
        const char *dtype;
        pl_status st = pl_ckpt_source_dtype(s, e->string, &dtype);
        if (st)
            return st;
        cJSON *t = cJSON_CreateObject();
        ok = t && cJSON_AddItemToArray(arr, t);
        int64_t numel = 1;
        const cJSON *d;
        cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(e, "shape")) numel *= (int64_t)d->valuedouble;
        *total += numel;
        ok = ok && cJSON_AddStringToObject(t, "name", e->string) &&
             cJSON_AddItemToObject(t, "shape",
                                   cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "shape"), 1)) &&
             cJSON_AddStringToObject(t, "dtype", dtype) &&
             cJSON_AddItemToObject(t, "tp_split", cJSON_Duplicate(
                                       cJSON_GetObjectItemCaseSensitive(e, "tp_split"), 1)) &&
             add_num(t, "pipeline_stage",
                     cJSON_GetObjectItemCaseSensitive(e, "pipeline_stage")->valuedouble) &&
             add_num(t, "numel", (double)numel);
    }
    return ok ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory describing the checkpoint");
}

static pl_status describe_files(pl_ckpt_source *s, cJSON *root, int verify)
{
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(pl_ckpt_source_manifest(s), "files");
    cJSON *arr = cJSON_AddArrayToObject(root, "files");
    int ok = arr != NULL;
    double total = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, files)
    {
        if (!ok)
            break;
        int64_t bytes = -1;
        if (verify) {
            pl_status st = pl_ckpt_source_verify(s, e->string, &bytes);
            if (st)
                return st;
            total += (double)bytes;
        }
        cJSON *f = cJSON_CreateObject();
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(e, "xxh64");
        ok = f && cJSON_AddItemToArray(arr, f) && cJSON_AddStringToObject(f, "path", e->string) &&
             cJSON_AddStringToObject(f, "xxh64", cJSON_IsString(h) ? h->valuestring : "") &&
             (!verify || (add_num(f, "bytes", (double)bytes) &&
                          cJSON_AddBoolToObject(f, "verified", 1)));
    }
    if (ok && verify)
        ok = add_num(root, "total_bytes", total);
    return ok ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory describing the checkpoint");
}

pl_status pl_ckpt_describe(const char *dir, int64_t it, int verify, cJSON **out)
{
    pl_ckpt_source *s;
    *out = NULL;
    pl_status st = pl_ckpt_source_open(dir, it, &s);
    if (st)
        return st;
    const pl_ckpt_meta *m = pl_ckpt_source_meta(s);
    const cJSON *man = pl_ckpt_source_manifest(s);
    cJSON *root = cJSON_CreateObject(), *lay = NULL, *state = NULL;
    int ok = root && cJSON_AddStringToObject(root, "directory", dir) &&
             (it == PL_CKPT_RELEASE ? cJSON_AddStringToObject(root, "iteration", "release") != NULL
                                    : add_num(root, "iteration", (double)it)) &&
             cJSON_AddStringToObject(root, "family",
                                     pl_family_get(pl_ckpt_source_config(s)->family)->name) &&
             (lay = cJSON_AddObjectToObject(root, "layout")) && add_num(lay, "tensor_model_parallel_size", m->tp) &&
             add_num(lay, "pipeline_model_parallel_size", m->pp) &&
             (!m->pp_split || add_num(lay, "pipeline_model_parallel_split_rank", m->pp_split)) &&
             add_num(lay, "data_parallel_size", m->dp) &&
             add_num(lay, "zero_stage", pl_ckpt_source_zero_stage(s)) &&
             cJSON_AddItemToObject(root, "model", cJSON_Duplicate(
                                       cJSON_GetObjectItemCaseSensitive(man, "model"), 1)) &&
             (state = cJSON_AddObjectToObject(root, "state")) &&
             add_num(state, "consumed_train_samples", (double)m->consumed_train_samples) &&
             add_num(state, "consumed_valid_samples", (double)m->consumed_valid_samples) &&
             add_num(state, "optimizer_steps", (double)m->optimizer_steps) &&
             add_num(state, "lr_schedule_samples", (double)m->schedule.num_steps) &&
             cJSON_AddBoolToObject(state, "optimizer_state", pl_ckpt_source_has_moments(s));
    if (!ok)
        st = pl_errorf(PL_ERR_NOMEM, "out of memory describing the checkpoint");
    int64_t numel = 0;
    if (!st)
        st = describe_tensors(s, root, &numel);
    if (!st && !add_num(root, "parameters", (double)numel))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory describing the checkpoint");
    if (!st)
        st = describe_files(s, root, verify);
    pl_ckpt_source_close(s);
    if (st)
        cJSON_Delete(root);
    else
        *out = root;
    return st;
}

/* One rank of the target layout: its registry, buffers filled from s, its file. */
static pl_status write_one(pl_ckpt_source *s, const pl_model_config *cfg, const char *tmp,
                           int tp, int t, int pp, int p, const pl_ckpt_rewrite *w)
{
    pl_registry reg;
    pl_registry_init(&reg, tp, t, p);
    float *buf[3] = {NULL, NULL, NULL};
    pl_status st = pl_model_register(&reg, cfg, pp);
    const int nk = w->weights_only ? 1 : 3;
    for (int k = 0; k < nk && !st; k++) {
        buf[k] = pl_calloc((size_t)(reg.numel > 0 ? reg.numel : 1), sizeof(float));
        if (!buf[k])
            st = pl_errorf(PL_ERR_NOMEM, "out of memory for TP rank %d, stage %d", t, p);
        else
            st = pl_ckpt_source_fill(s, &reg, (pl_ckpt_kind)k, buf[k], 0, reg.numel);
    }
    if (!st) {
        pl_ckpt_buffers b = {&reg, buf[0], buf[1], buf[2], NULL, w->bf16};
        st = pl_ckpt_write_rank(tmp, pp, &b);
    }
    for (int k = 0; k < 3; k++)
        pl_free(buf[k]);
    pl_registry_free(&reg);
    return st;
}

pl_status pl_ckpt_rewrite_to(const char *dir, int64_t it, const char *out,
                             const pl_ckpt_rewrite *w)
{
    if (w->bf16 && !w->weights_only)
        return pl_errorf(PL_ERR_ARG, "--bf16 writes weights only (Adam's moments stay fp32 in a "
                         "training checkpoint): add --weights-only");
    pl_ckpt_source *s;
    pl_status st = pl_ckpt_source_open(dir, it, &s);
    if (st)
        return st;
    pl_ckpt_meta meta = *pl_ckpt_source_meta(s);
    pl_model_config cfg = *pl_ckpt_source_config(s);
    const int tp = w->tp > 0 ? w->tp : meta.tp, pp = w->pp > 0 ? w->pp : meta.pp;
    cfg.padded_vocab = pl_model_padded_vocab(cfg.vocab_size, cfg.divisible_by, tp);
    cfg.pp_chunks = 0;
    cfg.pp_first_layers = cfg.pp_last_layers = 0;
    /* an encoder-decoder's split: given, or the saved one at the saved PP size */
    cfg.pp_split = pp > 1 ? (w->pp_split > 0 ? w->pp_split : pp == meta.pp ? meta.pp_split : 0) : 0;
    if (!w->weights_only && !pl_ckpt_source_has_moments(s)) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: a weights-only checkpoint: add --weights-only",
                       pl_ckpt_source_manifest_path(s));
        goto done;
    }
    if (cfg.padded_vocab != meta.padded_vocab)
        pl_log_warn("the vocabulary is padded to %lld rows at TP %d (%lld saved): rows %s",
                    (long long)cfg.padded_vocab, tp, (long long)meta.padded_vocab,
                    cfg.padded_vocab > meta.padded_vocab ? "added are zero-filled"
                                                         : "past the new padding are dropped");
    meta.tp = tp;
    meta.pp = pp;
    meta.pp_split = (int)cfg.pp_split;
    meta.dp = 1;
    meta.iteration = w->release ? 0 : it;
    char tmp[4200];
    const int64_t out_it = w->release ? PL_CKPT_RELEASE : it;
    if ((st = pl_ckpt_write_begin(out, out_it, tmp, sizeof tmp)))
        goto done;
    for (int t = 0; t < tp && !st; t++)
        for (int p = 0; p < pp && !st; p++)
            st = write_one(s, &cfg, tmp, tp, t, pp, p, w);
    pl_registry reg;
    pl_registry_init(&reg, tp, 0, 0);
    if (!st)
        st = pl_model_register(&reg, &cfg, pp);
    if (!st)
        st = pl_ckpt_write_finish(out, tmp, &cfg, &meta, &reg, out_it);
    pl_registry_free(&reg);
done:
    pl_ckpt_source_close(s);
    return st;
}
