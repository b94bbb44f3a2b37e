/* config.json of transformers' GPT2Config and LlamaConfig, both ways (ckpt/hf.h).
 *
 * What each class computes, from models/gpt2/modeling_gpt2.py and
 * models/llama/modeling_llama.py, against plait's block (nn/block.h):
 *   GPT2LMHeadModel: pre-LayerNorm (bias), GELU "gelu_new" (tanh), learned
 *     positions, causal multi-head attention scaled by 1/sqrt(head_dim), biases
 *     everywhere, lm_head tied unless tie_word_embeddings is false.
 *   LlamaForCausalLM: pre-RMSNorm (no bias), SwiGLU (silu), rotary positions on
 *     the whole head (rotate_half), grouped-query attention, no biases, the
 *     llama3 rope scaling or none, lm_head untied unless tie_word_embeddings.
 * Anything else is refused: by export naming plait's setting, by import naming
 * the config.json key. */
#include "ckpt/hf.h"

#include "base/log.h"
#include "model/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shortest decimal that reads back as the float f (1e-05, not 9.99999975e-06). */
static double float_decimal(float f)
{
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f)
            return strtod(buf, NULL);
    }
    return (double)f;
}

static const char *refuse_export(const pl_model_config *c, const char *cls)
{
    const pl_block_spec *b = &c->block;
    const int llama = strcmp(cls, "LlamaForCausalLM") == 0;
    if (b->post_norm)
        return "post-layer normalization (Megatron core's layers are pre-norm)";
    if (b->res_post_norm)
        return "--apply-residual-connection-post-layernorm (Hugging Face's residuals are the "
               "layer's input)";
    if (b->cross_attention || pl_model_is_encdec(c))
        return "an encoder-decoder model";
    if (b->mask != PL_MASK_CAUSAL)
        return "a bidirectional (non-causal) mask";
    if (c->head.task != PL_TASK_NONE || !c->head.lm_head || c->head.lm_transform ||
        c->head.output_bias || c->head.binary_head || c->head.tokentypes)
        return "heads other than the language-model output layer";
    if (!llama) {
        if (b->norm != PL_NORM_LAYERNORM || !b->norm_bias)
            return "--normalization RMSNorm (GPT-2 has LayerNorm with a bias)";
        if (b->act != PL_ACT_GELU)
            return "--swiglu (GPT-2's MLP is GELU)";
        if (b->pos != PL_POS_LEARNED)
            return "--position-embedding-type other than learned_absolute";
        if (!b->bias)
            return "--disable-bias-linear (GPT-2's layers have biases)";
        if (c->query_groups != c->heads)
            return "--group-query-attention (GPT-2 is multi-head)";
    } else {
        if (b->norm != PL_NORM_RMSNORM || b->norm_bias)
            return "--normalization LayerNorm (Llama has RMSNorm without a bias)";
        if (b->act != PL_ACT_SWIGLU)
            return "a GELU MLP (Llama's is SwiGLU)";
        if (b->pos != PL_POS_ROPE)
            return "--position-embedding-type other than rope";
        if (b->bias)
            return "biases in the linear layers (Llama has none: --disable-bias-linear)";
        if (c->rope.percent != 1.0)
            return "--rotary-percent below 1 (Llama rotates the whole head)";
    }
    return NULL;
}

