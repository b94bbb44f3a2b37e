/* The checkpoint manifest: building, checksum, and validated reading
 * (ckpt/manifest.h). */
#include "ckpt/manifest.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "base/vec.h"
#include "base/xxh64.h"
#include "ckpt/files.h"
#include "model/spec.h"

#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { PATH_MAX_ = 4096, VERSION = 2, MAX_LAYERS = 10000 };
static const char FORMAT[] = "plait-checkpoint";
static const double BIG = 9007199254740992.0; /* 2^53: counts exact in a JSON number */
static const double TWO_64 = 18446744073709551616.0;
static const double BELOW_1 = 0.99999999999999989; /* the largest double < 1: [0, 1) */

cJSON *pl_ckpt_jobj(cJSON *parent, const char *key, pl_ckpt_jbuild *b)
{
    cJSON *o = parent ? cJSON_AddObjectToObject(parent, key) : NULL;
    b->ok &= o != NULL;
    return o;
}

void pl_ckpt_jnum(cJSON *o, const char *key, double v, pl_ckpt_jbuild *b)
{
    b->ok &= o && cJSON_AddNumberToObject(o, key, v) != NULL;
}

void pl_ckpt_jstr(cJSON *o, const char *key, const char *v, pl_ckpt_jbuild *b)
{
    if (v)
        b->ok &= o && cJSON_AddStringToObject(o, key, v) != NULL;
}

/* The model sizes: manifest key, the flag a mismatch names, field, bounds. */
static const struct {
    const char *key, *flag;
    size_t off;
    double lo, hi;
} config_fields[] = {
    {"num_layers", "--num-layers", offsetof(pl_model_config, num_layers), 1, MAX_LAYERS},
    {"hidden_size", "--hidden-size", offsetof(pl_model_config, hidden), 1, 1 << 20},
    {"num_attention_heads", "--num-attention-heads", offsetof(pl_model_config, heads), 1, 1 << 16},
    {"ffn_hidden_size", "--ffn-hidden-size", offsetof(pl_model_config, ffn_hidden), 1, 1 << 24},
    {"max_position_embeddings", "--max-position-embeddings",
     offsetof(pl_model_config, max_positions), 1, 1 << 24},
    {"vocab_size", "--vocab-size (the tokenizer's)", offsetof(pl_model_config, vocab_size), 1,
     1 << 24},
    {"padded_vocab_size", "--make-vocab-size-divisible-by (padded vocabulary)",
     offsetof(pl_model_config, padded_vocab), 1, 1 << 25},
    {"seq_length", "--seq-length", offsetof(pl_model_config, seq_length), 1, 1 << 24},
};
enum { N_FIELDS = sizeof config_fields / sizeof *config_fields };

static int64_t *cfg_field(pl_model_config *c, size_t i)
{
    return (int64_t *)((char *)c + config_fields[i].off);
}

static int64_t cfg_value(const pl_model_config *c, size_t i)
{
    return *(const int64_t *)((const char *)c + config_fields[i].off);
}

/* ---- writing ---- */

static const char *const norm_names[] = {"LayerNorm", "RMSNorm"};
static const char *const pos_names[] = {"learned_absolute", "rope", "none", "relative"};
/* a fine-tuned model's task head (pl_task's order; plait finetune) */
static const char *const task_names[] = {"none", "text_classification", "token_classification",
                                         "question_answering", "regression"};

static void arch_write(cJSON *model, const pl_model_config *c, pl_ckpt_jbuild *b)
{
    pl_ckpt_jstr(model, "normalization", norm_names[c->block.norm], b);
    pl_ckpt_jstr(model, "position_embedding_type", pos_names[c->block.pos], b);
    pl_ckpt_jnum(model, "swiglu", c->block.act == PL_ACT_SWIGLU, b);
    pl_ckpt_jnum(model, "num_query_groups", (double)c->query_groups, b);
    pl_ckpt_jnum(model, "add_bias_linear", c->block.bias, b);
    pl_ckpt_jnum(model, "untie_embeddings_and_output_weights", c->untie, b);
    pl_ckpt_jnum(model, "apply_residual_connection_post_layernorm", c->block.res_post_norm, b);
    if (c->block.post_norm) /* NeMo's key; post-LN BERT's layers have the exact GELU */
        pl_ckpt_jstr(model, "transformer_block_type", "post_ln", b);
    if (c->block.act == PL_ACT_GELU_ERF)
        pl_ckpt_jnum(model, "gelu_exact", 1, b);
    if (c->scale_embedding) /* transformers' BART's */
        pl_ckpt_jnum(model, "scale_embedding", 1, b);
    pl_ckpt_jnum(model, "rotary_base", c->rope.base, b);
    pl_ckpt_jnum(model, "rotary_percent", c->rope.percent, b);
    pl_ckpt_jnum(model, "use_rope_scaling", c->rope.scaling, b);
    pl_ckpt_jnum(model, "rope_scaling_factor", c->rope.factor, b);
    pl_ckpt_jnum(model, "hidden_dropout", c->hidden_dropout, b);
    pl_ckpt_jnum(model, "attention_dropout", c->attention_dropout, b);
    if (c->family == PL_FAMILY_BERT) /* Megatron's --bert-no-binary-head */
        pl_ckpt_jnum(model, "bert_binary_head", c->head.binary_head, b);
    if (c->head.task != PL_TASK_NONE) { /* instead of the pretraining heads */
        pl_ckpt_jstr(model, "task", task_names[c->head.task], b);
        pl_ckpt_jnum(model, "num_classes", (double)c->head.classes, b);
        pl_ckpt_jnum(model, "num_tokentypes", c->head.tokentypes, b);
    }
    if (pl_model_is_encdec(c)) { /* Megatron's T5 flags (num_layers: the encoder's) */
        pl_ckpt_jnum(model, "decoder_num_layers", (double)c->dec_layers, b);
        pl_ckpt_jnum(model, "decoder_seq_length", (double)c->dec_seq_length, b);
    }
    pl_ckpt_t5_arch_write(model, c, b);
}

