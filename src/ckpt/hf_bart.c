/* transformers' BartForConditionalGeneration, config.json both ways (ckpt/hf.h; the
 * tensor names are model/hf_bart_names.c's).
 *
 * transformers' BART (models/bart/modeling_bart.py) is plait's post-LN BART (--model
 * bart --transformer-block-type post_ln, with --scale-embedding for scale_embedding
 * true): per stack LayerNorm(embed_tokens(ids) * embed_scale + embed_positions(position
 * + 2)), post-norm layers with
 * activation_function "gelu" (exact), no final norms, lm_head tied to the shared
 * embeddings plus final_logits_bias. Its LayerNorms have PyTorch's default epsilon,
 * 1e-5, which BartConfig does not set. Refused on export, naming the setting: a pre-LN
 * BART (NeMo's Megatron BART, plait's default), another epsilon, the tanh GELU,
 * RMSNorm, no biases, an untied output layer; on import, naming the key:
 * normalize_before, add_final_layer_norm (mBART's), add_bias_logits,
 * static_position_embeddings, normalize_embedding false (older BART configs' keys),
 * activation_function other than gelu, different encoder and decoder heads or MLP
 * widths, untied embeddings, another class. activation_dropout (plait has no dropout
 * after the MLP's activation) is imported with a warning. */
#include "ckpt/hf.h"

#include "base/log.h"
#include "model/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *refuse(const pl_model_config *c)
{
    const pl_block_spec *b = &c->block;
    if (!b->post_norm)
        return "pre-LayerNorm layers with final LayerNorms (NeMo's Megatron BART, "
               "--transformer-block-type pre_ln): transformers' BartForConditionalGeneration is "
               "post-LayerNorm (a LayerNorm after each residual and of each stack's embeddings, "
               "none at the end); train with --transformer-block-type post_ln";
    if (c->ln_eps != 1e-5f)
        return "--norm-epsilon other than 1e-5 (BART's LayerNorms have PyTorch's default)";
    if (b->act != PL_ACT_GELU_ERF)
        return "a GELU other than the exact one";
    if (b->norm != PL_NORM_LAYERNORM || !b->norm_bias)
        return "--normalization RMSNorm (BART has LayerNorm with a bias)";
    if (!b->bias)
        return "--disable-bias-linear (BART's layers have biases)";
    if (b->pos != PL_POS_LEARNED)
        return "--position-embedding-type other than learned_absolute";
    if (c->query_groups != c->heads)
        return "--group-query-attention (BART is multi-head)";
    if (c->untie || !c->head.output_bias)
        return "an output layer that is not the shared embeddings with a bias";
    return NULL;
}

pl_status pl_hf_bart_config_build(const pl_model_config *c, int bf16, int64_t bos, int64_t eos,
                                  int64_t pad, cJSON **out)
{
    *out = NULL;
    const char *why = refuse(c);
    if (why)
        return pl_errorf(PL_ERR_ARG, "the checkpoint's bart has %s: not exported", why);
    cJSON *j = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    int ok = j && arch;
#define NUM(k, v) (ok = ok && cJSON_AddNumberToObject(j, k, (double)(v)) != NULL)
#define STR(k, v) (ok = ok && cJSON_AddStringToObject(j, k, v) != NULL)
#define BOOL(k, v) (ok = ok && cJSON_AddBoolToObject(j, k, v) != NULL)
#define TOKEN(k, v) (ok = ok && ((v) >= 0 ? cJSON_AddNumberToObject(j, k, (double)(v)) \
                                          : cJSON_AddNullToObject(j, k)) != NULL)
    /* BartConfig's keys, sorted as transformers writes them */
    NUM("activation_dropout", 0);
    STR("activation_function", "gelu");
    ok = ok && cJSON_AddItemToObject(j, "architectures", arch) &&
         cJSON_AddItemToArray(arch, cJSON_CreateString("BartForConditionalGeneration"));
    if (!ok && !cJSON_GetObjectItemCaseSensitive(j, "architectures"))
        cJSON_Delete(arch);
    NUM("attention_dropout", pl_hf_float_decimal(c->attention_dropout));
    TOKEN("bos_token_id", bos);
    NUM("d_model", c->hidden);
    NUM("decoder_attention_heads", c->heads);
    NUM("decoder_ffn_dim", c->ffn_hidden);
    NUM("decoder_layerdrop", 0);
    NUM("decoder_layers", c->dec_layers);
    TOKEN("decoder_start_token_id", bos); /* plait's BART decoder input starts with [BOS] */
    NUM("dropout", pl_hf_float_decimal(c->hidden_dropout));
    NUM("encoder_attention_heads", c->heads);
    NUM("encoder_ffn_dim", c->ffn_hidden);
    NUM("encoder_layerdrop", 0);
    NUM("encoder_layers", c->num_layers);
    TOKEN("eos_token_id", eos);
    TOKEN("forced_eos_token_id", eos);
    NUM("init_std", c->init_std);
    BOOL("is_encoder_decoder", 1);
    NUM("max_position_embeddings", c->max_positions);
    STR("model_type", "bart");
    NUM("num_hidden_layers", c->num_layers);
    TOKEN("pad_token_id", pad);
    BOOL("scale_embedding", c->scale_embedding);
    BOOL("tie_word_embeddings", 1);
    STR("torch_dtype", bf16 ? "bfloat16" : "float32");
    BOOL("use_cache", 1);
    NUM("vocab_size", c->vocab_size);
#undef NUM
#undef STR
#undef BOOL
#undef TOKEN
    if (!ok) {
        cJSON_Delete(j);
        return pl_errorf(PL_ERR_NOMEM, "out of memory building config.json");
    }
    *out = j;
    return PL_OK;
}

