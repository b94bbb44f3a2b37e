/* DeepSpeed JSON onto Megatron-style flags, read as DeepSpeed reads it.
 *
 * Sources (microsoft/DeepSpeed @ 38327e0): runtime/config.py (DeepSpeedConfig,
 * _batch_assertion, the get_* readers), runtime/config_utils.py
 * (get_scalar_param = dict.get, dict_raise_error_on_duplicate_keys,
 * DeepSpeedConfigModel: pydantic, extra="forbid", "auto" values dropped),
 * runtime/zero/config.py (DeepSpeedZeroConfig), runtime/engine.py
 * (_configure_basic_optimizer), runtime/lr_schedules.py, docs/_pages/config-json.md.
 *
 * DeepSpeed's value semantics, followed here:
 * - a duplicate key takes its last value, as Megatron-DeepSpeed reads the file with
 *   Python's json (DeepSpeed's own loader, given the path, refuses duplicates); a
 *   note names it;
 * - "enabled" and the other switches read by get_scalar_param are tested with
 *   Python truth: 1 and "true" are on, and so is the string "false" (non-empty);
 *   0, "", null, [] and {} are off. A switch that is not a JSON boolean gets a note
 *   saying how it was read;
 * - keys read by get_scalar_param and handed to arithmetic (batch sizes, fp16's
 *   scaler, gradient_clipping, optimizer and scheduler params) must be JSON
 *   numbers: DeepSpeed or torch compare them with numbers and fail on a string;
 * - zero_optimization is a pydantic model: its integers may be integer strings
 *   ("2"), its switches "true"/"off"/1..., "auto" means the default, and an
 *   unknown key is an error.
 * Every key is either applied or named in a note saying why not. */
#include "train/ds_config.h"
#include "train/ds_config_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Sets flag to value (from key of the config) as the policy says. */
pl_status pl_ds_set_policy(ds_ctx *c, const char *flag, double value, const char *key,
                               ds_policy policy)
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
        if (cur != value) {
            if (policy == DS_CONFLICT_ERROR)
                return pl_errorf(PL_ERR_ARG, "plait train: %s %g (command line or --config) "
                                 "conflicts with %s %g in --deepspeed_config %s", flag, cur, key,
                                 value, c->cfg);
            if (policy == DS_FLAG_WINS) {
                if (slot != PL_DS_STAGE)
                    text[0] = 0;
                return pl_train_args_note(a, "%s %g: %s %g applies (the flag wins over the "
                                          "DeepSpeed key)", key, value, flag, cur);
            }
            pl_status st = pl_train_args_note(a, "%s %g overrides %s %g (with --deepspeed the "
                                              "engine reads only its JSON)", key, value, flag, cur);
            if (st)
                return st;
            const char *vals[1] = {text};
            return pl_options_set(&pl_train_cmd, a, flag, vals, 1, a->given);
        }
        if (slot != PL_DS_STAGE)
            text[0] = 0;
        return PL_OK;
    }
    const char *vals[1] = {text};
    return pl_options_set(&pl_train_cmd, a, flag, vals, 1, a->given);
}

pl_status pl_ds_set(ds_ctx *c, const char *flag, double value, const char *key)
{
    return pl_ds_set_policy(c, flag, value, key, DS_CONFLICT_ERROR);
}

pl_status pl_ds_note(ds_ctx *c, const char *key, const char *why)
{
    return pl_train_args_note(c->a, "%s: %s", key, why);
}

/* ---- values as DeepSpeed reads them ------------------------------------------ */

/* Python's truth of a JSON value (get_scalar_param hands the raw value to `if`). */
static int py_truth(const cJSON *x)
{
    if (!x || cJSON_IsNull(x) || cJSON_IsFalse(x))
        return 0;
    if (cJSON_IsTrue(x))
        return 1;
    if (cJSON_IsNumber(x))
        return x->valuedouble != 0;
    if (cJSON_IsString(x))
        return x->valuestring[0] != 0;
    return x->child != NULL; /* array or object: non-empty */
}