cJSON *pl_ckpt_manifest_build(const pl_model_config *cfg, const pl_ckpt_meta *m,
                              const pl_registry *reg)
{
    pl_ckpt_jbuild b = {1};
    pl_json_init();
    cJSON *root = cJSON_CreateObject();
    b.ok = root != NULL;
    pl_ckpt_jstr(root, "format", FORMAT, &b);
    pl_ckpt_jnum(root, "version", VERSION, &b);
    pl_ckpt_jnum(root, "iteration", (double)m->iteration, &b);
    pl_ckpt_jnum(root, "consumed_train_samples", (double)m->consumed_train_samples, &b);
    pl_ckpt_jnum(root, "consumed_valid_samples", (double)m->consumed_valid_samples, &b);
    pl_ckpt_jnum(root, "seed", (double)m->seed, &b);
    pl_ckpt_jstr(root, "data_hash", m->data_hash, &b);
    pl_ckpt_mmb_write(root, m, &b);
    cJSON *model = pl_ckpt_jobj(root, "model", &b);
    pl_ckpt_jstr(model, "architecture", pl_family_get(cfg->family)->name, &b);
    for (size_t i = 0; i < N_FIELDS; i++)
        pl_ckpt_jnum(model, config_fields[i].key, (double)cfg_value(cfg, i), &b);
    pl_ckpt_jnum(model, "make_vocab_size_divisible_by", (double)cfg->divisible_by, &b);
    pl_ckpt_jnum(model, "init_method_std", cfg->init_std, &b);
    pl_ckpt_jnum(model, "layernorm_epsilon", cfg->ln_eps, &b);
    arch_write(model, cfg, &b);
    cJSON *par = pl_ckpt_jobj(root, "parallel", &b);
    pl_ckpt_jnum(par, "tensor_model_parallel_size", m->tp, &b);
    pl_ckpt_jnum(par, "pipeline_model_parallel_size", m->pp, &b);
    pl_ckpt_jnum(par, "data_parallel_size", m->dp, &b);
    if (m->pp_split > 0)
        pl_ckpt_jnum(par, "pipeline_model_parallel_split_rank", m->pp_split, &b);
    cJSON *sch = pl_ckpt_jobj(root, "scheduler", &b);
    pl_ckpt_jnum(sch, "max_lr", m->schedule.max_lr, &b);
    pl_ckpt_jnum(sch, "min_lr", m->schedule.min_lr, &b);
    pl_ckpt_jnum(sch, "init_lr", m->schedule.init_lr, &b);
    pl_ckpt_jnum(sch, "lr_warmup_steps", (double)m->schedule.warmup_steps, &b);
    pl_ckpt_jnum(sch, "lr_decay_steps", (double)m->schedule.decay_steps, &b);
    pl_ckpt_jstr(sch, "lr_decay_style", pl_lr_style_name(m->schedule.style), &b);
    pl_ckpt_jnum(sch, "num_steps", (double)m->schedule.num_steps, &b);
    cJSON *opt = pl_ckpt_jobj(root, "optimizer", &b);
    pl_ckpt_jstr(opt, "type", m->lamb ? "lamb" : "adamw", &b);
    pl_ckpt_jnum(opt, "step", (double)m->optimizer_steps, &b);
    pl_ckpt_jnum(opt, "beta1", m->beta1, &b);
    pl_ckpt_jnum(opt, "beta2", m->beta2, &b);
    pl_ckpt_jnum(opt, "eps", m->eps, &b);
    pl_ckpt_jnum(opt, "weight_decay", m->weight_decay, &b);
    if (m->has_loss_scaler) {
        cJSON *gs = pl_ckpt_jobj(opt, "grad_scaler", &b);
        pl_ckpt_jnum(gs, "scale", m->loss_scale, &b);
        pl_ckpt_jnum(gs, "growth_tracker", (double)m->growth_tracker, &b);
        pl_ckpt_jnum(gs, "hysteresis_tracker", (double)m->hysteresis_tracker, &b);
    }
    cJSON *tok = pl_ckpt_jobj(root, "tokenizer", &b);
    pl_ckpt_jstr(tok, "type", m->tokenizer_type, &b);
    pl_ckpt_jstr(tok, "vocab_file", m->vocab_file, &b);
    pl_ckpt_jstr(tok, "merge_file", m->merge_file, &b);
    pl_ckpt_jstr(tok, "tokenizer_model", m->tokenizer_model, &b);
    if (m->vocab_extra_ids)
        pl_ckpt_jnum(tok, "vocab_extra_ids", (double)m->vocab_extra_ids, &b);
    if (m->legacy_tokenizer)
        b.ok &= tok && cJSON_AddBoolToObject(tok, "legacy", 1) != NULL;
    static const char *splits[] = {"replicated", "rows", "cols", "vocab", "rows_halves",
                                   "qkv_shared_kv"};
    cJSON *tensors = pl_ckpt_jobj(root, "tensors", &b);
    for (int i = 0; i < reg->n && b.ok; i++) {
        const pl_param *p = &reg->params[i];
        cJSON *t = pl_ckpt_jobj(tensors, p->name, &b);
        cJSON *shape = t ? cJSON_AddArrayToObject(t, "shape") : NULL;
        b.ok &= shape != NULL;
        for (int d = 0; d < p->ndim && b.ok; d++)
            b.ok &= cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->shape[d]));
        pl_ckpt_jstr(t, "tp_split", splits[p->split], &b);
        pl_ckpt_jnum(t, "pipeline_stage", p->stage, &b);
    }
    if (!b.ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

pl_status pl_ckpt_manifest_write(const char *idir, const char *text)
{
    char path[PATH_MAX_ + 32], sum[64];
    size_t n = strlen(text);
    snprintf(path, sizeof path, "%s/manifest.json", idir);
    pl_status st = pl_file_write_atomic(path, text, n);
    if (st)
        return st;
    snprintf(sum, sizeof sum, "%016" PRIx64 "  manifest.json\n", pl_xxh64(text, n, 0));
    snprintf(path, sizeof path, "%s/manifest.json.xxh64", idir);
    return pl_file_write_atomic(path, sum, strlen(sum));
}

/* ---- reading ---- */

static void fmt_value(const cJSON *v, char *out, size_t n)
{
    if (!v)
        snprintf(out, n, "missing");
    else if (cJSON_IsNumber(v))
        snprintf(out, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v))
        snprintf(out, n, "the string \"%.40s\"", v->valuestring);
    else
        snprintf(out, n, "not a number");
}

