/* DeepSpeed JSON onto Megatron-style flags (DeepSpeed's docs/_pages/config-json.md,
 * runtime/config.py _batch_assertion, runtime/lr_schedules.py). */
#include "train/ds_config.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

typedef struct ds_ctx {
    pl_train_args *a;
    int nvals;
} ds_ctx;

/* Sets flag to value (from key of the config) unless it was given otherwise. */
static pl_status ds_set(ds_ctx *c, const char *flag, double value, const char *key)
{
    pl_train_args *a = c->a;
    int slot = strcmp(flag, "--zero-stage") == 0 ? PL_DS_STAGE : ++c->nvals;
    if (slot >= (int)(sizeof a->ds_values / sizeof *a->ds_values))
        return pl_errorf(PL_ERR_INTERNAL, "too many DeepSpeed values");
    char *text = a->ds_values[slot];
    snprintf(text, sizeof a->ds_values[0], "%.17g", value);
    if (pl_train_args_given(a, flag)) {
        int i = pl_options_index(&pl_train_cmd, flag);
        const pl_option *o = &pl_train_cmd.options[i];
        double cur = o->type == PL_OPT_INT ? (double)*(const int64_t *)((const char *)a + o->offset)
                                           : *(const double *)((const char *)a + o->offset);
        if (cur != value)
            return pl_errorf(PL_ERR_ARG, "plait train: %s %g (command line or --config) conflicts "
                             "with %s %g in --deepspeed_config %s", flag, cur, key, value,
                             a->deepspeed_config);
        if (slot != PL_DS_STAGE)
            text[0] = 0;
        return PL_OK;
    }
    const char *vals[1] = {text};
    return pl_options_set(&pl_train_cmd, a, flag, vals, 1, a->given);
}

static int number(const cJSON *o, const char *key, double *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x))
        return 0;
    *v = x->valuedouble;
    return 1;
}

static pl_status batch_key(pl_train_args *a, const cJSON *root, const char *key, int64_t *out)
{
    double v;
    if (!cJSON_GetObjectItemCaseSensitive(root, key))
        return PL_OK;
    if (!number(root, key, &v) || v <= 0 || v != floor(v))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be a positive integer",
                         a->deepspeed_config, key);
    *out = (int64_t)v;
    return PL_OK;
}

static pl_status optimizer(ds_ctx *c, const cJSON *opt)
{
    const char *cfg = c->a->deepspeed_config;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(opt, "type");
    if (!cJSON_IsString(type) || (strcmp(type->valuestring, "AdamW") != 0 &&
                                  strcmp(type->valuestring, "Adam") != 0))
        return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: optimizer type \"%s\" is not "
                         "supported (AdamW only)", cfg,
                         cJSON_IsString(type) ? type->valuestring : "?");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(opt, "params");
    double v;
    pl_status st = PL_OK;
    if (number(p, "lr", &v))
        PL_TRY(ds_set(c, "--lr", v, "optimizer.params.lr"));
    if (number(p, "eps", &v))
        PL_TRY(ds_set(c, "--adam-eps", v, "optimizer.params.eps"));
    if (number(p, "weight_decay", &v))
        PL_TRY(ds_set(c, "--weight-decay", v, "optimizer.params.weight_decay"));
    const cJSON *betas = cJSON_GetObjectItemCaseSensitive(p, "betas");
    if (betas) {
        if (cJSON_GetArraySize(betas) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(betas, 0)) ||
            !cJSON_IsNumber(cJSON_GetArrayItem(betas, 1)))
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: optimizer.params.betas must be "
                             "two numbers", cfg);
        PL_TRY(ds_set(c, "--adam-beta1", cJSON_GetArrayItem(betas, 0)->valuedouble,
                      "optimizer.params.betas[0]"));
        PL_TRY(ds_set(c, "--adam-beta2", cJSON_GetArrayItem(betas, 1)->valuedouble,
                      "optimizer.params.betas[1]"));
    }