/* A switch read by get_scalar_param: *on = Python truth; a note when it is not a
 * JSON boolean, since "false" as a string is true to DeepSpeed. */
pl_status pl_ds_switch(ds_ctx *c, const cJSON *obj, const char *key, const char *path, int *on)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    *on = py_truth(x);
    if (!x || cJSON_IsBool(x))
        return PL_OK;
    char *shown = cJSON_PrintUnformatted(x);
    pl_status st = pl_train_args_note(c->a, "%s is %s, not a JSON boolean: DeepSpeed tests it with "
                                      "Python truth, so it is %s%s", path, shown ? shown : "?",
                                      *on ? "on" : "off",
                                      cJSON_IsString(x) && *on ? " (any non-empty string is true)"
                                                               : "");
    cJSON_free(shown);
    return st;
}

/* A number read by get_scalar_param and used in arithmetic: must be a JSON number
 * (not a string or boolean). Returns 1 with *v when present, 0 when absent. */
pl_status pl_ds_number(ds_ctx *c, const cJSON *obj, const char *key, const char *path,
                           double *v, int *present)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    *present = 0;
    if (!x || cJSON_IsNull(x))
        return PL_OK;
    if (!cJSON_IsNumber(x))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be a JSON number, got %s "
                         "(DeepSpeed uses the value as it is, and a string or boolean fails or "
                         "means something else in its arithmetic)", c->cfg, path,
                         cJSON_IsString(x) ? "a string" : "another type");
    if (!isfinite(x->valuedouble))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s is not finite", c->cfg, path);
    *v = x->valuedouble;
    *present = 1;
    return PL_OK;
}

/* A positive integer key (batch sizes, steps): a JSON number, whole, 1..2^31-1. */
pl_status pl_ds_count(ds_ctx *c, const cJSON *obj, const char *key, const char *path,
                          int64_t *out)
{
    double v;
    int present;
    pl_status st = pl_ds_number(c, obj, key, path, &v, &present);
    if (st || !present)
        return st;
    if (v < 1 || v > 2147483647.0 || v != floor(v))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be a positive integer (at "
                         "most 2147483647), got %g", c->cfg, path, v);
    *out = (int64_t)v;
    return PL_OK;
}

/* A pydantic int field (zero_optimization): a whole number or an integer string;
 * "auto" is the default (DeepSpeedConfigModel drops it). */
static pl_status ds_pyd_int(ds_ctx *c, const cJSON *obj, const char *key, const char *path,
                            double *v, int *present)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    *present = 0;
    if (!x)
        return PL_OK;
    if (cJSON_IsString(x)) {
        if (strcmp(x->valuestring, "auto") == 0)
            return PL_OK;
        char *end;
        const char *s = x->valuestring;
        while (isspace((unsigned char)*s))
            s++;
        long long n = strtoll(s, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (end == s || *end)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s \"%s\" is not an integer "
                             "(DeepSpeed's config model refuses it)", c->cfg, path, x->valuestring);
        *v = (double)n;
    } else if (cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble == floor(x->valuedouble)) {
        *v = x->valuedouble;
    } else {
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be an integer (DeepSpeed's "
                         "config model refuses this value)", c->cfg, path);
    }
    *present = 1;
    return PL_OK;
}

/* ---- the blocks (the optimizer and scheduler: ds_sched.c) ------------------- */

/* The bf16 and fp16 blocks (DeepSpeed's runtime/config.py): "enabled" (Python
 * truth) selects --bf16 / --fp16; fp16's loss_scale (0 = dynamic),
 * initial_scale_power (DeepSpeed's default 16, i.e. 2^16, unlike Megatron's
 * 2^32), loss_scale_window, hysteresis and min_loss_scale map onto Megatron's
 * flags. A block that is absent or not enabled is ignored, as DeepSpeed does. */
