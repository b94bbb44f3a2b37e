/* The optimizer and scheduler blocks of a DeepSpeed config: Adam/AdamW's params
 * onto Megatron's flags, and DeepSpeed's WarmupLR, WarmupDecayLR, WarmupCosineLR,
 * OneCycle and LRRangeTest as DeepSpeed defines them (runtime/lr_schedules.py, engine.py
 * _configure_basic_optimizer), run by optim/schedule.c's PL_LR_DS_* styles. */
#include "train/ds_config_internal.h"

#include "optim/schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Lamb's params (FusedLamb's keyword arguments; any other key is a TypeError
 * there): lr, betas, eps, weight_decay as for Adam, the rest onto a->lamb. */
static pl_status lamb_param(ds_ctx *c, const cJSON *p, const char *k, const char *path, int *done)
{
    pl_train_args *a = c->a;
    pl_status st = PL_OK;
    double v;
    int has, on;
    *done = 1;
    if (strcmp(k, "max_coeff") == 0 || strcmp(k, "min_coeff") == 0) {
        PL_TRY(pl_ds_number(c, p, k, path, &v, &has));
        if (has && !(v > 0 && isfinite(v)))
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be a positive number, "
                             "not %g", c->cfg, path, v);
        if (has)
            *(k[1] == 'a' ? &a->lamb.max_coeff : &a->lamb.min_coeff) = v;
    } else if (strcmp(k, "eps_inside_sqrt") == 0) {
        PL_TRY(pl_ds_switch(c, p, k, path, &a->lamb.eps_inside_sqrt));
    } else if (strcmp(k, "bias_correction") == 0) {
        PL_TRY(pl_ds_switch(c, p, k, path, &a->lamb.bias_correction));
    } else if (strcmp(k, "amsgrad") == 0) {
        PL_TRY(pl_ds_switch(c, p, k, path, &on));
        if (on)
            return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: %s true is refused, as "
                             "DeepSpeed's FusedLamb refuses it", c->cfg, path);
    } else if (strcmp(k, "lr") != 0 && strcmp(k, "eps") != 0 && strcmp(k, "weight_decay") != 0 &&
               strcmp(k, "betas") != 0 && strcmp(k, "max_grad_norm") != 0) {
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s is not a parameter of DeepSpeed's "
                         "Lamb (FusedLamb takes lr, bias_correction, betas, eps, eps_inside_sqrt, "
                         "weight_decay, max_coeff, min_coeff, amsgrad)", c->cfg, path);
    } else {
        *done = 0;
    }
fail:
    return st;
}