pl_status pl_ckpt_jfield(const cJSON *o, const char *obj, const char *key, double lo, double hi,
                         int integral, const char *mpath, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (isfinite(x) && x >= lo && x <= hi && (!integral || x == floor(x))) {
        *out = x;
        return PL_OK;
    }
    char got[96];
    fmt_value(v, got, sizeof got);
    return pl_errorf(PL_ERR_FORMAT, "%s: \"%s%s%s\" is %s; expected %s in [%.17g, %.17g]", mpath,
                     obj, *obj ? "." : "", key, got, integral ? "an integer" : "a number", lo, hi);
}

/* An optional number field: def when absent, else as pl_ckpt_jfield. */
static pl_status opt_field(const cJSON *o, const char *obj, const char *key, double def, double lo,
                           double hi, int integral, const char *mpath, double *out)
{
    if (!cJSON_HasObjectItem(o, key)) {
        *out = def;
        return PL_OK;
    }
    return pl_ckpt_jfield(o, obj, key, lo, hi, integral, mpath, out);
}

/* Index of the string item key in names[0..n), def when absent. */
static pl_status str_choice(const cJSON *o, const char *key, const char *const *names, int n,
                            int def, const char *mpath, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def;
    if (!v)
        return PL_OK;
    for (int i = 0; cJSON_IsString(v) && i < n; i++)
        if (strcmp(v->valuestring, names[i]) == 0) {
            *out = i;
            return PL_OK;
        }
    return pl_errorf(PL_ERR_FORMAT, "%s: \"model.%s\" is not one of the names plait knows", mpath,
                     key);
}

/* The architecture beyond the sizes (Megatron's argument names as keys); a
 * manifest without them (written before plait had other families) is a GPT. */
static pl_status arch_read(const cJSON *model, pl_model_config *c, const char *mpath)
{
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(model, "architecture");
    const pl_family_spec *fam = cJSON_IsString(arch) ? pl_family_find(arch->valuestring) : NULL;
    if (!fam)
        return pl_errorf(PL_ERR_FORMAT, "%s: \"model.architecture\" is missing or names no model "
                         "family plait knows", mpath);
    pl_family_apply(c, fam->family);
    int norm = 0, pos = 0;
    pl_status st = str_choice(model, "normalization", norm_names, 2, PL_NORM_LAYERNORM, mpath, &norm);
    if (!st)
        st = str_choice(model, "position_embedding_type", pos_names, 4, PL_POS_LEARNED, mpath, &pos);
    const struct {
        const char *key;
        double def, lo, hi;
        int integral;
    } f[] = {{"swiglu", 0, 0, 1, 1},
             {"num_query_groups", (double)c->heads, 1, (double)c->heads, 1},
             {"add_bias_linear", 1, 0, 1, 1},
             {"untie_embeddings_and_output_weights", 0, 0, 1, 1},
             {"rotary_base", 10000, 1e-30, 1e30, 0},
             {"rotary_percent", 1, 1e-30, 1, 0},
             {"use_rope_scaling", 0, 0, 1, 1},
             {"rope_scaling_factor", 8, 1e-30, 1e30, 0},
             {"hidden_dropout", 0, 0, BELOW_1, 0},
             {"attention_dropout", 0, 0, BELOW_1, 0},
             {"bert_binary_head", c->head.binary_head, 0, c->family == PL_FAMILY_BERT, 1},
             {"apply_residual_connection_post_layernorm", 0, 0, 1, 1}};
    double v[12];
    for (int i = 0; i < 12 && !st; i++)
        st = opt_field(model, "model", f[i].key, f[i].def, f[i].lo, f[i].hi, f[i].integral, mpath,
                       &v[i]);
    if (st)
        return st;
    if (c->heads % (int64_t)v[1])
        return pl_errorf(PL_ERR_FORMAT, "%s: \"model.num_query_groups\" is %lld, which does not "
                         "divide \"model.num_attention_heads\" %lld", mpath, (long long)v[1],
                         (long long)c->heads);
    c->block.norm = (pl_norm_kind)norm;
    c->block.norm_bias = norm == PL_NORM_LAYERNORM;
    c->block.pos = (pl_pos_kind)pos;
    c->block.act = v[0] != 0 ? PL_ACT_SWIGLU : PL_ACT_GELU;
    c->query_groups = (int64_t)v[1];
    c->block.bias = v[2] != 0;
    c->untie = v[3] != 0;
    c->rope = (pl_rope_config){v[4], v[5], v[6] != 0, v[7], 1.0, 4.0, 8192};
    c->hidden_dropout = (float)v[8];
    c->attention_dropout = (float)v[9];
    c->head.binary_head = v[10] != 0;
    c->block.res_post_norm = v[11] != 0;
    static const char *const block_types[] = {"pre_ln", "post_ln"};
    int post = 0;
    double exact = 0;
    PL_TRY(str_choice(model, "transformer_block_type", block_types, 2, 0, mpath, &post));
    PL_TRY(opt_field(model, "model", "gelu_exact", 0, 0, c->block.act == PL_ACT_GELU, 1, mpath,
                     &exact));
    if (post && (c->family == PL_FAMILY_T5 || c->block.res_post_norm))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"model.transformer_block_type\" post_ln with %s",
                         mpath, c->block.res_post_norm ? "apply_residual_connection_post_layernorm"
                                                       : "t5");
    c->block.post_norm = post;
    c->block.act = exact != 0 ? PL_ACT_GELU_ERF : c->block.act;
    double scale = 0;
    PL_TRY(opt_field(model, "model", "scale_embedding", 0, 0,
                     post && c->family == PL_FAMILY_BART, 1, mpath, &scale));
    c->scale_embedding = scale != 0;
    c->head.tokentypes = c->head.binary_head ? c->head.tokentypes : 0;
    int task = 0;
    PL_TRY(str_choice(model, "task", task_names, 5, PL_TASK_NONE, mpath, &task));
    if (task != PL_TASK_NONE) { /* a fine-tuned model: its head, its token types */
        double k, tt;
        PL_TRY(pl_ckpt_jfield(model, "model", "num_classes", 1, 1 << 20, 1, mpath, &k));
        PL_TRY(pl_ckpt_jfield(model, "model", "num_tokentypes", 0, 2, 1, mpath, &tt));
        pl_model_set_task(c, (pl_task)task, (int64_t)k);
        c->head.tokentypes = (int)tt;
    }
    if (pl_model_is_encdec(c)) {
        PL_TRY(pl_ckpt_jfield(model, "model", "decoder_num_layers", 1, MAX_LAYERS, 1, mpath,
                              &v[0]));
        PL_TRY(pl_ckpt_jfield(model, "model", "decoder_seq_length", 1, 1 << 24, 1, mpath,
                              &v[1]));
        c->dec_layers = (int64_t)v[0];
        c->dec_seq_length = (int64_t)v[1];
    }
    PL_TRY(pl_ckpt_t5_arch_read(model, c, mpath));