pl_status pl_hf_config_build(const pl_model_config *c, int bf16, int64_t bos, int64_t eos,
                             cJSON **out)
{
    *out = NULL;
    /* a GPT with Llama's layer (SwiGLU) is a tied Llama, as model/hf_names.h maps it */
    const char *cls = c->family == PL_FAMILY_GPT && c->block.act == PL_ACT_SWIGLU
                          ? "LlamaForCausalLM" : pl_family_get(c->family)->hf_architecture;
    if (c->family == PL_FAMILY_T5)
        return pl_hf_t5_config_build(c, bf16, eos, out);
    if (c->family == PL_FAMILY_BERT) /* ckpt/hf_bert.c; bos carries BERT's [PAD] id */
        return pl_hf_bert_config_build(c, bf16, bos, out);
    if (c->family == PL_FAMILY_BART) /* ckpt/hf_bart.c (hf_export passes the [PAD] id) */
        return pl_hf_bart_config_build(c, bf16, bos, eos, -1, out);
    if (c->family != PL_FAMILY_GPT && c->family != PL_FAMILY_LLAMA)
        return pl_errorf(PL_ERR_ARG, "a %s checkpoint: the Hugging Face export writes "
                         "GPT2LMHeadModel (--model gpt) and LlamaForCausalLM (--model llama) only",
                         pl_family_get(c->family)->name);
    const char *why = refuse_export(c, cls);
    if (why)
        return pl_errorf(PL_ERR_ARG, "the checkpoint's model has %s, which %s cannot express",
                         why, cls);
    const pl_block_dims d = pl_model_block_dims(c);
    cJSON *j = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    int ok = j && arch && cJSON_AddItemToObject(j, "architectures", arch) &&
             cJSON_AddItemToArray(arch, cJSON_CreateString(cls));
    if (!ok)
        cJSON_Delete(arch);
#define NUM(k, v) (ok = ok && cJSON_AddNumberToObject(j, k, (double)(v)) != NULL)
#define STR(k, v) (ok = ok && cJSON_AddStringToObject(j, k, v) != NULL)
#define BOOL(k, v) (ok = ok && cJSON_AddBoolToObject(j, k, v) != NULL)
    if (strcmp(cls, "GPT2LMHeadModel") == 0) {
        STR("model_type", "gpt2");
        NUM("vocab_size", c->vocab_size);
        NUM("n_positions", c->max_positions);
        NUM("n_ctx", c->max_positions);
        NUM("n_embd", d.C);
        NUM("n_layer", c->num_layers);
        NUM("n_head", d.NH);
        NUM("n_inner", d.F);
        STR("activation_function", "gelu_new");
        NUM("resid_pdrop", float_decimal(c->hidden_dropout));
        NUM("embd_pdrop", float_decimal(c->hidden_dropout));
        NUM("attn_pdrop", float_decimal(c->attention_dropout));
        NUM("layer_norm_epsilon", float_decimal(c->ln_eps));
        NUM("initializer_range", c->init_std);
        BOOL("scale_attn_weights", 1);
        BOOL("scale_attn_by_inverse_layer_idx", 0);
        BOOL("reorder_and_upcast_attn", 0);
    } else {
        STR("model_type", "llama");
        NUM("vocab_size", c->vocab_size);
        NUM("hidden_size", d.C);
        NUM("intermediate_size", d.F);
        NUM("num_hidden_layers", c->num_layers);
        NUM("num_attention_heads", d.NH);
        NUM("num_key_value_heads", d.G);
        NUM("head_dim", d.HS);
        STR("hidden_act", "silu");
        NUM("max_position_embeddings", c->max_positions);
        NUM("rms_norm_eps", float_decimal(c->ln_eps));
        NUM("rope_theta", c->rope.base);
        if (c->rope.scaling) {
            cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
            ok = ok && rs && cJSON_AddStringToObject(rs, "rope_type", "llama3") &&
                 cJSON_AddNumberToObject(rs, "factor", c->rope.factor) &&
                 cJSON_AddNumberToObject(rs, "low_freq_factor", c->rope.low_freq_factor) &&
                 cJSON_AddNumberToObject(rs, "high_freq_factor", c->rope.high_freq_factor) &&
                 cJSON_AddNumberToObject(rs, "original_max_position_embeddings",
                                         (double)c->rope.original_max_positions);
        } else {
            ok = ok && cJSON_AddNullToObject(j, "rope_scaling");
        }
        BOOL("attention_bias", 0);
        BOOL("mlp_bias", 0);
        NUM("attention_dropout", float_decimal(c->attention_dropout));
        NUM("initializer_range", c->init_std);
        NUM("pretraining_tp", 1);
    }
    BOOL("tie_word_embeddings", !c->untie);
    BOOL("use_cache", 1);
    if (bos >= 0)
        NUM("bos_token_id", bos);
    if (eos >= 0)
        NUM("eos_token_id", eos);
    STR("torch_dtype", bf16 ? "bfloat16" : "float32");
#undef NUM
#undef STR
#undef BOOL
    if (!ok) {
        cJSON_Delete(j);
        return pl_errorf(PL_ERR_NOMEM, "out of memory building config.json");
    }
    *out = j;
    return PL_OK;
}

/* ---- reading ---- */