fail:
    return st;
}

static pl_status scheduler(ds_ctx *c, const cJSON *sch)
{
    pl_train_args *a = c->a;
    const char *cfg = a->deepspeed_config;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(sch, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "?";
    int decay = strcmp(t, "WarmupDecayLR") == 0;
    if (!decay && strcmp(t, "WarmupLR") != 0)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: scheduler type \"%s\" does not "
                         "map onto Megatron's schedule (WarmupLR and WarmupDecayLR do)", cfg, t);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(sch, "params");
    const cJSON *wt = cJSON_GetObjectItemCaseSensitive(p, "warmup_type");
    /* DeepSpeed's default warmup_type is "log", which Megatron has no form of. */
    if (!cJSON_IsString(wt) || strcmp(wt->valuestring, "linear") != 0)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: scheduler.params.warmup_type "
                         "\"%s\" does not map onto Megatron's schedule (only \"linear\"; "
                         "DeepSpeed's default is \"log\")",
                         cfg, cJSON_IsString(wt) ? wt->valuestring : "log");
    double v;
    pl_status st = PL_OK;
    const char *style = decay ? "linear" : "constant";
    if (pl_train_args_given(a, "--lr-decay-style") && strcmp(a->lr_decay_style, style) != 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --lr-decay-style %s conflicts with scheduler "
                         "type %s (decay style %s) in --deepspeed_config %s",
                         a->lr_decay_style, t, style, cfg);
    const char *vals[1] = {style};
    PL_TRY(pl_options_set(&pl_train_cmd, a, "--lr-decay-style", vals, 1, a->given));
    if (number(p, "warmup_max_lr", &v))
        PL_TRY(ds_set(c, "--lr", v, "scheduler.params.warmup_max_lr"));
    if (number(p, "warmup_min_lr", &v)) {
        PL_TRY(ds_set(c, "--lr-warmup-init", v, "scheduler.params.warmup_min_lr"));
        if (decay)
            PL_TRY(ds_set(c, "--min-lr", v, "scheduler.params.warmup_min_lr"));
    }
    if (number(p, "warmup_num_steps", &v))
        PL_TRY(ds_set(c, "--lr-warmup-iters", v, "scheduler.params.warmup_num_steps"));
    if (decay) {
        if (!number(p, "total_num_steps", &v))
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: WarmupDecayLR needs "
                             "scheduler.params.total_num_steps", cfg);
        PL_TRY(ds_set(c, "--lr-decay-iters", v, "scheduler.params.total_num_steps"));
    }
fail:
    return st;
}

/* The bf16 and fp16 blocks (DeepSpeed's runtime/config.py): "enabled" selects
 * --bf16 / --fp16; fp16's loss_scale (0 = dynamic), initial_scale_power
 * (DeepSpeed's default 16, i.e. 2^16, unlike Megatron's 2^32),
 * loss_scale_window, hysteresis and min_loss_scale map onto Megatron's flags.
 * A block that is absent or not enabled is ignored, as DeepSpeed does. */