fail:
    return st;
}

/* The model config, each size in its range, then their consistency. */
static pl_status model_read(const cJSON *model, int tp, const char *mpath, pl_model_config *c)
{
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(model))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"model\" is missing or not an object", mpath);
    double v;
    pl_status st = PL_OK;
    for (size_t i = 0; i < N_FIELDS && !st; i++) {
        st = pl_ckpt_jfield(model, "model", config_fields[i].key, config_fields[i].lo,
                            config_fields[i].hi, 1, mpath, &v);
        *cfg_field(c, i) = (int64_t)v;
    }
    if (!st && !(st = pl_ckpt_jfield(model, "model", "make_vocab_size_divisible_by", 1, 1 << 16, 1,
                                     mpath, &v)))
        c->divisible_by = (int64_t)v;
    if (!st && !(st = pl_ckpt_jfield(model, "model", "init_method_std", 0, 1e6, 0, mpath, &v)))
        c->init_std = v;
    if (!st && !(st = pl_ckpt_jfield(model, "model", "layernorm_epsilon", 1e-30, 1e6, 0, mpath, &v)))
        c->ln_eps = (float)v;
    if (st)
        return st;
    if (c->hidden % c->heads && !cJSON_HasObjectItem(model, "kv_channels"))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"model.num_attention_heads\" %lld does not divide "
                         "\"model.hidden_size\" %lld", mpath, (long long)c->heads,
                         (long long)c->hidden);
    int64_t padded = pl_model_padded_vocab(c->vocab_size, c->divisible_by, tp);
    if (c->padded_vocab != padded)
        return pl_errorf(PL_ERR_FORMAT, "%s: \"model.padded_vocab_size\" is %lld but \"model."
                         "vocab_size\" %lld padded to a multiple of %lld x %d (TP) is %lld",
                         mpath, (long long)c->padded_vocab, (long long)c->vocab_size,
                         (long long)c->divisible_by, tp, (long long)padded);
    return arch_read(model, c, mpath);
}

static int expected_shape(const pl_model_config *c, const char *name, int64_t *l,
                          int64_t shape[2]);

/* An encoder-decoder stack's layer tensor (suffix after "N."): its block's
 * parameters, cross-attention included (ndim 0: not one). */
static int part_layer_shape(const pl_model_config *c, const char *suffix, int64_t shape[2])
{
    pl_block_param_name names[PL_BLOCK_MAX_PARAMS];
    const int np = pl_block_param_names(&c->block, names);
    for (int k = 0; k < np; k++)
        if (strcmp(suffix, names[k].suffix) == 0) {
            const pl_param_spec s = pl_model_layer_param(c, names[k].field, "", 0, 0, 1);
            shape[0] = s.shape[0], shape[1] = s.ndim == 2 ? s.shape[1] : 0;
            return s.ndim;
        }
    return 0;
}

/* An encoder-decoder's tensor: the output bias, or one of either stack's
 * (layer numbers: the encoder's 0..Le-1, the decoder's Le..). */
static int encdec_shape(const pl_model_config *c, const char *name, int64_t *l, int64_t shape[2])
{
    pl_model_config part[2];
    pl_model_encdec_parts(c, &part[0], &part[1]);
    *l = -1;
    /* pipelined: the decoder's copies of the embeddings, the stacks' of their bias tables */
    const char *orig = pl_model_tied_original(name);
    if (orig && strcmp(name, "output_layer.weight") != 0)
        name = orig;
    if (strcmp(name, pl_model_output_bias_name(c)) == 0) {
        shape[0] = c->padded_vocab, shape[1] = 0;
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        part[k].head = (pl_head_spec){0};
        const int nd = expected_shape(&part[k], name, l, shape);
        if (nd) {
            *l += *l >= 0 && k ? c->num_layers : 0;
            return nd;
        }
    }
    return 0;
}