pl_status pl_ds_optimizer(ds_ctx *c, const cJSON *opt)
{
    const char *cfg = c->cfg;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(opt, "type");
    /* engine.py lower-cases the names of DeepSpeed's own optimizers */
    int lamb = cJSON_IsString(type) && strcasecmp(type->valuestring, "Lamb") == 0;
    if (!cJSON_IsString(type) || (strcasecmp(type->valuestring, "AdamW") != 0 &&
                                  strcasecmp(type->valuestring, "Adam") != 0 && !lamb))
        return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: optimizer type \"%s\" is not "
                         "supported (Adam, AdamW and Lamb only)", cfg,
                         cJSON_IsString(type) ? type->valuestring : "?");
    if (lamb) {
        pl_train_args *a = c->a;
        /* FusedLamb's defaults */
        a->lamb.on = 1;
        a->lamb.bias_correction = 1;
        a->lamb.eps_inside_sqrt = 0;
        a->lamb.max_coeff = 10.0;
        a->lamb.min_coeff = 0.01;
        /* engine.py asserts dynamic_loss_scale() for Lamb: fp16.loss_scale 0 */
        if (a->fp16 && a->loss_scale > 0)
            return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: the Lamb optimizer needs "
                             "dynamic loss scaling (DeepSpeed asserts it), but the loss scale is "
                             "static (%g)", cfg, a->loss_scale);
        pl_status nst = pl_ds_note(c, "optimizer Lamb", "each tensor's trust ratio is the whole "
                                   "tensor's under TP and ZeRO too (DeepSpeed's FusedLamb takes "
                                   "it per TP slice, and under ZeRO per rank's flat partition)");
        if (nst)
            return nst;
    }
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(opt, "params");
    double v;
    int has;
    pl_status st = PL_OK;
    for (const cJSON *e = opt->child; e; e = e->next)
        if (strcmp(e->string, "type") != 0 && strcmp(e->string, "params") != 0)
            PL_TRY(pl_train_args_note(c->a, "optimizer.%s: not a DeepSpeed optimizer key; "
                                      "ignored", e->string));
    for (const cJSON *e = p ? p->child : NULL; e; e = e->next) {
        const char *k = e->string;
        char path[96];
        snprintf(path, sizeof path, "optimizer.params.%s", k);
        int done = 0;
        if (lamb)
            PL_TRY(lamb_param(c, p, k, path, &done));
        if (done)
            continue;
        if (strcmp(k, "lr") == 0) {
            PL_TRY(pl_ds_number(c, p, k, path, &v, &has));
            if (has) {
                c->lr_from_optimizer = !pl_train_args_given(c->a, "--lr");
                PL_TRY(pl_ds_set(c, "--lr", v, path));
            }
        } else if (strcmp(k, "eps") == 0) {
            PL_TRY(pl_ds_number(c, p, k, path, &v, &has));
            if (has)
                PL_TRY(pl_ds_set(c, "--adam-eps", v, path));
        } else if (strcmp(k, "weight_decay") == 0) {
            PL_TRY(pl_ds_number(c, p, k, path, &v, &has));
            if (has)
                PL_TRY(pl_ds_set(c, "--weight-decay", v, path));
        } else if (strcmp(k, "betas") == 0) {
            if (cJSON_GetArraySize(e) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(e, 0)) ||
                !cJSON_IsNumber(cJSON_GetArrayItem(e, 1)))
                return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: optimizer.params.betas must "
                                 "be two numbers", cfg);
            PL_TRY(pl_ds_set(c, "--adam-beta1", cJSON_GetArrayItem(e, 0)->valuedouble,
                          "optimizer.params.betas[0]"));
            PL_TRY(pl_ds_set(c, "--adam-beta2", cJSON_GetArrayItem(e, 1)->valuedouble,
                          "optimizer.params.betas[1]"));
        } else if (strcmp(k, "max_grad_norm") == 0) {
            PL_TRY(pl_ds_note(c, path, "ignored; DeepSpeed refuses it when it builds the optimizer "
                                 "(engine.py: use gradient_clipping), and gradient clipping is "
                                 "--clip-grad / gradient_clipping"));
        } else if (strcmp(k, "adam_w_mode") == 0 || strcmp(k, "bias_correction") == 0) {
            int on;
            PL_TRY(pl_ds_switch(c, p, k, path, &on));
            if (!on)
                return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: %s false is not "
                                 "supported (plait's Adam has decoupled weight decay and bias "
                                 "correction)", cfg, path);
        } else if (strcmp(k, "amsgrad") == 0) {
            int on;
            PL_TRY(pl_ds_switch(c, p, k, path, &on));
            if (on)
                return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: %s is not supported",
                                 cfg, path);
        } else {
            PL_TRY(pl_ds_note(c, path, "not applied (plait's Adam takes lr, betas, eps and "
                                 "weight_decay)"));
        }
    }
fail:
    return st;
}

/* A scheduler param: the JSON number, or DeepSpeed's default when absent. */
static pl_status sched_param(ds_ctx *c, const cJSON *p, const char *key, double def, double *v)
{
    char path[96];
    int has;
    snprintf(path, sizeof path, "scheduler.params.%s", key);
    pl_status st = pl_ds_number(c, p, key, path, v, &has);
    if (!st && !has)
        *v = def;
    return st;
}

/* Sets --lr to the schedule's peak, which DeepSpeed's scheduler writes into the
 * optimizer whatever optimizer.params.lr says (that gives way with a note); a --lr
 * flag must agree. */
static pl_status sched_peak(ds_ctx *c, double peak, const char *key, const char *type)
{
    pl_train_args *a = c->a;
    if (c->lr_from_optimizer && a->lr != peak) {
        pl_status st = pl_train_args_note(a, "optimizer.params.lr %g: the scheduler's %s %g is "
                                          "the peak (DeepSpeed's %s sets the optimizer's lr)",
                                          a->lr, key + strlen("scheduler.params."), peak, type);
        if (st)
            return st;
        char text[40];
        snprintf(text, sizeof text, "%.17g", peak);
        const char *vals[1] = {text};
        return pl_options_set(&pl_train_cmd, a, "--lr", vals, 1, a->given);
    }
    return pl_ds_set(c, "--lr", peak, key);
}