static pl_status precision(ds_ctx *c, const cJSON *root)
{
    pl_train_args *a = c->a;
    const char *cfg = c->cfg;
    const cJSON *bf = cJSON_GetObjectItemCaseSensitive(root, "bf16");
    const char *bf_name = "bf16";
    if (!bf) { /* DeepSpeed's older name, read when "bf16" is absent */
        bf = cJSON_GetObjectItemCaseSensitive(root, "bfloat16");
        bf_name = "bfloat16";
    }
    const cJSON *blk[2] = {bf, cJSON_GetObjectItemCaseSensitive(root, "fp16")};
    const char *names[2] = {bf_name, "fp16"};
    int on[2] = {0, 0};
    pl_status st = PL_OK;
    for (int k = 0; k < 2; k++) {
        if (!blk[k])
            continue;
        if (!cJSON_IsObject(blk[k]))
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be an object", cfg,
                             names[k]);
        char path[32];
        snprintf(path, sizeof path, "%s.enabled", names[k]);
        PL_TRY(pl_ds_switch(c, blk[k], "enabled", path, &on[k]));
    }
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
        PL_TRY(pl_options_set(&pl_train_cmd, a, flag[k], NULL, 0, a->given));
    }
    for (const cJSON *e = blk[0] ? blk[0]->child : NULL; e; e = e->next)
        if (strcmp(e->string, "enabled") != 0)
            PL_TRY(pl_train_args_note(a, "%s.%s: not applied (bf16 needs no loss scaling; plait "
                                      "updates fp32 master weights)", bf_name, e->string));
    if (!on[1]) {
        if (blk[1] && blk[1]->child && (blk[1]->child->next || strcmp(blk[1]->child->string, "enabled")))
            PL_TRY(pl_ds_note(c, "fp16", "not enabled, so its other keys are not read (as DeepSpeed)"));
        return st;
    }
    const cJSON *f = blk[1];
    double v;
    int has;
    PL_TRY(pl_ds_number(c, f, "loss_scale", "fp16.loss_scale", &v, &has));
    if (has && v != 0) {
        PL_TRY(pl_ds_set(c, "--loss-scale", v, "fp16.loss_scale"));
    } else if (has && pl_train_args_given(a, "--loss-scale")) {
        return pl_errorf(PL_ERR_ARG, "plait train: --loss-scale %g (command line or --config) "
                         "conflicts with fp16.loss_scale 0 (dynamic) in --deepspeed_config %s",
                         a->loss_scale, cfg);
    }
    PL_TRY(pl_ds_number(c, f, "initial_scale_power", "fp16.initial_scale_power", &v, &has));
    if (has) {
        if (v != floor(v) || v < 0 || v > 126)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: fp16.initial_scale_power must be "
                             "an integer in 0..126", cfg);
        PL_TRY(pl_ds_set(c, "--initial-loss-scale", ldexp(1.0, (int)v), "fp16.initial_scale_power"));
    } else if (!pl_train_args_given(a, "--initial-loss-scale")) {
        PL_TRY(pl_ds_set(c, "--initial-loss-scale", 65536.0,
                      "fp16.initial_scale_power (DeepSpeed's default 16)"));
    }
    int64_t n = 0;
    PL_TRY(pl_ds_count(c, f, "loss_scale_window", "fp16.loss_scale_window", &n));
    if (n)
        PL_TRY(pl_ds_set(c, "--loss-scale-window", (double)n, "fp16.loss_scale_window"));
    n = 0;
    PL_TRY(pl_ds_count(c, f, "hysteresis", "fp16.hysteresis", &n));
    if (n)
        PL_TRY(pl_ds_set(c, "--hysteresis", (double)n, "fp16.hysteresis"));
    PL_TRY(pl_ds_number(c, f, "min_loss_scale", "fp16.min_loss_scale", &v, &has));
    if (has)
        PL_TRY(pl_ds_set(c, "--min-loss-scale", v, "fp16.min_loss_scale"));
    static const char *const known[] = {"enabled", "loss_scale", "initial_scale_power",
                                        "loss_scale_window", "hysteresis", "min_loss_scale"};
    for (const cJSON *e = f->child; e; e = e->next) {
        size_t i = 0;
        while (i < sizeof known / sizeof *known && strcmp(known[i], e->string) != 0)
            i++;
        if (i == sizeof known / sizeof *known)
            PL_TRY(pl_train_args_note(a, "fp16.%s: not applied (plait's scaler is Megatron's: "
                                      "backs off after --hysteresis overflows, grows after "
                                      "--loss-scale-window clean steps)", e->string));
    }