/* The expected global shape of a tensor of the model c (ndim 0: not one of c's). */
static int expected_shape(const pl_model_config *c, const char *name, int64_t *l, int64_t shape[2])
{
    if (pl_model_is_encdec(c) && c->part == PL_PART_WHOLE)
        return encdec_shape(c, name, l, shape);
    const int64_t C = c->hidden, HS = pl_model_block_dims(c).HS, NH = c->heads;
    const int64_t G = c->query_groups;
    const int64_t QKV = (NH + 2 * G) * HS, F = c->ffn_hidden;
    const int64_t F1 = pl_block_act_gated(c->block.act) ? 2 * F : F;
    char lnf_w[PL_PARAM_NAME_MAX], lnf_b[PL_PARAM_NAME_MAX], pre[PL_PARAM_NAME_MAX];
    char relpos[PL_PARAM_NAME_MAX];
    pl_model_relpos_name(c, relpos, sizeof relpos);
    char eln_w[PL_PARAM_NAME_MAX], eln_b[PL_PARAM_NAME_MAX];
    snprintf(lnf_w, sizeof lnf_w, "%s.final_layernorm.weight", pl_model_stack(c));
    snprintf(lnf_b, sizeof lnf_b, "%s.final_layernorm.bias", pl_model_stack(c));
    snprintf(eln_w, sizeof eln_w, "%s.initial_layernorm.weight", pl_model_stack(c));
    snprintf(eln_b, sizeof eln_b, "%s.initial_layernorm.bias", pl_model_stack(c));
    const int64_t LNF = pl_model_post_ln(c) ? 0 : C, ELN = pl_model_post_ln(c) ? C : 0;
    snprintf(pre, sizeof pre, "%s.layers.", pl_model_stack(c));
    const pl_head_spec *h = &c->head;
    const int64_t TT = h->tokentypes, LM = h->lm_transform ? C : 0;
    const int64_t PB = h->binary_head || PL_TASK_POOLED(h->task) ? C : 0;
    const int64_t SEQ = PL_TASK_POOLED(h->task) ? h->classes : 0;
    const int64_t TOK = h->task == PL_TASK_TOKEN || h->task == PL_TASK_SPAN ? h->classes : 0;
    const struct {
        const char *name;
        int ndim;
        int64_t r, k;
    } top[] = {{"embedding.word_embeddings.weight", 2, c->padded_vocab, C},
               {"embedding.position_embeddings.weight", 2, c->max_positions, C},
               /* a post-LN BART's decoder's own (its decoder part) */
               {"decoder_embedding.position_embeddings.weight", 2,
                c->part == PL_PART_DECODER && c->block.post_norm ? c->max_positions : 0, C},
               {"output_layer.weight", 2, c->padded_vocab, C},
               {relpos, 2, c->block.pos == PL_POS_RELATIVE ? c->rel_buckets : 0, NH},
               {lnf_w, 1, LNF, 0},
               {lnf_b, 1, LNF, 0},
               {eln_w, 1, ELN, 0}, /* a post-LN model's norm of the embeddings */
               {eln_b, 1, ELN, 0},
               /* BERT's (a zero size: not in this model) */
               {"embedding.tokentype_embeddings.weight", 2, TT, C},
               {"lm_head.dense.weight", 2, LM, LM},
               {"lm_head.dense.bias", 1, LM, 0},
               {"lm_head.layer_norm.weight", 1, LM, 0},
               {"lm_head.layer_norm.bias", 1, LM, 0},
               {"output_layer.bias", 1, h->output_bias ? c->padded_vocab : 0, 0},
               {"pooler.dense.weight", 2, PB, PB},
               {"pooler.dense.bias", 1, PB, 0},
               {"binary_head.weight", 2, h->binary_head ? 2 : 0, C},
               {"binary_head.bias", 1, h->binary_head ? 2 : 0, 0},
               /* a fine-tuned model's task head (plait finetune) */
               {"classification_head.weight", 2, SEQ, C},
               {"classification_head.bias", 1, SEQ, 0},
               {"classifier.mlp.layer0.weight", 2, TOK, C},
               {"classifier.mlp.layer0.bias", 1, TOK, 0}},
      layer[] = {{"input_layernorm.weight", 1, C, 0},
                 {"input_layernorm.bias", 1, C, 0},
                 {"self_attention.linear_qkv.weight", 2, QKV, C},
                 {"self_attention.linear_qkv.bias", 1, QKV, 0},
                 {"self_attention.linear_proj.weight", 2, C, NH * HS},
                 {"self_attention.linear_proj.bias", 1, C, 0},
                 {"pre_mlp_layernorm.weight", 1, C, 0},
                 {"pre_mlp_layernorm.bias", 1, C, 0},
                 {"mlp.linear_fc1.weight", 2, F1, C},
                 {"mlp.linear_fc1.bias", 1, F1, 0},
                 {"mlp.linear_fc2.weight", 2, C, F},
                 {"mlp.linear_fc2.bias", 1, C, 0}};
    *l = -1;
    for (size_t i = 0; i < sizeof top / sizeof *top; i++)
        if (strcmp(name, top[i].name) == 0) {
            shape[0] = top[i].r, shape[1] = top[i].k;
            return top[i].r > 0 ? top[i].ndim : 0;
        }
    if (strncmp(name, pre, strlen(pre)) != 0)
        return 0;
    char *end;
    const char *p = name + strlen(pre);
    if (*p < '0' || *p > '9')
        return 0;
    long long v = strtoll(p, &end, 10);
    if (*end != '.' || v < 0)
        return 0;
    *l = v;
    if (c->part != PL_PART_WHOLE || c->block.post_norm) /* post-norm layers' norm names */
        return part_layer_shape(c, end + 1, shape);
    for (size_t i = 0; i < sizeof layer / sizeof *layer; i++)
        if (strcmp(end + 1, layer[i].name) == 0) {
            shape[0] = layer[i].r, shape[1] = layer[i].k;
            return layer[i].ndim;
        }
    return 0;
}

