/* transformers' T5ForConditionalGeneration (models/t5/modeling_t5.py) both ways
 * (ckpt/hf.h): config.json's T5Config keys, its tokenizer (SentencePiece's
 * spiece.model), and the tensors an import skips.
 *
 * What the class computes, against plait's T5 (model/config.h) with
 * transformers' layer (`--normalization RMSNorm --disable-bias-linear
 * --position-embedding-type relative --softmax-scale 1 --ffn-activation
 * relu|geglu`, untied or tied with --output-layer-input-scale hidden^-0.5):
 * pre-norm T5LayerNorm (RMS, no bias), no biases anywhere, relative position
 * bias tables in block 0 of each stack (bidirectional buckets in the encoder),
 * unscaled scores, "relu" (T5 v1.0) or "gated-gelu" (v1.1, flan-t5) MLPs,
 * shared embeddings, the decoder output scaled by d_model^-0.5 before a tied
 * lm_head. Megatron's T5 (LayerNorm, biases, learned positions, the output
 * bias) is refused naming the setting. */
#include "ckpt/hf.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "data/tokenizer/tokenizer.h"
#include "model/spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The first setting of c that T5ForConditionalGeneration cannot express, or NULL. */
static const char *refuse_export(const pl_model_config *c)
{
    const pl_block_spec *b = &c->block;
    const float tied_scale = 1.0f / sqrtf((float)c->hidden);
    if (b->norm != PL_NORM_RMSNORM || b->norm_bias)
        return "--normalization LayerNorm (T5LayerNorm is an RMS norm without a bias)";
    if (b->bias)
        return "biases in the linear layers (T5 has none: --disable-bias-linear)";
    if (b->pos != PL_POS_RELATIVE)
        return "--position-embedding-type other than relative (T5's relative position bias)";
    if (b->act != PL_ACT_RELU && b->act != PL_ACT_GEGLU)
        return "a GELU or SwiGLU MLP (T5's is --ffn-activation relu or geglu)";
    if (c->softmax_scale != 1.0f)
        return "attention scores scaled by 1/sqrt(head size) (T5's are unscaled: "
               "--softmax-scale 1)";
    if (c->head.output_bias)
        return "the output layer's bias lm_head.output_layer.bias (T5's lm_head has none)";
    if (b->post_norm || b->res_post_norm)
        return "post-norm or --apply-residual-connection-post-layernorm residuals";
    if (c->query_groups != c->heads)
        return "grouped-query attention";
    if (!c->untie && fabsf(c->output_scale - tied_scale) > 1e-6f * tied_scale)
        return "a tied output layer whose input is not scaled by hidden^-0.5 "
               "(--output-layer-input-scale, as T5 scales it)";
    if (c->untie && c->output_scale > 0)
        return "an untied output layer with --output-layer-input-scale (T5 scales only tied ones)";
    if (c->head.task != PL_TASK_NONE || !c->head.lm_head)
        return "heads other than the language-model output layer";
    return NULL;
}

/* The shortest decimal that reads back as f. */
static double shortest(float f)
{
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f)
            return strtod(buf, NULL);
    }
    return (double)f;
}