fail:
    return st;
}

/* zero_optimization (a pydantic model in DeepSpeed: unknown keys are errors). */
typedef struct zero_key {
    const char *key;
    const char *why; /* NULL: handled in zero_block */
} zero_key;

static const zero_key zero_keys[] = {
    {"stage", NULL},
    {"reduce_bucket_size", NULL},
    {"allgather_bucket_size",
     "not applied; ZeRO-3 gathers one layer's parameters at a time (ahead with --zero3-prefetch 1)"},
    {"overlap_comm",
     "plait overlaps anyway: DP buckets and ZeRO's per-layer reduce-scatters run on a "
     "communication thread during backward"},
    {"contiguous_gradients", "gradients always live in one contiguous buffer"},
    {"reduce_scatter", "stages 2 and 3 reduce-scatter gradients, stage 1 all-reduces them"},
    {"allgather_partitions", "stages 1 and 2 all-gather the updated parameters after each step"},
    {"offload_optimizer", NULL},
    {"offload_param", NULL},
    {"cpu_offload", NULL},
    {"cpu_offload_param", NULL},
    {"cpu_offload_use_pin_memory", "no device memory on CPU; not applied"},
    {"sub_group_size", "not applied; the optimizer steps the rank's whole shard at once"},
    {"stage3_prefetch_bucket_size", "not applied; ZeRO-3 prefetches one layer (--zero3-prefetch)"},
    {"prefetch_bucket_size", "not applied; ZeRO-3 prefetches one layer (--zero3-prefetch)"},
    {"stage3_param_persistence_threshold", "not applied; every ZeRO-3 parameter is partitioned"},
    {"param_persistence_threshold", "not applied; every ZeRO-3 parameter is partitioned"},
    {"stage3_model_persistence_threshold", "not applied; every ZeRO-3 parameter is partitioned"},
    {"model_persistence_threshold", "not applied; every ZeRO-3 parameter is partitioned"},
    {"stage3_max_live_parameters", "not applied; ZeRO-3 holds at most two layers gathered"},
    {"max_live_parameters", "not applied; ZeRO-3 holds at most two layers gathered"},
    {"stage3_max_reuse_distance", "not applied; ZeRO-3 frees a layer's gathered parameters after use"},
    {"max_reuse_distance", "not applied; ZeRO-3 frees a layer's gathered parameters after use"},
    {"stage3_gather_16bit_weights_on_model_save",
     "not applied; checkpoints hold fp32 shards, and plait ckpt export writes whole tensors"},
    {"gather_16bit_weights_on_model_save",
     "not applied; checkpoints hold fp32 shards, and plait ckpt export writes whole tensors"},
    {"stage3_gather_fp16_weights_on_model_save",
     "not applied; checkpoints hold fp32 shards, and plait ckpt export writes whole tensors"},
    {"stage3_module_granularity_threshold", "not applied"},
    {"module_granularity_threshold", "not applied"},
    {"stage3_use_all_reduce_for_fetch_params", "not applied; ZeRO-3 all-gathers"},
    {"use_all_reduce_for_fetch_params", "not applied; ZeRO-3 all-gathers"},
    {"load_from_fp32_weights", "checkpoints always hold fp32 master weights"},
    {"elastic_checkpoint", "not applied; a ZeRO checkpoint resumes at the same DP size"},
    {"ignore_unused_parameters", "every parameter has a gradient in plait's models"},
    {"legacy_stage1", "not applied"},
    {"round_robin_gradients", "not applied"},
    {"use_multi_rank_bucket_allreduce", "not applied"},
    {"zero_hpz_partition_size", "not applied (ZeRO++ hierarchical partitioning)"},
    {"zero_quantized_weights", "not applied (ZeRO++ quantized communication)"},
    {"zero_quantized_nontrainable_weights", "not applied (ZeRO++ quantized communication)"},
    {"zero_quantized_gradients", "not applied (ZeRO++ quantized communication)"},
    {"zeropp_loco_param", "not applied (ZeRO++)"},
    {"mics_shard_size", "not applied (MiCS)"},
    {"mics_hierarchical_params_gather", "not applied (MiCS)"},
    {"memory_efficient_linear", "not applied"},
    {"pipeline_loading_checkpoint", "not applied"},
    {"override_module_apply", "not applied"},
    {"log_trace_cache_warnings", "not applied"},
};