/* The "tensors" table against the sizes: every layer present, shapes agree. */
static pl_status tensors_check(const cJSON *tensors, const pl_model_config *c, const char *mpath)
{
    if (!cJSON_IsObject(tensors))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"tensors\" is missing or not an object", mpath);
    const int64_t nl = c->num_layers + (pl_model_is_encdec(c) ? c->dec_layers : 0);
    unsigned char *seen = pl_calloc((size_t)nl, 1);
    if (!seen)
        return pl_errorf(PL_ERR_NOMEM, "out of memory checking %s", mpath);
    pl_status st = PL_OK;
    int have_wte = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors)
    {
        int64_t l, want[2];
        int nd = expected_shape(c, t->string, &l, want);
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        int n = cJSON_GetArraySize(shape);
        int ok = nd > 0 && cJSON_IsArray(shape) && n == nd;
        for (int d = 0; ok && d < n; d++) {
            const cJSON *x = cJSON_GetArrayItem(shape, d);
            ok = cJSON_IsNumber(x) && x->valuedouble == (double)want[d];
        }
        if (l >= nl) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: tensor %s belongs to layer %lld but \"model."
                           "num_layers\" is %lld", mpath, t->string, (long long)l,
                           (long long)c->num_layers);
            break;
        }
        if (!ok) {
            st = nd == 0 ? pl_errorf(PL_ERR_FORMAT, "%s: tensor %s is not a parameter of this "
                                     "model", mpath, t->string)
                         : pl_errorf(PL_ERR_FORMAT, "%s: tensor %s's \"shape\" is not [%lld%s%.0lld] "
                                     "as the model's sizes give", mpath, t->string,
                                     (long long)want[0], nd == 2 ? ", " : "",
                                     nd == 2 ? (long long)want[1] : 0LL);
            break;
        }
        if (l >= 0)
            seen[l] = 1;
        have_wte |= strcmp(t->string, "embedding.word_embeddings.weight") == 0;
    }
    for (int64_t l = 0; !st && l < nl; l++)
        if (!seen[l])
            st = pl_errorf(PL_ERR_FORMAT, "%s: \"model.num_layers\" is %lld but \"tensors\" has "
                           "no tensor of layer %lld", mpath, (long long)c->num_layers, (long long)l);
    if (!st && !have_wte)
        st = pl_errorf(PL_ERR_FORMAT, "%s: \"tensors\" lacks embedding.word_embeddings.weight",
                       mpath);
    pl_free(seen);
    return st;
}

/* The run's state: iteration, samples, optimizer, scheduler, layout. */
static pl_status state_read(const cJSON *root, int64_t it, const char *mpath, pl_ckpt_meta *m)
{
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(root, "scheduler");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(root, "parallel");
    double x[20];
    const struct {
        const cJSON *o;
        const char *obj, *key;
        double lo, hi;
        int integral;
    } f[] = {
        {root, "", "iteration", 0, BIG, 1},
        {root, "", "consumed_train_samples", 0, BIG, 1},
        {root, "", "consumed_valid_samples", 0, BIG, 1},
        {root, "", "seed", 0, TWO_64, 1}, /* written as (double)(uint64_t)seed: 2^64 from -1 */
        {opt, "optimizer", "step", 0, BIG, 1},
        {opt, "optimizer", "beta1", 0, BELOW_1, 0},
        {opt, "optimizer", "beta2", 0, BELOW_1, 0},
        {opt, "optimizer", "eps", DBL_MIN, 1e6, 0},
        {opt, "optimizer", "weight_decay", 0, 1e6, 0},
        {sch, "scheduler", "max_lr", 0, 1e6, 0},
        {sch, "scheduler", "min_lr", 0, 1e6, 0},
        {sch, "scheduler", "init_lr", 0, 1e6, 0},
        {sch, "scheduler", "lr_warmup_steps", 0, BIG, 1},
        {sch, "scheduler", "lr_decay_steps", 0, BIG, 1},
        {sch, "scheduler", "num_steps", 0, BIG, 1},
        {par, "parallel", "tensor_model_parallel_size", 1, 1 << 16, 1},
        {par, "parallel", "pipeline_model_parallel_size", 1, 1 << 16, 1},
        {par, "parallel", "data_parallel_size", 1, 1 << 24, 1},
    };
    const int nf = (int)(sizeof f / sizeof *f);
    pl_status st = PL_OK;
    for (int i = 0; i < nf && !st; i++)
        st = pl_ckpt_jfield(f[i].o, f[i].obj, f[i].key, f[i].lo, f[i].hi, f[i].integral, mpath,
                            &x[i]);
    if (st)
        return st;
    if ((int64_t)x[0] != (it == -2 ? 0 : it)) /* release: iteration 0 */
        return pl_errorf(PL_ERR_FORMAT, "%s: \"iteration\" is %lld but the directory is iteration "
                         "%lld", mpath, (long long)x[0], (long long)it);
    m->iteration = (int64_t)x[0];
    m->consumed_train_samples = (int64_t)x[1];
    m->consumed_valid_samples = (int64_t)x[2];
    m->seed = x[3] >= TWO_64 ? UINT64_MAX : (uint64_t)x[3];
    m->optimizer_steps = (int64_t)x[4];
    m->beta1 = x[5], m->beta2 = x[6], m->eps = x[7], m->weight_decay = x[8];
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(opt, "type");
    m->lamb = cJSON_IsString(type) && strcmp(type->valuestring, "lamb") == 0;
    m->schedule.max_lr = x[9], m->schedule.min_lr = x[10], m->schedule.init_lr = x[11];
    m->schedule.warmup_steps = (int64_t)x[12];
    m->schedule.decay_steps = (int64_t)x[13];
    m->schedule.num_steps = (int64_t)x[14];
    m->tp = (int)x[15], m->pp = (int)x[16], m->dp = (int)x[17];
    m->pp_split = 0;
    if (cJSON_GetObjectItemCaseSensitive(par, "pipeline_model_parallel_split_rank")) {
        /* optional: a pipelined encoder-decoder's */
        if ((st = pl_ckpt_jfield(par, "parallel", "pipeline_model_parallel_split_rank", 1,
                                 m->pp - 1, 1, mpath, &x[18])))
            return st;
        m->pp_split = (int)x[18];
    }
    const cJSON *style = cJSON_GetObjectItemCaseSensitive(sch, "lr_decay_style");
    int sv = cJSON_IsString(style) ? pl_lr_style_parse(style->valuestring) : -1;
    if (sv < 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: \"scheduler.lr_decay_style\" is missing or not a "
                         "style plait knows", mpath);
    m->schedule.style = (pl_lr_style)sv;
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(opt, "grad_scaler");
    if (gs) { /* optional: only fp16 runs save it */
        m->has_loss_scaler = 1;
        static const char *const keys[3] = {"scale", "growth_tracker", "hysteresis_tracker"};
        for (int i = 0; i < 3 && !st; i++)
            st = pl_ckpt_jfield(gs, "optimizer.grad_scaler", keys[i], i ? 0 : 1e-38,
                                i ? 1 << 30 : 3.4e38, i > 0, mpath, &x[i]);
        if (st)
            return st;
        m->loss_scale = x[0];
        m->growth_tracker = (int64_t)x[1];
        m->hysteresis_tracker = (int64_t)x[2];
    }
    return PL_OK;
}

