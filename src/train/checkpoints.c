/* `plait train`'s checkpoints: what a save writes (parameters, Adam moments or
 * ZeRO shards, the run's state) and what a load restores and checks
 * (ckpt/checkpoint.h holds the format). */
#include "train/trainer_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "ckpt/checkpoint.h"
#include "ckpt/publish.h"
#include "ckpt/tools.h"

#include <string.h>

static void fill_meta(const pl_trainer *t, pl_ckpt_meta *m)
{
    memset(m, 0, sizeof *m);
    m->iteration = t->iteration;
    m->consumed_train_samples = t->consumed_train;
    m->consumed_valid_samples = t->consumed_valid;
    m->optimizer_steps = t->opt_steps;
    m->lamb = t->a->lamb.on;
    m->schedule = t->sched;
    m->beta1 = t->a->adam_beta1;
    m->beta2 = t->a->adam_beta2;
    m->eps = t->a->adam_eps;
    m->weight_decay = t->a->weight_decay;
    m->seed = (uint64_t)t->a->seed;
    m->tp = t->grid.layout.tp;
    m->pp = t->grid.layout.pp;
    m->pp_split = m->pp > 1 ? (int)t->cfg.pp_split : 0;
    m->dp = t->grid.layout.dp;
    m->tokenizer_type = t->a->tokenizer_type;
    m->vocab_file = t->a->vocab_file;
    m->merge_file = t->a->merge_file;
    m->tokenizer_model = t->a->tokenizer_model;
    m->vocab_extra_ids = t->a->vocab_extra_ids;
    m->legacy_tokenizer = t->a->legacy_tokenizer;
    m->has_loss_scaler = t->a->fp16;
    m->loss_scale = t->scaler.scale;
    m->growth_tracker = t->scaler.growth_tracker;
    m->hysteresis_tracker = t->scaler.hysteresis_tracker;
    pl_train_mmb_meta(t, m);
}

static pl_ckpt_zero zero_shard(pl_trainer *t, int with_optim)
{
    pl_ckpt_zero z = {t->zero_stage, (int)t->dp, t->grid.dp_rank, t->zero.lo, t->zero.shard,
                      t->zero.padded, with_optim ? t->exp_avg : NULL,
                      with_optim ? t->exp_avg_sq : NULL};
    return z;
}

/* ZeRO-3 holds only its shard: the full parameters are gathered into a buffer
 * that lives for the save or load only. */
static pl_status full_params(pl_trainer *t, float **out)
{
    *out = t->params;
    if (t->zero_stage != 3)
        return PL_OK;
    *out = pl_calloc((size_t)t->zero.padded, sizeof(float));
    if (!*out)
        return pl_errorf(PL_ERR_NOMEM, "out of memory gathering the parameters for a checkpoint");
    return PL_OK;
}

pl_status pl_train_save(pl_trainer *t) { return pl_train_save_to(t, t->a->save); }

pl_status pl_train_async_prepare(pl_trainer *t)
{
    pl_ckpt_zero zs = zero_shard(t, 1);
    pl_ckpt_buffers buf = {&t->reg, t->params, t->zero_stage ? NULL : t->exp_avg,
                           t->zero_stage ? NULL : t->exp_avg_sq, t->zero_stage ? &zs : NULL, 0};
    return pl_train_async_reserve(t, &buf);
}

pl_status pl_train_save_to(pl_trainer *t, const char *dir)
{
    if (t->a->async_save) { /* one pending save at a time: the previous one ends first */
        pl_status st = pl_train_async_poll(t, 1);
        if (st)
            return st;
    }
    pl_ckpt_meta meta;
    fill_meta(t, &meta);
    pl_ckpt_zero zs = zero_shard(t, 1);
    float *params;
    pl_status st = full_params(t, &params);
    if (st)
        return st;
    if (t->zero_stage == 3) {
        memcpy(params + t->zero.lo, t->pshard, (size_t)t->zero.shard * sizeof(float));
        st = pl_zero_allgather_all(&t->zero, params);
    }
    pl_ckpt_buffers buf = {&t->reg, params, t->zero_stage ? NULL : t->exp_avg,
                           t->zero_stage ? NULL : t->exp_avg_sq, t->zero_stage ? &zs : NULL, 0};
    double t0 = pl_time_now();
    if (!st && t->a->async_save) {
        st = pl_train_async_begin(t, dir, &meta, &buf);
        if (params != t->params)
            pl_free(params);
        return st;
    }
    if (!st)
        st = pl_ckpt_save(dir, pl_grid_comm(&t->grid, PL_GRID_WORLD), t->grid.dp_rank,
                          &t->cfg, &meta, &buf);
    if (params != t->params)
        pl_free(params);
    if (!st && pl_train_is_root(t))
        pl_log_info(" saved checkpoint at iteration %lld to %s (%.2f s)", (long long)t->iteration,
                    dir, pl_time_now() - t0);
    if (!st && t->a->keep_last_n > 0) { /* rank 0 removes; every rank learns the outcome */
        int32_t bad = 0;
        if (pl_train_is_root(t))
            bad = pl_train_keep_last(dir, t->a->keep_last_n) != PL_OK;
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", pl_error_msg());
        if ((st = pl_comm_allreduce_i32(pl_grid_comm(&t->grid, PL_GRID_WORLD), &bad, 1,
                                        PL_COMM_MAX)))
            return st;
        if (bad)
            st = pl_train_is_root(t) ? pl_errorf(PL_ERR_IO, "%s", keep)
                                     : pl_error_echo(PL_ERR_IO, 0, "--keep-last-n failed on rank 0");
    }
    return st;
}