/* Notes each param of p not in known[0..n). */
static pl_status unknown_params(ds_ctx *c, const cJSON *p, const char *const *known, size_t n,
                                const char *type)
{
    for (const cJSON *e = p ? p->child : NULL; e; e = e->next) {
        size_t i = 0;
        while (i < n && strcmp(known[i], e->string) != 0)
            i++;
        if (i == n) {
            pl_status st = pl_train_args_note(c->a, "scheduler.params.%s: not a parameter of "
                                              "DeepSpeed's %s; ignored", e->string, type);
            if (st)
                return st;
        }
    }
    return PL_OK;
}

/* A whole number of steps >= lo (DeepSpeed's defaults when absent). */
static pl_status sched_steps(ds_ctx *c, const cJSON *p, const char *key, double def, double lo,
                             double *v)
{
    pl_status st = sched_param(c, p, key, def, v);
    if (!st && (*v < lo || *v != floor(*v) || *v > 2147483647.0))
        st = pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: scheduler.params.%s must be a whole "
                       "number >= %g, got %g", c->cfg, key, lo, *v);
    return st;
}

/* DeepSpeed's OneCycle (lr_schedules.py): cycle_min_lr and cycle_max_lr are required
 * (positional in DeepSpeed); the rest take DeepSpeed's defaults. The stair counts
 * are stored but never used by DeepSpeed's formulas, so they change nothing here. */
static pl_status onecycle_params(ds_ctx *c, const cJSON *p)
{
    pl_train_args *a = c->a;
    const char *cfg = c->cfg;
    pl_status st = PL_OK;
    double lo, hi, first, second, dstep;
    if (!cJSON_GetObjectItemCaseSensitive(p, "cycle_min_lr") ||
        !cJSON_GetObjectItemCaseSensitive(p, "cycle_max_lr"))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: OneCycle needs "
                         "scheduler.params.cycle_min_lr and cycle_max_lr", cfg);
    PL_TRY(sched_param(c, p, "cycle_min_lr", 0, &lo));
    PL_TRY(sched_param(c, p, "cycle_max_lr", 0, &hi));
    PL_TRY(sched_steps(c, p, "cycle_first_step_size", 2000, 1, &first));
    const cJSON *s2 = cJSON_GetObjectItemCaseSensitive(p, "cycle_second_step_size");
    if (s2 && !cJSON_IsNull(s2))
        PL_TRY(sched_steps(c, p, "cycle_second_step_size", first, 1, &second));
    else
        second = first;
    PL_TRY(sched_steps(c, p, "decay_step_size", 0, 0, &dstep));
    PL_TRY(sched_param(c, p, "decay_lr_rate", 0, &a->ds_sched.decay_lr_rate));
    PL_TRY(sched_param(c, p, "decay_mom_rate", 0, &a->ds_sched.decay_mom_rate));
    PL_TRY(sched_param(c, p, "cycle_min_mom", 0.8, &a->ds_sched.min_mom));
    PL_TRY(sched_param(c, p, "cycle_max_mom", 0.9, &a->ds_sched.max_mom));
    if (lo < 0 || hi < 0)
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: OneCycle's cycle_min_lr and "
                         "cycle_max_lr must be >= 0", cfg);
    a->ds_sched.cycle_momentum = 1;
    if (cJSON_GetObjectItemCaseSensitive(p, "cycle_momentum"))
        PL_TRY(pl_ds_switch(c, p, "cycle_momentum", "scheduler.params.cycle_momentum",
                         &a->ds_sched.cycle_momentum));
    if (a->ds_sched.cycle_momentum) {
        const double m0 = a->ds_sched.min_mom, m1 = a->ds_sched.max_mom;
        if (m0 < 0 || m0 >= 1 || m1 < 0 || m1 >= 1)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: OneCycle's cycle_min_mom and "
                             "cycle_max_mom are Adam's beta1 and must be in [0, 1)", cfg);
        for (int k = 0; k < 2; k++) {
            static const char *const flag[2] = {"--adam-beta1", "--adam-beta2"};
            if (pl_train_args_given(a, flag[k]))
                PL_TRY(pl_train_args_note(a, "%s: OneCycle's cycle_momentum sets Adam's betas to "
                                          "(cycle momentum, 0.99) every step, as DeepSpeed does",
                                          flag[k]));
        }
    }
    a->ds_sched.style = PL_LR_DS_ONECYCLE;
    a->ds_sched.min_lr = a->ds_sched.init_lr = lo;
    a->ds_sched.max_lr = hi;
    a->ds_sched.warmup = (int64_t)first;
    a->ds_sched.total = (int64_t)(first + second);
    a->ds_sched.decay_step_size = (int64_t)dstep;
    PL_TRY(sched_peak(c, hi, "scheduler.params.cycle_max_lr", "OneCycle"));
    static const char *const known[] = {
        "cycle_min_lr", "cycle_max_lr", "decay_lr_rate", "cycle_first_step_size",
        "cycle_second_step_size", "cycle_first_stair_count", "cycle_second_stair_count",
        "decay_step_size", "cycle_momentum", "cycle_min_mom", "cycle_max_mom", "decay_mom_rate"};
    PL_TRY(unknown_params(c, p, known, sizeof known / sizeof *known, "OneCycle"));
