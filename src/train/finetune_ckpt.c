/* plait finetune: a pretrained BERT checkpoint's weights into the task model
 * (train/finetune_internal.h), as Megatron's finetune loads
 * --pretrained-checkpoint: the parameters only (no optimizer, schedule, RNG or
 * iteration), the task head left as initialised with a warning when the
 * checkpoint lacks it. Any saved TP/PP layout loads into any run layout
 * (ckpt/source.h does the slicing). */
#include "train/finetune_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "ckpt/checkpoint.h"
#include "ckpt/manifest.h"
#include "ckpt/source.h"
#include "ckpt/tools.h"

#include <string.h>

/* A tensor of the task model that a pretraining checkpoint need not have. */
static int task_tensor(const char *name)
{
    return strncmp(name, "classification_head.", 20) == 0 ||
           strncmp(name, "classifier.mlp.", 15) == 0 || strncmp(name, "pooler.", 7) == 0;
}

/* reg with the task tensors the checkpoint lacks left out (offset -1): a copy of
 * the table, the names listed in skipped. */
static pl_status filtered(pl_ckpt_source *s, const pl_registry *reg, pl_registry *out,
                          char *skipped, size_t n)
{
    *out = *reg;
    out->params = pl_malloc((size_t)(reg->n > 0 ? reg->n : 1) * sizeof *out->params);
    if (!out->params)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    memcpy(out->params, reg->params, (size_t)reg->n * sizeof *out->params);
    size_t len = 0;
    skipped[0] = 0;
    for (int i = 0; i < reg->n; i++) {
        const char *dtype;
        pl_param *p = &out->params[i];
        if (!task_tensor(p->name) || pl_ckpt_source_dtype(s, p->name, &dtype) == PL_OK)
            continue;
        p->offset = -1;
        if (len < n)
            len += (size_t)snprintf(skipped + len, n - len, "%s%s", len ? ", " : "", p->name);
    }
    pl_error_clear();
    return PL_OK;
}

pl_status pl_ft_load_pretrained(pl_trainer *t, const char *path)
{
    char dir[4096], skipped[1024];
    int64_t it;
    pl_status st = pl_ckpt_resolve(path, -1, dir, sizeof dir, &it);
    if (st)
        return st;
    if (it == -1)
        return pl_errorf(PL_ERR_ARG, "%s: no checkpoint (no latest_checkpointed_iteration.txt) "
                         "to fine-tune from", path);
    pl_ckpt_source *s;
    if ((st = pl_ckpt_source_open(dir, it, &s)))
        return st;
    pl_registry reg = {0};
    float *params = t->params;
    /* the pretrained model: this run's flags with the pretraining heads */
    pl_model_config run = t->cfg;
    run.head = t->ft->base_head;
    run.padded_vocab = pl_ckpt_source_config(s)->padded_vocab;
    PL_TRY(pl_ckpt_config_match(pl_ckpt_source_config(s), &run, pl_ckpt_source_manifest_path(s)));
    PL_TRY(filtered(s, &t->reg, &reg, skipped, sizeof skipped));
    if (t->zero_stage == 3) { /* the whole buffer for the fill, then this rank's shard */
        params = pl_calloc((size_t)t->zero.padded, sizeof(float));
        if (!params) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory loading %s", dir);
            goto fail;
        }
        pl_registry_init_values(&t->reg, params, (uint64_t)t->a->seed);
    }
    PL_TRY(pl_ckpt_source_fill(s, &reg, PL_CKPT_PARAMS, params, 0, reg.numel));
    if (t->zero_stage == 3)
        memcpy(t->pshard, params + t->zero.lo, (size_t)t->zero.shard * sizeof(float));
    if (pl_train_is_root(t)) {
        const pl_ckpt_meta *m = pl_ckpt_source_meta(s);
        pl_log_info("loaded the pretrained weights of %s iteration %lld (saved as TP %d x PP %d) "
                    "into TP %d x PP %d x DP %d", dir, (long long)it, m->tp, m->pp,
                    t->grid.layout.tp, t->grid.layout.pp, t->grid.layout.dp);
        if (skipped[0])
            pl_log_warn("not in the checkpoint, initialised from --seed %lld: %s",
                        (long long)t->a->seed, skipped);
    }
fail:
    if (params != t->params)
        pl_free(params);
    pl_free(reg.params);
    pl_ckpt_source_close(s);
    return st;
}