pl_status pl_hf_t5_config_build(const pl_model_config *c, int bf16, int64_t eos, cJSON **out)
{
    *out = NULL;
    const char *why = refuse_export(c);
    if (why)
        return pl_errorf(PL_ERR_ARG, "the checkpoint's model has %s, which "
                         "T5ForConditionalGeneration cannot express", why);
    const pl_block_dims d = pl_model_block_dims(c);
    cJSON *j = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    int ok = j && arch && cJSON_AddItemToObject(j, "architectures", arch) &&
             cJSON_AddItemToArray(arch, cJSON_CreateString("T5ForConditionalGeneration"));
    if (!ok)
        cJSON_Delete(arch);
#define NUM(k, v) (ok = ok && cJSON_AddNumberToObject(j, k, (double)(v)) != NULL)
#define STR(k, v) (ok = ok && cJSON_AddStringToObject(j, k, v) != NULL)
#define BOOL(k, v) (ok = ok && cJSON_AddBoolToObject(j, k, v) != NULL)
    const int gated = c->block.act == PL_ACT_GEGLU;
    STR("model_type", "t5");
    NUM("vocab_size", c->vocab_size);
    NUM("d_model", d.C);
    NUM("d_kv", d.HS);
    NUM("d_ff", d.F);
    NUM("num_layers", c->num_layers);
    NUM("num_decoder_layers", c->dec_layers);
    NUM("num_heads", d.NH);
    NUM("relative_attention_num_buckets", c->rel_buckets);
    NUM("relative_attention_max_distance", c->rel_max_distance);
    NUM("dropout_rate", shortest(c->hidden_dropout));
    NUM("layer_norm_epsilon", shortest(c->ln_eps));
    NUM("initializer_factor", 1.0);
    STR("feed_forward_proj", gated ? "gated-gelu" : "relu");
    STR("dense_act_fn", gated ? "gelu_new" : "relu");
    BOOL("is_gated_act", gated);
    BOOL("is_encoder_decoder", 1);
    NUM("n_positions", c->max_positions);
    NUM("pad_token_id", 0);
    NUM("eos_token_id", eos >= 0 ? eos : 1);
    NUM("decoder_start_token_id", 0);
    BOOL("tie_word_embeddings", !c->untie);
    BOOL("use_cache", 1);
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

/* An integer key in [lo, hi]; def when absent or null (def < 0: required). */
static pl_status int_key(const cJSON *j, const char *path, const char *key, int64_t def,
                         int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" is missing", path, key);
        *out = def;
        return PL_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be an integer in [%lld, %lld]", path, key,
                         (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return PL_OK;
}

static pl_status num_key(const cJSON *j, const char *path, const char *key, double def, double lo,
                         double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    *out = def;
    if (!v || cJSON_IsNull(v))
        return PL_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be a number in [%g, %g]", path, key, lo,
                         hi);
    *out = v->valuedouble;
    return PL_OK;
}

pl_status pl_hf_t5_config_parse(const cJSON *j, const char *path, pl_model_config *c)
{
    pl_status st = PL_OK;
    int64_t dkv, npos;
    double drop, eps;
    pl_family_apply(c, PL_FAMILY_T5);
    const cJSON *ff = cJSON_GetObjectItemCaseSensitive(j, "feed_forward_proj");
    const char *proj = cJSON_IsString(ff) ? ff->valuestring : "relu";
    if (strcmp(proj, "relu") != 0 && strcmp(proj, "gated-gelu") != 0)
        return pl_errorf(PL_ERR_ARG, "%s: \"feed_forward_proj\": \"%s\" is not supported (plait "
                         "runs T5's \"relu\" and \"gated-gelu\")", path, proj);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"tie_word_embeddings\" must be true or false", path);
    PL_TRY(int_key(j, path, "d_model", -1, 1, 1 << 20, &c->hidden));
    PL_TRY(int_key(j, path, "num_heads", -1, 1, 1 << 16, &c->heads));
    PL_TRY(int_key(j, path, "d_kv", c->hidden / c->heads > 0 ? c->hidden / c->heads : 1, 1, 1 << 20,
                   &dkv));
    PL_TRY(int_key(j, path, "d_ff", -1, 1, 1 << 24, &c->ffn_hidden));
    PL_TRY(int_key(j, path, "num_layers", -1, 1, 10000, &c->num_layers));
    PL_TRY(int_key(j, path, "num_decoder_layers", c->num_layers, 1, 10000, &c->dec_layers));
    PL_TRY(int_key(j, path, "relative_attention_num_buckets", 32, 2, 1 << 20, &c->rel_buckets));
    PL_TRY(int_key(j, path, "relative_attention_max_distance", 128, 1, 1 << 30,
                   &c->rel_max_distance));
    PL_TRY(int_key(j, path, "n_positions", 512, 1, 1 << 24, &npos));
    PL_TRY(num_key(j, path, "dropout_rate", 0.1, 0, 0.999, &drop));
    PL_TRY(num_key(j, path, "layer_norm_epsilon", 1e-6, 1e-30, 1, &eps));
    /* T5 v1.1 small: 6 heads of 64 in a 512 model (Megatron's --kv-channels) */
    c->kv_channels = dkv * c->heads == c->hidden ? 0 : dkv;
    c->query_groups = c->heads;
    c->block.norm = PL_NORM_RMSNORM;
    c->block.norm_bias = c->block.bias = 0;
    c->block.pos = PL_POS_RELATIVE;
    c->block.act = strcmp(proj, "relu") == 0 ? PL_ACT_RELU : PL_ACT_GEGLU;
    c->head.output_bias = 0;
    c->softmax_scale = 1.0f;
    c->ln_eps = (float)eps;
    c->hidden_dropout = c->attention_dropout = (float)drop;
    c->untie = tie && cJSON_IsFalse(tie);
    c->output_scale = c->untie ? 0.0f : 1.0f / sqrtf((float)c->hidden);
    c->max_positions = c->seq_length = c->dec_seq_length = npos;
    c->rope = (pl_rope_config){10000.0, 1.0, 0, 8.0, 1.0, 4.0, 8192}; /* Megatron's defaults */