/* An offload block: {"device": "cpu"|"nvme"|"none", ...} (or a boolean, the old
 * cpu_offload form). Offloading to host memory is what a CPU run is. */
static pl_status offload(ds_ctx *c, const cJSON *x, const char *path)
{
    int on;
    if (cJSON_IsObject(x)) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(x, "device");
        on = cJSON_IsString(d) && strcmp(d->valuestring, "none") != 0;
    } else {
        on = py_truth(x);
    }
    if (!on)
        return PL_OK;
    return pl_train_args_note(c->a, "zero_optimization.%s: not done; on CPU the optimizer state "
                              "and parameters are already in host memory (NVMe offload is not "
                              "implemented)", path);
}

static pl_status zero_block(ds_ctx *c, const cJSON *zo)
{
    pl_train_args *a = c->a;
    double v;
    int has;
    pl_status st = PL_OK;
    if (cJSON_IsBool(zo)) { /* the deprecated form: true = stage 1 (read_zero_config_deprecated) */
        PL_TRY(pl_ds_note(c, "zero_optimization", "a boolean is DeepSpeed's deprecated form: true means "
                                            "stage 1, false stage 0"));
        return pl_ds_set_policy(c, "--zero-stage", cJSON_IsTrue(zo) ? 1 : 0, "zero_optimization",
                             a->legacy.deepspeed ? DS_JSON_WINS : DS_CONFLICT_ERROR);
    }
    if (!cJSON_IsObject(zo))
        return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: zero_optimization must be an object",
                         c->cfg);
    int64_t stage = 0;
    PL_TRY(ds_pyd_int(c, zo, "stage", "zero_optimization.stage", &v, &has));
    if (has) {
        if (v < 0 || v > 3)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: zero_optimization.stage must be "
                             "0, 1, 2 or 3", c->cfg);
        stage = (int64_t)v;
    }
    PL_TRY(pl_ds_set_policy(c, "--zero-stage", (double)stage, "zero_optimization.stage",
                         a->legacy.deepspeed ? DS_JSON_WINS : DS_CONFLICT_ERROR));
    for (const cJSON *e = zo->child; e; e = e->next) {
        const char *k = e->string;
        size_t i = 0;
        while (i < sizeof zero_keys / sizeof *zero_keys && strcmp(zero_keys[i].key, k) != 0)
            i++;
        if (i == sizeof zero_keys / sizeof *zero_keys)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: zero_optimization.%s is not a "
                             "DeepSpeed key (DeepSpeed's config model refuses unknown keys)",
                             c->cfg, k);
        char path[96];
        snprintf(path, sizeof path, "zero_optimization.%s", k);
        if (strcmp(k, "stage") == 0)
            continue;
        if (strcmp(k, "reduce_bucket_size") == 0) {
            PL_TRY(ds_pyd_int(c, zo, k, path, &v, &has));
            if (!has)
                continue;
            if (v < 0)
                return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s must be >= 0", c->cfg, path);
            if (stage > 0)
                PL_TRY(pl_ds_note(c, path, "not applied at ZeRO stage >= 1, which reduce-scatters one "
                                     "layer's gradients at a time"));
            else /* elements per bucket, as plait's --ddp-bucket-size */
                PL_TRY(pl_ds_set_policy(c, "--ddp-bucket-size", v, path, DS_FLAG_WINS));
            continue;
        }
        if (strncmp(k, "offload_", 8) == 0 || strncmp(k, "cpu_offload", 11) == 0) {
            if (strcmp(k, "cpu_offload_use_pin_memory") != 0) {
                PL_TRY(offload(c, e, k));
                continue;
            }
        }
        PL_TRY(pl_ds_note(c, path, zero_keys[i].why));
    }