typedef struct hf_reader {
    const cJSON *j;
    const char *path;
} hf_reader;

/* An integer key in [lo, hi]; def when absent or null (def < 0: required). */
static pl_status get_int(const hf_reader *r, const char *key, int64_t def, int64_t lo, int64_t hi,
                         int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->j, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" is missing", r->path, key);
        *out = def;
        return PL_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be an integer in [%lld, %lld]", r->path, key,
                         (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return PL_OK;
}

static pl_status get_num(const hf_reader *r, const char *key, double def, double lo, double hi,
                         double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return PL_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be a number in [%g, %g]", r->path, key, lo,
                         hi);
    *out = v->valuedouble;
    return PL_OK;
}

/* A boolean key; absent: def. want >= 0: any other value is refused with why. */
static pl_status get_bool(const hf_reader *r, const char *key, int def, int want, const char *why,
                          int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->j, key);
    int x = def;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v))
            return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be true or false", r->path, key);
        x = cJSON_IsTrue(v);
    }
    if (want >= 0 && x != want)
        return pl_errorf(PL_ERR_ARG, "%s: \"%s\": %s is not supported: %s", r->path, key,
                         x ? "true" : "false", why);
    *out = x;
    return PL_OK;
}

/* A string key; absent: def. ok: '|'-separated accepted values. */
static pl_status get_choice(const hf_reader *r, const char *key, const char *def, const char *ok,
                            const char *why)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->j, key);
    const char *s = def;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v))
            return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be a string", r->path, key);
        s = v->valuestring;
    }
    size_t n = strlen(s);
    for (const char *p = ok; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0)
            return PL_OK;
        p += len + (e != NULL);
    }
    return pl_errorf(PL_ERR_ARG, "%s: \"%s\": \"%s\" is not supported (%s)", r->path, key, s, why);
}

/* Keys whose presence with a non-default value plait cannot run. */
static pl_status refuse_keys(const hf_reader *r, const char *const *keys)
{
    for (; *keys; keys++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->j, *keys);
        if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v)) {
            char *s = cJSON_PrintUnformatted(v);
            pl_status st = pl_errorf(PL_ERR_ARG, "%s: \"%s\": %s is not supported by plait's "
                                     "block", r->path, *keys, s ? s : "(a value)");
            cJSON_free(s);
            return st;
        }
    }
    return PL_OK;
}

static pl_status parse_gpt2(const hf_reader *r, pl_model_config *c)
{
    static const char *const refused[] = {"add_cross_attention", "scale_attn_by_inverse_layer_idx",
                                          NULL};
    int64_t C, inner;
    double resid, embd, attn, eps;
    int tie, scale;
    pl_status st = PL_OK;
    pl_family_apply(c, PL_FAMILY_GPT);
    PL_TRY(refuse_keys(r, refused));
    PL_TRY(get_int(r, "n_embd", -1, 1, 1 << 20, &C));
    PL_TRY(get_int(r, "n_layer", -1, 1, 10000, &c->num_layers));
    PL_TRY(get_int(r, "n_head", -1, 1, 1 << 16, &c->heads));
    PL_TRY(get_int(r, "n_positions", -1, 1, 1 << 24, &c->max_positions));
    PL_TRY(get_int(r, "n_inner", 4 * C, 1, 1 << 24, &inner));
    PL_TRY(get_choice(r, "activation_function", "gelu_new", "gelu_new|gelu_pytorch_tanh",
                      "plait's GPT MLP is GELU's tanh approximation"));
    PL_TRY(get_bool(r, "scale_attn_weights", 1, 1, "plait scales attention by 1/sqrt(head_dim)",
                    &scale));
    PL_TRY(get_num(r, "resid_pdrop", 0.1, 0, 0.999, &resid));
    PL_TRY(get_num(r, "embd_pdrop", resid, 0, 0.999, &embd));
    PL_TRY(get_num(r, "attn_pdrop", 0.1, 0, 0.999, &attn));
    PL_TRY(get_num(r, "layer_norm_epsilon", 1e-5, 1e-30, 1, &eps));
    PL_TRY(get_bool(r, "tie_word_embeddings", 1, -1, NULL, &tie));
    if (embd != resid)
        pl_log_warn("%s: embd_pdrop %g differs from resid_pdrop %g: plait's --hidden-dropout "
                    "(both) is resid_pdrop", r->path, embd, resid);
    c->hidden = C;
    c->ffn_hidden = inner;
    c->query_groups = c->heads;
    c->hidden_dropout = (float)resid;
    c->attention_dropout = (float)attn;
    c->ln_eps = (float)eps;
    c->untie = !tie;
    c->rope = (pl_rope_config){10000.0, 1.0, 0, 8.0, 1.0, 4.0, 8192};
fail:
    return st;
}