/* ---- reading ---- */

pl_status pl_hf_bart_config_parse(const cJSON *j, const char *path, int64_t divisible_by, int tp,
                                  pl_model_config *c)
{
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "architectures"), 0);
    if (!cJSON_IsString(arch) || strcmp(arch->valuestring, "BartForConditionalGeneration") != 0)
        return pl_errorf(PL_ERR_ARG, "%s: \"architectures\": %s is not supported (plait imports "
                         "BartForConditionalGeneration)", path,
                         cJSON_IsString(arch) ? arch->valuestring : "(none)");
    static const char *const refused[] = {"normalize_before",
                                          "add_final_layer_norm", "add_bias_logits",
                                          "static_position_embeddings", NULL};
    for (const char *const *r = refused; *r; r++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, *r)))
            return pl_errorf(PL_ERR_ARG, "%s: \"%s\": true is not supported (plait's post-LN BART "
                             "is transformers' BART's defaults)", path, *r);
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "normalize_embedding")))
        return pl_errorf(PL_ERR_ARG, "%s: \"normalize_embedding\": false is not supported "
                         "(plait's post-LN BART has layernorm_embedding)", path);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "activation_function");
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "gelu") == 0))
        return pl_errorf(PL_ERR_ARG, "%s: \"activation_function\": %s is not supported (plait's "
                         "post-LN BART has the exact GELU, \"gelu\")", path,
                         cJSON_IsString(act) ? act->valuestring : "(not a string)");
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
    if (cJSON_IsFalse(tie))
        return pl_errorf(PL_ERR_ARG, "%s: \"tie_word_embeddings\": false is not supported (plait's "
                         "BART ties lm_head to the shared embeddings)", path);
    pl_status st = PL_OK;
    double C, Le, Ld, He, Hd, Fe, Fd, T, V, drop, adrop, actdrop, std;
    memset(c, 0, sizeof *c);
    pl_family_apply(c, PL_FAMILY_BART);
    PL_TRY(pl_hf_json_num(j, path, "d_model", -1, 1, 1 << 20, 1, &C));
    PL_TRY(pl_hf_json_num(j, path, "encoder_layers", -1, 1, 10000, 1, &Le));
    PL_TRY(pl_hf_json_num(j, path, "decoder_layers", -1, 1, 10000, 1, &Ld));
    PL_TRY(pl_hf_json_num(j, path, "encoder_attention_heads", -1, 1, 1 << 16, 1, &He));
    PL_TRY(pl_hf_json_num(j, path, "decoder_attention_heads", He, 1, 1 << 16, 1, &Hd));
    PL_TRY(pl_hf_json_num(j, path, "encoder_ffn_dim", -1, 1, 1 << 24, 1, &Fe));
    PL_TRY(pl_hf_json_num(j, path, "decoder_ffn_dim", Fe, 1, 1 << 24, 1, &Fd));
    PL_TRY(pl_hf_json_num(j, path, "max_position_embeddings", 1024, 1, 1 << 24, 1, &T));
    PL_TRY(pl_hf_json_num(j, path, "vocab_size", -1, 1, 1 << 24, 1, &V));
    PL_TRY(pl_hf_json_num(j, path, "dropout", 0.1, 0, 0.999, 0, &drop));
    PL_TRY(pl_hf_json_num(j, path, "attention_dropout", 0, 0, 0.999, 0, &adrop));
    PL_TRY(pl_hf_json_num(j, path, "activation_dropout", 0, 0, 0.999, 0, &actdrop));
    PL_TRY(pl_hf_json_num(j, path, "init_std", 0.02, 0, 1e3, 0, &std));
    if (He != Hd || Fe != Fd)
        return pl_errorf(PL_ERR_ARG, "%s: encoder and decoder with %g and %g heads, MLPs of %g and "
                         "%g: plait's stacks have the same (\"encoder_attention_heads\" = "
                         "\"decoder_attention_heads\", \"encoder_ffn_dim\" = \"decoder_ffn_dim\")",
                         path, He, Hd, Fe, Fd);
    if ((int64_t)C % (int64_t)He)
        return pl_errorf(PL_ERR_ARG, "%s: \"d_model\" %g is not a multiple of the %g heads", path,
                         C, He);
    if (actdrop > 0)
        pl_log_warn("%s: \"activation_dropout\" %g: plait has no dropout after the MLP's "
                    "activation; not applied", path, actdrop);
    c->hidden = (int64_t)C;
    c->num_layers = (int64_t)Le;
    c->dec_layers = (int64_t)Ld;
    c->heads = c->query_groups = (int64_t)He;
    c->ffn_hidden = (int64_t)Fe;
    c->max_positions = c->seq_length = c->dec_seq_length = (int64_t)T;
    c->vocab_size = (int64_t)V;
    c->hidden_dropout = (float)drop;
    c->attention_dropout = (float)adrop;
    c->init_std = std;
    c->ln_eps = 1e-5f; /* PyTorch's LayerNorm default, which BART's use */
    c->block.post_norm = 1;
    c->block.act = PL_ACT_GELU_ERF;
    c->scale_embedding = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "scale_embedding"));
    c->rope = (pl_rope_config){10000.0, 1.0, 0, 8.0, 1.0, 4.0, 8192}; /* unused: the defaults */
    c->divisible_by = divisible_by > 0 ? divisible_by : 128;
    c->padded_vocab = pl_model_padded_vocab(c->vocab_size, c->divisible_by, tp);
fail:
    return st;
}