fail:
    return st;
}

/* ---- the top level --------------------------------------------------------------- */

typedef struct top_key {
    const char *key;
    const char *why; /* NULL: handled in pl_ds_config_apply */
} top_key;

static const top_key top_keys[] = {
    {"train_batch_size", NULL},
    {"train_micro_batch_size_per_gpu", NULL},
    {"gradient_accumulation_steps", NULL},
    {"steps_per_print", NULL},
    {"gradient_clipping", NULL},
    {"optimizer", NULL},
    {"scheduler", NULL},
    {"fp16", NULL},
    {"bf16", NULL},
    {"bfloat16", NULL},
    {"zero_optimization", NULL},
    {"wall_clock_breakdown", NULL},
    {"elasticity", NULL},
    {"activation_checkpointing",
     "DeepSpeed's settings for storing checkpointed activations (partitioned over TP, CPU, "
     "contiguous) have no CPU meaning and do not turn recompute on, in DeepSpeed either; plait "
     "recomputes with --checkpoint-activations or --recompute-granularity"},
    {"zero_allow_untested_optimizer", "no effect: plait's Adam runs under every ZeRO stage"},
    {"zero_force_ds_cpu_optimizer", "no effect: plait's optimizer always runs on the CPU"},
    {"memory_breakdown",
     "not applied; plait prints its memory plan at start and peak RSS in the metrics"},
    {"flops_profiler", "not applied; plait prints MFLOP per token and MFU in every progress line"},
    {"tensorboard", "DeepSpeed's monitor is not run; --tensorboard-dir writes Megatron's scalars"},
    {"wandb", "not written; the scalars go to --metrics-file (JSON lines)"},
    {"csv_monitor", "not written; the scalars go to --metrics-file (JSON lines)"},
    {"comet", "not written; the scalars go to --metrics-file (JSON lines)"},
    {"comms_logger", "not applied; the metrics hold each step's DP and TP bytes and times"},
    {"prescale_gradients", "not applied; gradients are averaged in fp32 once, after the sum"},
    {"gradient_predivide_factor", "not applied; gradients are averaged in fp32 once, after the sum"},
    {"communication_data_type", "not applied; gradients are communicated in fp32"},
    {"seq_parallel_communication_data_type", "not applied; communication is fp32"},
    {"data_types", "not applied; gradients accumulate in fp32"},
    {"checkpoint", "not applied; plait's checkpoints are its own (tag validation, universal "
                   "checkpoints and parallel writes do not apply)"},
    {"sparse_gradients", "not applied; gradients are dense"},
    {"amp", "not applied; mixed precision is --bf16 / --fp16 (or the bf16 / fp16 blocks)"},
    {"fp16_master_weights_and_grads", "not applied; master weights and gradients are fp32"},
    {"aio", "not applied; there is no NVMe offload"},
    {"dump_state", "not applied"},
    {"disable_allgather", "not applied"},
    {"timers", "not applied; timings are in the progress line and the metrics"},
    {"pipeline", "not applied; pipelining is --pipeline-model-parallel-size"},
    {"sparse_attention", "not applied; attention is dense"},
    {"progressive_layer_drop", "not applied"},
    {"curriculum_learning", "not applied"},
    {"data_efficiency", "not applied"},
    {"compression_training", "not applied"},
    {"eigenvalue", "not applied"},
    {"quantize_training", "not applied"},
    {"hybrid_engine", "not applied"},
    {"autotuning", "not applied"},
    {"nebula", "not applied"},
    {"weight_quantization", "not applied"},
    {"tensor_parallel", "not applied; the TP size is --tensor-model-parallel-size"},
    {"graph_harvesting", "not applied"},
    {"dataloader_drop_last", "not applied; Megatron's sampler drops the incomplete last batch"},
    {"use_data_before_expert_parallel_", "not applied"},
};