/* Appends a string to arena (NUL-terminated); *off its offset, SIZE_MAX for NULL. */
static pl_status keep(pl_bytes *arena, const char *a, const char *b, size_t *off)
{
    *off = SIZE_MAX;
    if (!b)
        return PL_OK;
    *off = arena->n;
    pl_status st = a ? pl_bytes_append(arena, a, strlen(a)) : PL_OK;
    if (!st && a)
        st = pl_bytes_append(arena, "/", 1);
    return st ? st : pl_bytes_append(arena, b, strlen(b) + 1);
}

/* The tokenizer and data strings. Tokenizer files become paths below idir,
 * checked to be confined to it (version >= 2); a version 1 manifest's own
 * paths are dropped with a warning. */
static pl_status strings_read(const cJSON *root, int version, int idfd, const char *idir,
                              const char *mpath, pl_ckpt_meta *m, char **strings)
{
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    static const char *keys[5] = {"type", "vocab_file", "merge_file", "tokenizer_model",
                                  "data_hash"};
    const char **dst[5] = {&m->tokenizer_type, &m->vocab_file, &m->merge_file, &m->tokenizer_model,
                           &m->data_hash};
    pl_bytes arena = {0};
    size_t offs[5];
    pl_status st = PL_OK;
    int dropped = 0;
    for (int k = 0; k < 5 && !st; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(k == 4 ? root : tok, keys[k]);
        const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
        int is_path = k >= 1 && k <= 3;
        if (s && is_path && version < 2) {
            dropped = 1;
            s = NULL;
        }
        if (s && is_path) {
            char what[64];
            snprintf(what, sizeof what, "\"tokenizer.%s\"", keys[k]);
            st = pl_ckpt_rel_check(s, what, mpath);
            if (!st)
                st = pl_ckpt_check_in(idfd, idir, s, k == 3);
        }
        if (!st)
            st = keep(&arena, is_path ? idir : NULL, s, &offs[k]);
    }
    if (st) {
        pl_bytes_free(&arena);
        return st;
    }
    if (dropped)
        pl_log_warn("%s: written by an older plait, it names tokenizer files outside the "
                    "checkpoint; they are not used (give --vocab-file, --merge-file or "
                    "--tokenizer-model)", mpath);
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(tok, "vocab_extra_ids");
    double ex = 0;
    if (extra && (st = pl_ckpt_jfield(tok, "tokenizer", "vocab_extra_ids", 0, 1 << 20, 1, mpath,
                                      &ex))) {
        pl_bytes_free(&arena);
        return st;
    }
    m->vocab_extra_ids = (int64_t)ex;
    m->legacy_tokenizer = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tok, "legacy"));
    for (int k = 0; k < 5; k++)
        *dst[k] = offs[k] == SIZE_MAX ? NULL : arena.data + offs[k];
    *strings = arena.data;
    return PL_OK;
}

/* The manifest's bytes, checked against manifest.json.xxh64 when present;
 * *has_sum tells whether it was. */
static pl_status verified_text(int idfd, const char *idir, const char *mpath, char **text,
                               int *has_sum)
{
    pl_mmap m, s = {0};
    pl_status st = pl_ckpt_map_in(idfd, idir, "manifest.json", &m);
    if (st)
        return st;
    struct stat sb;
    *has_sum = fstatat(idfd, "manifest.json.xxh64", &sb, AT_SYMLINK_NOFOLLOW) == 0;
    if (*has_sum) /* a link, FIFO or directory there is refused, not skipped */
        st = pl_ckpt_map_in(idfd, idir, "manifest.json.xxh64", &s);
    uint64_t got = pl_xxh64(m.data ? m.data : (const uint8_t *)"", m.size, 0);
    if (!st && *has_sum) {
        char hex[17] = "";
        if (s.size >= 16)
            memcpy(hex, s.data, 16);
        char *end;
        uint64_t want = strtoull(hex, &end, 16);
        if (s.size < 16 || end != hex + 16)
            st = pl_errorf(PL_ERR_FORMAT, "%s.xxh64: expected 16 hex digits (the manifest's "
                           "xxh64)", mpath);
        else if (want != got)
            st = pl_errorf(PL_ERR_FORMAT, "%s: xxh64 %016" PRIx64 ", %s.xxh64 says %016" PRIx64
                           " (the manifest was changed or corrupted)", mpath, got, mpath, want);
    }
    *text = NULL;
    if (!st) {
        *text = pl_malloc(m.size + 1);
        if (!*text)
            st = pl_errorf(PL_ERR_NOMEM, "%s: out of memory", mpath);
        else {
            if (m.size)
                memcpy(*text, m.data, m.size);
            (*text)[m.size] = '\0';
        }
    }
    pl_mmap_close(&s);
    pl_mmap_close(&m);
    return st;
}