static pl_status parse_rope_scaling(const hf_reader *r, pl_model_config *c)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r->j, "rope_scaling");
    c->rope.scaling = 0;
    if (!rs || cJSON_IsNull(rs))
        return PL_OK;
    hf_reader s = {rs, r->path};
    pl_status st = PL_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    const char *key = type ? "rope_type" : "type";
    PL_TRY(get_choice(&s, key, "", "llama3", "rope_scaling: plait has Llama 3.1's scaling only"));
    double f, lo, hi, orig;
    PL_TRY(get_num(&s, "factor", 8, 1e-30, 1e30, &f));
    PL_TRY(get_num(&s, "low_freq_factor", 1, 0, 1e30, &lo));
    PL_TRY(get_num(&s, "high_freq_factor", 4, 0, 1e30, &hi));
    PL_TRY(get_num(&s, "original_max_position_embeddings", 8192, 1, 1e9, &orig));
    if (lo != 1.0 || hi != 4.0 || orig != 8192)
        return pl_errorf(PL_ERR_ARG, "%s: \"rope_scaling\": low_freq_factor %g, high_freq_factor "
                         "%g, original_max_position_embeddings %g are not supported (plait's "
                         "--use-rope-scaling has Llama 3.1's 1, 4, 8192)", r->path, lo, hi, orig);
    c->rope.scaling = 1;
    c->rope.factor = f;
fail:
    return st;
}

static pl_status parse_llama(const hf_reader *r, pl_model_config *c)
{
    static const char *const refused[] = {"attention_bias", "mlp_bias", "sliding_window", NULL};
    int64_t hd;
    double eps, theta, attn, partial;
    int tie;
    pl_status st = PL_OK;
    pl_family_apply(c, PL_FAMILY_LLAMA);
    PL_TRY(refuse_keys(r, refused));
    PL_TRY(get_int(r, "hidden_size", -1, 1, 1 << 20, &c->hidden));
    PL_TRY(get_int(r, "intermediate_size", -1, 1, 1 << 24, &c->ffn_hidden));
    PL_TRY(get_int(r, "num_hidden_layers", -1, 1, 10000, &c->num_layers));
    PL_TRY(get_int(r, "num_attention_heads", -1, 1, 1 << 16, &c->heads));
    PL_TRY(get_int(r, "num_key_value_heads", c->heads, 1, c->heads, &c->query_groups));
    PL_TRY(get_int(r, "max_position_embeddings", 2048, 1, 1 << 24, &c->max_positions));
    PL_TRY(get_int(r, "head_dim", c->hidden / c->heads, 1, 1 << 20, &hd));
    PL_TRY(get_choice(r, "hidden_act", "silu", "silu", "plait's Llama MLP is SwiGLU"));
    PL_TRY(get_num(r, "rms_norm_eps", 1e-6, 1e-30, 1, &eps));
    PL_TRY(get_num(r, "rope_theta", 10000, 1e-30, 1e30, &theta));
    PL_TRY(get_num(r, "attention_dropout", 0, 0, 0.999, &attn));
    PL_TRY(get_num(r, "partial_rotary_factor", 1, 0, 1, &partial));
    PL_TRY(get_bool(r, "tie_word_embeddings", 0, -1, NULL, &tie));
    if (c->hidden % c->heads || hd != c->hidden / c->heads)
        return pl_errorf(PL_ERR_ARG, "%s: \"head_dim\" %lld: plait's heads are hidden_size / "
                         "num_attention_heads = %lld / %lld", r->path, (long long)hd,
                         (long long)c->hidden, (long long)c->heads);
    if (c->heads % c->query_groups)
        return pl_errorf(PL_ERR_ARG, "%s: \"num_key_value_heads\" %lld does not divide "
                         "\"num_attention_heads\" %lld", r->path, (long long)c->query_groups,
                         (long long)c->heads);
    if (partial != 1)
        return pl_errorf(PL_ERR_ARG, "%s: \"partial_rotary_factor\" %g is not supported (Llama "
                         "rotates the whole head)", r->path, partial);
    c->ln_eps = (float)eps;
    c->attention_dropout = (float)attn;
    c->hidden_dropout = 0;
    c->untie = !tie;
    if (tie) { /* --model llama's output layer is untied: Megatron's GPT with Llama's flags */
        const pl_block_spec b = c->block;
        pl_family_apply(c, PL_FAMILY_GPT);
        c->block = b;
        c->untie = 0;
        c->attention_dropout = (float)attn;
        c->hidden_dropout = 0;
    }
    c->rope = (pl_rope_config){theta, 1.0, 0, 8.0, 1.0, 4.0, 8192};
    return parse_rope_scaling(r, c);
fail:
    return st;
}