/* The blocks whose keys are read one by one must be JSON objects ("optimizer":
 * {"params": [0.9, 0.999]} is an error naming optimizer.params, not a crash). */
static pl_status blocks_are_objects(ds_ctx *c, const cJSON *root)
{
    static const char *const blocks[] = {"optimizer", "scheduler", "fp16", "bf16",
                                         "zero_optimization", "elasticity",
                                         "activation_checkpointing"};
    for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, blocks[i]);
        const cJSON *params = cJSON_IsObject(b) && i < 2
                                  ? cJSON_GetObjectItemCaseSensitive(b, "params") : NULL;
        if ((b && !cJSON_IsObject(b)) || (params && !cJSON_IsObject(params)))
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: %s%s must be a JSON object "
                             "(of key: value)", c->cfg, blocks[i],
                             b && !cJSON_IsObject(b) ? "" : ".params");
    }
    return PL_OK;
}

/* Duplicate keys, at every level: the last value wins, as Megatron-DeepSpeed's
 * _create_ds_config_dict loads the file with Python's json and hands DeepSpeed a
 * dict (DeepSpeed's own loader, given a path, would refuse them with
 * dict_raise_error_on_duplicate_keys); a note names each. */
static pl_status last_duplicate_wins(ds_ctx *c, cJSON *obj, const char *where)
{
    cJSON *e = obj ? obj->child : NULL;
    while (e) {
        cJSON *next = e->next;
        int dup = 0;
        if (cJSON_IsObject(obj))
            for (const cJSON *f = e->next; f && !dup; f = f->next)
                dup = strcmp(e->string, f->string) == 0;
        if (dup) {
            pl_status st = pl_train_args_note(c->a, "%s%s%s: given more than once; the last value "
                                              "wins (Megatron-DeepSpeed reads the file with "
                                              "Python's json; DeepSpeed's own loader would refuse "
                                              "it)", where, *where ? "." : "", e->string);
            cJSON_Delete(cJSON_DetachItemViaPointer(obj, e));
            if (st)
                return st;
        } else if (cJSON_IsObject(e) || cJSON_IsArray(e)) {
            char inner[256];
            snprintf(inner, sizeof inner, "%s%s%s", where, *where ? "." : "",
                     cJSON_IsObject(obj) ? e->string : "[]");
            pl_status st = last_duplicate_wins(c, e, inner);
            if (st)
                return st;
        }
        e = next;
    }
    return PL_OK;
}