fail:
    return st;
}

/* DeepSpeed's LRRangeTest (lr_schedules.py): its constructor's defaults (min_lr 1e-3,
 * step_size 2000, step_rate 1.0, staircase false) for absent params. The optimizer
 * starts at lr_range_test_min_lr, which DeepSpeed writes into it: that is --lr. A list
 * of rates (one per param group) is refused: plait's groups share one rate. */
static pl_status range_test_params(ds_ctx *c, const cJSON *p)
{
    pl_train_args *a = c->a;
    const char *cfg = c->cfg;
    pl_status st = PL_OK;
    double lo, size;
    if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(p, "lr_range_test_min_lr")))
        return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: "
                         "scheduler.params.lr_range_test_min_lr as a list (one rate per param "
                         "group) is not supported; give one number", cfg);
    PL_TRY(sched_param(c, p, "lr_range_test_min_lr", 1e-3, &lo));
    PL_TRY(sched_steps(c, p, "lr_range_test_step_size", 2000, 1, &size));
    PL_TRY(sched_param(c, p, "lr_range_test_step_rate", 1.0, &a->ds_sched.step_rate));
    a->ds_sched.staircase = 0;
    if (cJSON_GetObjectItemCaseSensitive(p, "lr_range_test_staircase"))
        PL_TRY(pl_ds_switch(c, p, "lr_range_test_staircase",
                            "scheduler.params.lr_range_test_staircase", &a->ds_sched.staircase));
    if (!(lo > 0) || !isfinite(lo) || !(a->ds_sched.step_rate >= 0) ||
        !isfinite(a->ds_sched.step_rate))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: LRRangeTest needs "
                         "lr_range_test_min_lr > 0 (got %g) and lr_range_test_step_rate >= 0 "
                         "(got %g)", cfg, lo, a->ds_sched.step_rate);
    a->ds_sched.style = PL_LR_DS_LR_RANGE_TEST;
    a->ds_sched.min_lr = a->ds_sched.init_lr = a->ds_sched.max_lr = lo;
    a->ds_sched.warmup = (int64_t)size;
    a->ds_sched.total = 0;
    PL_TRY(sched_peak(c, lo, "scheduler.params.lr_range_test_min_lr", "LRRangeTest"));
    static const char *const known[] = {"lr_range_test_min_lr", "lr_range_test_step_size",
                                        "lr_range_test_step_rate", "lr_range_test_staircase"};
    PL_TRY(unknown_params(c, p, known, sizeof known / sizeof *known, "LRRangeTest"));
fail:
    return st;
}

/* DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (runtime/lr_schedules.py),
 * run as DeepSpeed runs them: counted in optimizer steps, the first step at the
 * start value (optim/schedule.h). They replace Megatron's schedule, so its flags
 * may not be given too. */