pl_status pl_hf_config_parse(const cJSON *config, const char *path, int64_t divisible_by, int tp,
                             pl_model_config *c)
{
    hf_reader r = {config, path};
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(config))
        return pl_errorf(PL_ERR_FORMAT, "%s: not a JSON object", path);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(config, "architectures"), 0);
    const char *type = cJSON_IsString(mt) ? mt->valuestring : "(none)";
    pl_status st;
    if (strcmp(type, "t5") == 0 &&
        (!cJSON_IsString(arch) || strcmp(arch->valuestring, "T5ForConditionalGeneration") == 0)) {
        st = pl_hf_t5_config_parse(config, path, c);
        goto vocab;
    }
    if (strcmp(type, "bert") == 0)
        return pl_hf_bert_config_parse(config, path, divisible_by, tp, c);
    if (strcmp(type, "bart") == 0)
        return pl_hf_bart_config_parse(config, path, divisible_by, tp, c);
    if (cJSON_IsString(arch) && strcmp(arch->valuestring, "GPT2LMHeadModel") != 0 &&
        strcmp(arch->valuestring, "LlamaForCausalLM") != 0)
        return pl_errorf(PL_ERR_ARG, "%s: \"architectures\": %s is not supported (plait imports "
                         "GPT2LMHeadModel, LlamaForCausalLM and T5ForConditionalGeneration)", path,
                         arch->valuestring);
    if (strcmp(type, "gpt2") == 0)
        st = parse_gpt2(&r, c);
    else if (strcmp(type, "llama") == 0)
        st = parse_llama(&r, c);
    else
        return pl_errorf(PL_ERR_ARG, "%s: \"model_type\": %s is not supported (plait imports gpt2, "
                         "llama, t5, bert and bart)", path, type);
vocab:
    if (st)
        return st;
    PL_TRY(get_int(&r, "vocab_size", -1, 1, 1 << 24, &c->vocab_size));
    if (c->hidden % c->heads && !c->kv_channels)
        return pl_errorf(PL_ERR_ARG, "%s: the hidden size %lld is not a multiple of the %lld heads",
                         path, (long long)c->hidden, (long long)c->heads);
    double std;
    PL_TRY(get_num(&r, "initializer_range", 0.02, 0, 1e3, &std));
    c->init_std = std;
    c->seq_length = c->max_positions;
    c->divisible_by = divisible_by > 0 ? divisible_by : 128;
    c->padded_vocab = pl_model_padded_vocab(c->vocab_size, c->divisible_by, tp);
fail:
    return st;
}

pl_status pl_hf_parse_size(const char *s, int64_t *bytes)
{
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"", 1},         {"B", 1},           {"KB", 1e3},        {"MB", 1e6},
                 {"GB", 1e9},     {"TB", 1e12},       {"KiB", 1024.0},    {"MiB", 1048576.0},
                 {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    char *end;
    double v = strtod(s, &end);
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (end != s && strcmp(end, units[i].unit) == 0 && v * units[i].mul >= 1 &&
            v * units[i].mul < 9.2e18) {
            *bytes = (int64_t)(v * units[i].mul);
            return PL_OK;
        }
    return pl_errorf(PL_ERR_ARG, "--max-shard-size %s: expected a size such as 5GB, 500MB, 2GiB "
                     "or a number of bytes", s);
}