pl_status pl_train_keep_last(const char *dir, int64_t keep)
{
    int64_t removed;
    pl_status st = pl_ckpt_keep_last(dir, keep, &removed);
    if (!st && removed)
        pl_log_info(" removed %lld older checkpoint%s of %s (--keep-last-n %lld)",
                    (long long)removed, removed == 1 ? "" : "s", dir, (long long)keep);
    return st;
}

pl_status pl_train_load(pl_trainer *t)
{
    const pl_train_args *a = t->a;
    int64_t it;
    char dir[4096];
    const int step = pl_train_args_given(a, "--ckpt-step");
    if (step && a->ckpt_step < 0)
        return pl_errorf(PL_ERR_ARG, "--ckpt-step %lld: expected an iteration >= 0",
                         (long long)a->ckpt_step);
    pl_status st = pl_ckpt_resolve(a->load, step ? a->ckpt_step : -1, dir, sizeof dir, &it);
    if (st)
        return st;
    if (it == -1) {
        if (pl_train_is_root(t))
            pl_log_info("no checkpoint in %s: starting from scratch", a->load);
        return PL_OK;
    }
    const int release = it == PL_CKPT_RELEASE;
    int weights_only = a->finetune || a->no_load_optim || release;
    pl_ckpt_zero zs = zero_shard(t, !weights_only);
    float *params;
    if ((st = full_params(t, &params)))
        return st;
    pl_ckpt_buffers buf = {&t->reg, params, weights_only || t->zero_stage ? NULL : t->exp_avg,
                           weights_only || t->zero_stage ? NULL : t->exp_avg_sq,
                           t->zero_stage ? &zs : NULL, 0};
    pl_ckpt_meta meta;
    char *strings = NULL;
    st = pl_ckpt_load(dir, it, &t->cfg, &buf, &meta, &strings);
    if (!st && t->zero_stage == 3)
        memcpy(t->pshard, params + t->zero.lo, (size_t)t->zero.shard * sizeof(float));
    if (params != t->params)
        pl_free(params);
    pl_free(strings);
    if (st)
        return st;
    if (!weights_only && meta.lamb != a->lamb.on)
        return pl_errorf(PL_ERR_ARG, "%s: iteration %lld's optimizer state is %s's but this run's "
                         "optimizer is %s (resume with --no-load-optim to start the moments "
                         "afresh)", a->load, (long long)it, meta.lamb ? "Lamb" : "AdamW",
                         a->lamb.on ? "Lamb" : "AdamW");
    if (pl_train_is_root(t)) {
        pl_log_info("loaded checkpoint %s iteration %lld, saved as TP %d x PP %d x DP %d, into TP "
                    "%d x PP %d x DP %d (ZeRO %d)", dir, (long long)it, meta.tp, meta.pp, meta.dp,
                    t->grid.layout.tp, t->grid.layout.pp, t->grid.layout.dp, t->zero_stage);
        if (meta.padded_vocab != t->cfg.padded_vocab)
            pl_log_warn("the checkpoint's vocabulary is padded to %lld rows, this run's to %lld "
                        "(--make-vocab-size-divisible-by x TP): rows %s; the padding logits enter "
                        "the softmax, so the losses differ from a run that kept the padding",
                        (long long)meta.padded_vocab, (long long)t->cfg.padded_vocab,
                        meta.padded_vocab < t->cfg.padded_vocab ? "the checkpoint lacks are "
                        "zero-filled (weights and Adam moments)" : "past this run's are dropped");
    }
    if (release) { /* Megatron: a release checkpoint loads as --finetune */
        if (pl_train_is_root(t))
            pl_log_info("%s/release: a weights-only release checkpoint, starting at iteration 0 "
                        "(Megatron's rule)", dir);
        return PL_OK;
    }
    return pl_train_apply_loaded(t, &meta);
}