pl_status pl_ds_scheduler(ds_ctx *c, const cJSON *sch)
{
    pl_train_args *a = c->a;
    const char *cfg = c->cfg;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(sch, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "?";
    const int warm = strcmp(t, "WarmupLR") == 0, decay = strcmp(t, "WarmupDecayLR") == 0,
              cosine = strcmp(t, "WarmupCosineLR") == 0, onecycle = strcmp(t, "OneCycle") == 0,
              range = strcmp(t, "LRRangeTest") == 0;
    if (!warm && !decay && !cosine && !onecycle && !range)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: scheduler type \"%s\" is not "
                         "implemented (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and "
                         "LRRangeTest are)", cfg, t);
    static const char *const megatron[] = {"--lr-decay-style", "--lr-warmup-iters",
                                           "--lr-warmup-samples", "--lr-warmup-fraction",
                                           "--lr-warmup-init", "--lr-decay-iters",
                                           "--lr-decay-samples", "--min-lr"};
    for (size_t i = 0; i < sizeof megatron / sizeof *megatron; i++)
        if (pl_train_args_given(a, megatron[i]))
            return pl_errorf(PL_ERR_ARG, "plait train: %s (command line, --config or a legacy "
                             "flag such as --warmup) conflicts with the scheduler %s of "
                             "--deepspeed_config %s, which sets the whole schedule", megatron[i],
                             t, cfg);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(sch, "params");
    pl_status st = PL_OK;
    if (onecycle)
        return onecycle_params(c, p);
    if (range)
        return range_test_params(c, p);
    const cJSON *wt = cJSON_GetObjectItemCaseSensitive(p, "warmup_type");
    int log_warmup = 1; /* DeepSpeed's default, and what it falls back to for an unknown type */
    if (cJSON_IsString(wt) && strcmp(wt->valuestring, "linear") == 0)
        log_warmup = 0;
    else if (wt && !(cJSON_IsString(wt) && strcmp(wt->valuestring, "log") == 0))
        PL_TRY(pl_ds_note(c, "scheduler.params.warmup_type", "not \"log\" or \"linear\": DeepSpeed "
                                                       "warns and warms up by log, as plait does"));
    double wsteps, total = 0;
    PL_TRY(sched_param(c, p, "warmup_num_steps", 1000, &wsteps));
    if (wsteps < 0 || wsteps != floor(wsteps) || wsteps > 2147483647.0)
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: scheduler.params.warmup_num_steps "
                         "must be a whole number >= 0, got %g", cfg, wsteps);
    a->ds_sched.warmup = wsteps < 2 ? 2 : (int64_t)wsteps; /* max(2, warmup_num_steps) */
    if (decay || cosine) {
        /* a positional argument of DeepSpeed's class: required */
        const cJSON *tn = cJSON_GetObjectItemCaseSensitive(p, "total_num_steps");
        if (!tn)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s needs "
                             "scheduler.params.total_num_steps", cfg, t);
        PL_TRY(sched_param(c, p, "total_num_steps", 0, &total));
        if (total < 1 || total != floor(total) || total > 2147483647.0)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: scheduler.params.total_num_steps "
                             "must be a positive integer, got %g", cfg, total);
        if (cosine && total <= (double)a->ds_sched.warmup) /* DeepSpeed divides by T - W */
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: WarmupCosineLR needs "
                             "total_num_steps (%g) > warmup_num_steps (%lld)", cfg, total,
                             (long long)a->ds_sched.warmup);
    }
    a->ds_sched.total = (int64_t)total;
    static const char *const keys_warm[] = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
                                            "warmup_type", "total_num_steps"};
    static const char *const keys_cos[] = {"warmup_min_ratio", "cos_min_ratio", "warmup_num_steps",
                                           "warmup_type", "total_num_steps"};
    const char *const *known = cosine ? keys_cos : keys_warm;
    if (cosine) {
        /* ratios of the optimizer's lr (optimizer.params.lr or --lr) */
        double wmr, cmr;
        PL_TRY(sched_param(c, p, "warmup_min_ratio", 0.0, &wmr));
        PL_TRY(sched_param(c, p, "cos_min_ratio", 0.0001, &cmr));
        a->ds_sched.style = log_warmup ? PL_LR_DS_WARMUP_COSINE_LOG : PL_LR_DS_WARMUP_COSINE_LINEAR;
        a->ds_sched.init_lr = wmr;              /* ratios until the lr is known (trainer) */
        a->ds_sched.min_lr = cmr;
        a->ds_sched.max_lr = 1.0;
    } else {
        double lo, hi;
        PL_TRY(sched_param(c, p, "warmup_min_lr", 0.0, &lo));
        PL_TRY(sched_param(c, p, "warmup_max_lr", 0.001, &hi));
        /* DeepSpeed's scheduler writes its rates into the optimizer, so warmup_max_lr is
         * the peak whatever optimizer.params.lr says; a --lr flag must agree */
        PL_TRY(sched_peak(c, hi, "scheduler.params.warmup_max_lr", t));
        a->ds_sched.style = warm ? (log_warmup ? PL_LR_DS_WARMUP_LOG : PL_LR_DS_WARMUP_LINEAR)
                                 : (log_warmup ? PL_LR_DS_WARMUP_DECAY_LOG
                                               : PL_LR_DS_WARMUP_DECAY_LINEAR);
        a->ds_sched.init_lr = lo;
        a->ds_sched.max_lr = hi;
        a->ds_sched.min_lr = lo;
    }
    PL_TRY(unknown_params(c, p, known, 5, t));
fail:
    return st;
}