static pl_status precision(ds_ctx *c, const cJSON *root)
{
    pl_train_args *a = c->a;
    const char *cfg = a->deepspeed_config;
    const cJSON *blk[2] = {cJSON_GetObjectItemCaseSensitive(root, "bf16"),
                           cJSON_GetObjectItemCaseSensitive(root, "fp16")};
    int on[2];
    for (int k = 0; k < 2; k++)
        on[k] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(blk[k], "enabled"));
    if (on[0] && on[1])
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: bf16.enabled and fp16.enabled are both "
                         "true", cfg);
    static const char *const flag[2] = {"--bf16", "--fp16"};
    for (int k = 0; k < 2; k++) {
        if (!on[k])
            continue;
        if (pl_train_args_given(a, flag[!k]))
            return pl_errorf(PL_ERR_ARG, "plait train: %s (command line or --config) conflicts "
                             "with %s.enabled in --deepspeed_config %s", flag[!k], flag[k] + 2, cfg);
        pl_status st = pl_options_set(&pl_train_cmd, a, flag[k], NULL, 0, a->given);
        if (st)
            return st;
    }
    if (!on[1])
        return PL_OK;
    const cJSON *f = blk[1];
    pl_status st = PL_OK;
    double v;
    if (number(f, "loss_scale", &v) && v != 0) {
        PL_TRY(ds_set(c, "--loss-scale", v, "fp16.loss_scale"));
    } else if (number(f, "loss_scale", &v) && pl_train_args_given(a, "--loss-scale")) {
        return pl_errorf(PL_ERR_ARG, "plait train: --loss-scale %g (command line or --config) "
                         "conflicts with fp16.loss_scale 0 (dynamic) in --deepspeed_config %s",
                         a->loss_scale, cfg);
    }
    if (number(f, "initial_scale_power", &v)) {
        if (v != floor(v) || v < 0 || v > 126)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: fp16.initial_scale_power must be "
                             "an integer in 0..126", cfg);
        PL_TRY(ds_set(c, "--initial-loss-scale", ldexp(1.0, (int)v), "fp16.initial_scale_power"));
    } else if (!pl_train_args_given(a, "--initial-loss-scale")) {
        PL_TRY(ds_set(c, "--initial-loss-scale", 65536.0,
                      "fp16.initial_scale_power (DeepSpeed's default 16)"));
    }
    if (number(f, "loss_scale_window", &v))
        PL_TRY(ds_set(c, "--loss-scale-window", v, "fp16.loss_scale_window"));
    if (number(f, "hysteresis", &v))
        PL_TRY(ds_set(c, "--hysteresis", v, "fp16.hysteresis"));
    if (number(f, "min_loss_scale", &v))
        PL_TRY(ds_set(c, "--min-loss-scale", v, "fp16.min_loss_scale"));
fail:
    return st;
}

pl_status pl_ds_config_apply(pl_train_args *a)
{
    char *text = NULL;
    pl_status st = pl_file_read_all(a->deepspeed_config, &text, NULL);
    if (st)
        return pl_error_wrap(st, "--deepspeed_config");
    pl_json_init();
    cJSON *root = cJSON_Parse(text);
    pl_free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return pl_errorf(PL_ERR_FORMAT, "--deepspeed_config %s: not a JSON object",
                         a->deepspeed_config);
    }
    a->ds_json = root;
    ds_ctx c = {a, 0};
    const char *cfg = a->deepspeed_config;
    PL_TRY(precision(&c, root));
    PL_TRY(batch_key(a, root, "train_batch_size", &a->ds_train_batch));
    PL_TRY(batch_key(a, root, "train_micro_batch_size_per_gpu", &a->ds_micro_batch));
    PL_TRY(batch_key(a, root, "gradient_accumulation_steps", &a->ds_grad_accum));
    double v;
    if (a->ds_micro_batch > 0)
        PL_TRY(ds_set(&c, "--micro-batch-size", (double)a->ds_micro_batch,
                      "train_micro_batch_size_per_gpu"));
    if (a->ds_train_batch > 0)
        PL_TRY(ds_set(&c, "--global-batch-size", (double)a->ds_train_batch, "train_batch_size"));
    const cJSON *zo = cJSON_GetObjectItemCaseSensitive(root, "zero_optimization");
    if (zo) {
        if (!number(zo, "stage", &v) || v != floor(v) || v < 0 || v > 3)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: zero_optimization.stage must be "
                             "0, 1, 2 or 3", cfg);
        PL_TRY(ds_set(&c, "--zero-stage", v, "zero_optimization.stage"));
    }
    if (number(root, "gradient_clipping", &v))
        PL_TRY(ds_set(&c, "--clip-grad", v, "gradient_clipping"));
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    if (opt)
        PL_TRY(optimizer(&c, opt));
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(root, "scheduler");
    if (sch)
        PL_TRY(scheduler(&c, sch));
fail:
    return st;
}