pl_status pl_ds_config_apply(pl_train_args *a)
{
    char *text = NULL;
    pl_status st = pl_file_read_all(a->deepspeed_config, &text, NULL);
    if (st)
        return pl_error_wrap(st, "--deepspeed_config");
    pl_json_init();
    pl_json_oom_take();
    cJSON *root = cJSON_Parse(text);
    pl_free(text);
    if (!root && pl_json_oom_take())
        return pl_errorf(PL_ERR_NOMEM, "--deepspeed_config %s: out of memory parsing it",
                         a->deepspeed_config);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return pl_errorf(PL_ERR_FORMAT, "--deepspeed_config %s: not a JSON object",
                         a->deepspeed_config);
    }
    a->ds_json = root;
    ds_ctx c = {a, a->deepspeed_config, 0, 0};
    const char *cfg = c.cfg;
    PL_TRY(last_duplicate_wins(&c, root, ""));
    PL_TRY(blocks_are_objects(&c, root));
    PL_TRY(precision(&c, root));
    int on;
    PL_TRY(pl_ds_switch(&c, root, "elasticity", "elasticity", &on));
    if (on) {
        const cJSON *el = cJSON_GetObjectItemCaseSensitive(root, "elasticity");
        PL_TRY(pl_ds_switch(&c, el, "enabled", "elasticity.enabled", &on));
        if (on)
            return pl_errorf(PL_ERR_UNSUPPORTED, "--deepspeed_config %s: elasticity.enabled is not "
                             "supported (it would choose the batch sizes)", cfg);
    }
    PL_TRY(pl_ds_count(&c, root, "train_batch_size", "train_batch_size", &a->ds_train_batch));
    PL_TRY(pl_ds_count(&c, root, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu",
                    &a->ds_micro_batch));
    PL_TRY(pl_ds_count(&c, root, "gradient_accumulation_steps", "gradient_accumulation_steps",
                    &a->ds_grad_accum));
    if (a->ds_micro_batch > 0)
        PL_TRY(pl_ds_set(&c, "--micro-batch-size", (double)a->ds_micro_batch,
                      "train_micro_batch_size_per_gpu"));
    if (a->ds_train_batch > 0)
        PL_TRY(pl_ds_set(&c, "--global-batch-size", (double)a->ds_train_batch, "train_batch_size"));
    const cJSON *zo = cJSON_GetObjectItemCaseSensitive(root, "zero_optimization");
    if (zo)
        PL_TRY(zero_block(&c, zo));
    else if (a->legacy.deepspeed && pl_train_args_given(a, "--zero-stage") && a->zero_stage != 0)
        PL_TRY(pl_ds_set_policy(&c, "--zero-stage", 0,
                                "zero_optimization.stage (absent: DeepSpeed's default)",
                                DS_JSON_WINS));
    double v;
    int has;
    PL_TRY(pl_ds_number(&c, root, "gradient_clipping", "gradient_clipping", &v, &has));
    if (has) {
        if (v < 0)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: gradient_clipping must be >= 0",
                             cfg);
        PL_TRY(pl_ds_set(&c, "--clip-grad", v, "gradient_clipping"));
    }
    int64_t spp = 0;
    PL_TRY(pl_ds_count(&c, root, "steps_per_print", "steps_per_print", &spp));
    a->ds_steps_per_print = spp ? spp : 10; /* DeepSpeed's default */
    if (spp) /* Megatron-DeepSpeed prints both; plait has one progress line */
        PL_TRY(pl_ds_set_policy(&c, "--log-interval", (double)spp, "steps_per_print", DS_FLAG_WINS));
    PL_TRY(pl_ds_switch(&c, root, "wall_clock_breakdown", "wall_clock_breakdown", &on));
    if (on)
        PL_TRY(pl_ds_note(&c, "wall_clock_breakdown", "each progress line has ms per iteration and the "
                                                "metrics the DP/TP communication times; plait bench "
                                                "prints the full step breakdown"));
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    if (opt)
        PL_TRY(pl_ds_optimizer(&c, opt));
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(root, "scheduler");
    if (sch)
        PL_TRY(pl_ds_scheduler(&c, sch));
    for (const cJSON *e = root->child; e; e = e->next) {
        size_t i = 0;
        while (i < sizeof top_keys / sizeof *top_keys && strcmp(top_keys[i].key, e->string) != 0)
            i++;
        if (i == sizeof top_keys / sizeof *top_keys)
            PL_TRY(pl_train_args_note(a, "%s: not a DeepSpeed key; ignored (as DeepSpeed ignores "
                                      "it)", e->string));
        else if (top_keys[i].why)
            PL_TRY(pl_ds_note(&c, e->string, top_keys[i].why));
    }
fail:
    return st;
}