pl_status pl_ckpt_manifest_read(int idfd, const char *idir, int64_t it, cJSON **root_out,
                                pl_model_config *cfg_out, pl_ckpt_meta *meta, char **strings)
{
    char mpath[PATH_MAX_ + 32];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", idir);
    *root_out = NULL;
    *strings = NULL;
    memset(meta, 0, sizeof *meta);
    char *text = NULL;
    int has_sum;
    pl_status st = verified_text(idfd, idir, mpath, &text, &has_sum);
    if (st)
        return st;
    pl_json_init();
    pl_json_oom_take();
    cJSON *root = cJSON_Parse(text);
    pl_free(text);
    if (!root && pl_json_oom_take())
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory parsing the manifest", mpath);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0) {
        cJSON_Delete(root);
        return pl_errorf(PL_ERR_FORMAT, "%s: not a plait checkpoint manifest", mpath);
    }
    double version = 1;
    pl_model_config c;
    if (cJSON_HasObjectItem(root, "version"))
        st = pl_ckpt_jfield(root, "", "version", 1, VERSION, 1, mpath, &version);
    if (!st && version >= 2 && !has_sum)
        st = pl_errorf(PL_ERR_FORMAT, "%s.xxh64 is missing: a version %d manifest records its "
                       "checksum there", mpath, (int)version);
    if (!st && !has_sum)
        pl_log_warn("%s: written by an older plait, without a checksum: not verified", mpath);
    if (!st)
        st = state_read(root, it, mpath, meta);
    if (!st)
        st = model_read(cJSON_GetObjectItemCaseSensitive(root, "model"), meta->tp, mpath, &c);
    if (!st)
        st = tensors_check(cJSON_GetObjectItemCaseSensitive(root, "tensors"), &c, mpath);
    if (!st)
        st = pl_ckpt_mmb_read(root, mpath, meta);
    if (!st)
        st = strings_read(root, (int)version, idfd, idir, mpath, meta, strings);
    if (st) {
        cJSON_Delete(root);
        return st;
    }
    if (cfg_out)
        *cfg_out = c;
    *root_out = root;
    return PL_OK;
}

pl_status pl_ckpt_config_match(const pl_model_config *saved, const pl_model_config *run,
                               const char *mpath)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        int64_t a = cfg_value(saved, i), b = cfg_value(run, i);
        /* Megatron's BERT WordPiece tokenizer appends [BOS] and [EOS] to vocab.txt: a
         * BERT or BART whose vocabulary is the file's (a Hugging Face import) has two
         * tokens fewer than the run's, in the same padded table (the two rows padding) */
        if (a + 2 == b && strcmp(config_fields[i].key, "vocab_size") == 0 &&
            (saved->family == PL_FAMILY_BERT || saved->family == PL_FAMILY_BART) &&
            saved->padded_vocab == run->padded_vocab) {
            pl_log_info("%s: the checkpoint's vocabulary has %lld tokens, this run's tokenizer "
                        "%lld (vocab.txt's and Megatron's [BOS], [EOS]): their rows start as "
                        "padding", mpath, (long long)a, (long long)b);
            continue;
        }
        if (a != b && strcmp(config_fields[i].key, "seq_length") != 0)
            return pl_errorf(PL_ERR_ARG, "%s: %s is %lld in the checkpoint but %lld in this run",
                             mpath, config_fields[i].flag, (long long)a, (long long)b);
    }
    const char *what = NULL;
    if (saved->family != run->family)
        what = "--model";
    else if (saved->block.norm != run->block.norm)
        what = "--normalization";
    else if (saved->block.pos != run->block.pos)
        what = "--position-embedding-type";
    else if ((float)saved->ln_eps != (float)run->ln_eps)
        what = "--norm-epsilon";
    else if (saved->block.post_norm != run->block.post_norm)
        what = "--transformer-block-type";
    else if (saved->scale_embedding != run->scale_embedding)
        what = "--scale-embedding";
    else if (saved->block.act != run->block.act)
        what = "--swiglu (or the GELU: exact in a post-LN BERT)";
    else if (saved->query_groups != run->query_groups)
        what = "--num-query-groups";
    else if (saved->block.bias != run->block.bias)
        what = "--disable-bias-linear";
    else if (saved->untie != run->untie)
        what = "--untie-embeddings-and-output-weights";
    else if (saved->block.res_post_norm != run->block.res_post_norm)
        what = "--apply-residual-connection-post-layernorm";
    else if (saved->head.task != run->head.task || saved->head.classes != run->head.classes)
        what = "the fine-tuning task or its number of classes";
    else if (saved->head.binary_head != run->head.binary_head)
        what = "--bert-no-binary-head";
    else if (saved->dec_layers != run->dec_layers)
        what = "--decoder-num-layers";
    else if (pl_ckpt_t5_arch_differs(saved, run))
        what = pl_ckpt_t5_arch_differs(saved, run);
    else if (saved->block.pos == PL_POS_ROPE &&
             ((float)saved->rope.base != (float)run->rope.base ||
              (float)saved->rope.percent != (float)run->rope.percent ||
              saved->rope.scaling != run->rope.scaling ||
              (saved->rope.scaling && saved->rope.factor != run->rope.factor)))
        what = "--rotary-base, --rotary-percent or --use-rope-scaling";
    if (what)
        return pl_errorf(PL_ERR_ARG, "%s: the checkpoint's architecture differs from this run's in "
                         "%s (checkpoint: %s)", mpath, what, pl_family_get(saved->family)->name);
    return PL_OK;
}