fail:
    return st;
}

int pl_hf_t5_tied_copy(const pl_model_config *c, const char *name)
{
    return c->family == PL_FAMILY_T5 && (strcmp(name, "encoder.embed_tokens.weight") == 0 ||
                                         strcmp(name, "decoder.embed_tokens.weight") == 0);
}

/* ---- the tokenizer: SentencePiece's spiece.model and T5Tokenizer ---- */

pl_status pl_hf_t5_export_tokenizer(const pl_ckpt_meta *m, const pl_model_config *c,
                                    const char *tmp, int64_t *eos)
{
    *eos = -1;
    const char *type = m->tokenizer_type;
    if (!type || strcmp(type, "SentencePieceTokenizer") != 0) {
        pl_log_warn("the checkpoint's tokenizer is %s: only a SentencePieceTokenizer is written "
                    "for T5 (spiece.model): no tokenizer files exported", type ? type : "none");
        return PL_OK;
    }
    if (m->vocab_extra_ids > 0) { /* plait appends <extra_id_0> first; T5Tokenizer last */
        pl_log_warn("--vocab-extra-ids %lld: plait numbers <extra_id_0> first after the "
                    "SentencePiece vocabulary, T5Tokenizer last: no tokenizer files exported "
                    "(the sentinels' ids would differ)", (long long)m->vocab_extra_ids);
        return PL_OK;
    }
    char path[4200], *data = NULL, *text = NULL;
    size_t n;
    pl_status st = pl_file_read_all(m->tokenizer_model, &data, &n);
    if (!st) {
        snprintf(path, sizeof path, "%s/spiece.model", tmp);
        st = pl_file_write_atomic(path, data, n);
    }
    cJSON *j = st ? NULL : cJSON_CreateObject();
    int ok = j && cJSON_AddStringToObject(j, "tokenizer_class", "T5Tokenizer") &&
             cJSON_AddNumberToObject(j, "extra_ids", 0) &&
             cJSON_AddNumberToObject(j, "model_max_length", (double)c->max_positions) &&
             cJSON_AddStringToObject(j, "eos_token", "</s>") &&
             cJSON_AddStringToObject(j, "unk_token", "<unk>") &&
             cJSON_AddStringToObject(j, "pad_token", "<pad>") && (text = cJSON_Print(j));
    if (!st && ok) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp);
        size_t len = strlen(text);
        text[len] = '\n';
        st = pl_file_write_atomic(path, text, len + 1);
    } else if (!st) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory writing tokenizer_config.json");
    }
    pl_tokenizer *tok = NULL; /* eos: the model's </s> (T5's id 1), else its end of document */
    if (!st && !(st = pl_tokenizer_open(&tok, &(pl_tokenizer_spec){type, NULL, NULL,
                                                                    m->tokenizer_model, 0, 0}))) {
        const int32_t id = pl_tokenizer_token_id(tok, "</s>");
        *eos = id >= 0 ? id : tok->eod;
    }
    pl_tokenizer_free(tok);
    cJSON_free(text);
    cJSON_Delete(j);
    pl_free(data);
    return st;
}

int pl_hf_t5_find_tokenizer(const char *in, const pl_model_config *c, pl_ckpt_meta *m, char *a,
                            size_t n)
{
    snprintf(a, n, "%s/spiece.model", in);
    if (c->family != PL_FAMILY_T5 || !pl_file_exists(a))
        return 0;
    m->tokenizer_type = "SentencePieceTokenizer";
    m->tokenizer_model = a;
    return 1;
}
