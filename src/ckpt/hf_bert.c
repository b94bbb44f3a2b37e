/* transformers' BERT classes, config.json both ways, and the WordPiece tokenizer's
 * files (ckpt/hf.h; the tensor names are model/hf_bert_names.c's).
 *
 * transformers' BertModel (models/bert/modeling_bert.py) is plait's post-LN BERT
 * (--transformer-block-type post_ln): LayerNorm(word + position + token type),
 * post-norm layers, hidden_act "gelu" (exact), no final norm; the heads'
 * transform uses hidden_act and layer_norm_eps too. The class follows the heads:
 *   binary head (pretraining)               BertForPreTraining
 *   LM head only (--bert-no-binary-head)    BertForMaskedLM (token_type_embeddings
 *                                           written as zeros: plait adds none)
 *   plait finetune: text classification    BertForSequenceClassification
 *                   regression             BertForSequenceClassification, num_labels
 *                                           1, problem_type "regression"
 *                   token classification   BertForTokenClassification
 *                   question answering     BertForQuestionAnswering
 * A pre-LN BERT (Megatron core's), an untied output layer, RMSNorm, no biases, rope
 * and the tanh GELU are refused on export naming the setting; on import any key
 * plait cannot run is refused naming it (hidden_act other than "gelu",
 * position_embedding_type other than "absolute", a decoder, type_vocab_size other
 * than 2). */
#include "ckpt/hf.h"

#include "base/fileio.h"
#include "base/alloc.h"
#include "base/log.h"
#include "model/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *refuse(const pl_model_config *c)
{
    const pl_block_spec *b = &c->block;
    if (!pl_model_post_ln(c))
        return "pre-LayerNorm layers with a final LayerNorm (Megatron core's BERT, "
               "--transformer-block-type pre_ln): transformers' BertForMaskedLM and "
               "BertForPreTraining are post-LayerNorm (a LayerNorm after each residual and of the "
               "embeddings, none at the end); train with --transformer-block-type post_ln";
    if (b->act != PL_ACT_GELU_ERF)
        return "a GELU other than the exact one (transformers' BERT applies hidden_act to "
               "its heads' transform too, where plait's is exact)";
    if (b->norm != PL_NORM_LAYERNORM || !b->norm_bias)
        return "--normalization RMSNorm (BERT has LayerNorm with a bias)";
    if (!b->bias)
        return "--disable-bias-linear (BERT's layers have biases)";
    if (b->pos != PL_POS_LEARNED)
        return "--position-embedding-type other than learned_absolute";
    if (c->query_groups != c->heads)
        return "--group-query-attention (BERT is multi-head)";
    if (c->untie)
        return "--untie-embeddings-and-output-weights (BERT's decoder is the word embeddings)";
    if (c->head.task == PL_TASK_NONE && !c->head.lm_transform)
        return "an LM head without BERT's transform";
    if (c->head.tokentypes != 0 && c->head.tokentypes != 2)
        return "token types other than 2";
    return NULL;
}

static const char *bert_class(const pl_model_config *c)
{
    switch (c->head.task) {
    case PL_TASK_SEQUENCE:
    case PL_TASK_REGRESSION:
        return "BertForSequenceClassification";
    case PL_TASK_TOKEN:
        return "BertForTokenClassification";
    case PL_TASK_SPAN:
        return "BertForQuestionAnswering";
    case PL_TASK_NONE:
        break;
    }
    return c->head.binary_head ? "BertForPreTraining" : "BertForMaskedLM";
}

double pl_hf_float_decimal(float f)
{
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f)
            return strtod(buf, NULL);
    }
    return (double)f;
}

pl_status pl_hf_bert_config_build(const pl_model_config *c, int bf16, int64_t pad,
                                  cJSON **out)
{
    *out = NULL;
    const char *why = refuse(c);
    if (why)
        return pl_errorf(PL_ERR_ARG, "the checkpoint's bert has %s: not exported", why);
    const char *cls = bert_class(c);
    const int64_t K = c->head.classes;
    cJSON *j = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    int ok = j && arch && cJSON_AddItemToObject(j, "architectures", arch) &&
             cJSON_AddItemToArray(arch, cJSON_CreateString(cls));
    if (!ok)
        cJSON_Delete(arch);
#define NUM(k, v) (ok = ok && cJSON_AddNumberToObject(j, k, (double)(v)) != NULL)
#define STR(k, v) (ok = ok && cJSON_AddStringToObject(j, k, v) != NULL)
    /* BertConfig's keys, in the order transformers writes them (sorted) */
    NUM("attention_probs_dropout_prob", pl_hf_float_decimal(c->attention_dropout));
    ok = ok && cJSON_AddNullToObject(j, "classifier_dropout");
    STR("hidden_act", "gelu");
    NUM("hidden_dropout_prob", pl_hf_float_decimal(c->hidden_dropout));
    NUM("hidden_size", c->hidden);
    if (c->head.task == PL_TASK_SEQUENCE || c->head.task == PL_TASK_TOKEN ||
        c->head.task == PL_TASK_REGRESSION) { /* transformers' default label names */
        cJSON *id2 = cJSON_AddObjectToObject(j, "id2label");
        cJSON *l2id = cJSON_AddObjectToObject(j, "label2id");
        ok = ok && id2 && l2id;
        for (int64_t k = 0; ok && k < K; k++) {
            char id[24], label[32];
            snprintf(id, sizeof id, "%lld", (long long)k);
            snprintf(label, sizeof label, "LABEL_%lld", (long long)k);
            ok = cJSON_AddStringToObject(id2, id, label) &&
                 cJSON_AddNumberToObject(l2id, label, (double)k);
        }
    }
    NUM("initializer_range", c->init_std);
    NUM("intermediate_size", c->ffn_hidden);
    NUM("layer_norm_eps", pl_hf_float_decimal(c->ln_eps));
    NUM("max_position_embeddings", c->max_positions);
    STR("model_type", "bert");
    NUM("num_attention_heads", c->heads);
    NUM("num_hidden_layers", c->num_layers);
    NUM("pad_token_id", pad >= 0 ? pad : 0);
    STR("position_embedding_type", "absolute");
    if (c->head.task == PL_TASK_REGRESSION)
        STR("problem_type", "regression");
    STR("torch_dtype", bf16 ? "bfloat16" : "float32");
    NUM("type_vocab_size", 2);
    ok = ok && cJSON_AddBoolToObject(j, "use_cache", 1);
    NUM("vocab_size", c->vocab_size);
#undef NUM
#undef STR
    if (!ok) {
        cJSON_Delete(j);
        return pl_errorf(PL_ERR_NOMEM, "out of memory building config.json");
    }
    *out = j;
    return PL_OK;
}

/* ---- reading ---- */

pl_status pl_hf_json_num(const cJSON *j, const char *path, const char *key, double def,
                         double lo, double hi, int integral, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0)
            return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" is missing", path, key);
        *out = def;
        return PL_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        (integral && v->valuedouble != floor(v->valuedouble)))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be %s in [%g, %g]", path, key,
                         integral ? "an integer" : "a number", lo, hi);
    *out = v->valuedouble;
    return PL_OK;
}

/* A string key that must be one of ok ('|'-separated) when present. */
static pl_status str_key(const cJSON *j, const char *path, const char *key, const char *def,
                         const char *ok, const char *why)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    const char *s = v && cJSON_IsString(v) ? v->valuestring : def;
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return pl_errorf(PL_ERR_FORMAT, "%s: \"%s\" must be a string", path, key);
    const size_t n = strlen(s);
    for (const char *p = ok; *p;) {
        const char *e = strchr(p, '|');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0)
            return PL_OK;
        p += len + (e != NULL);
    }
    return pl_errorf(PL_ERR_ARG, "%s: \"%s\": \"%s\" is not supported (%s)", path, key, s, why);
}

pl_status pl_hf_bert_config_parse(const cJSON *j, const char *path, int64_t divisible_by, int tp,
                                  pl_model_config *c)
{
    static const char *const classes[] = {"BertForPreTraining", "BertForMaskedLM",
                                          "BertForSequenceClassification",
                                          "BertForTokenClassification",
                                          "BertForQuestionAnswering"};
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "architectures"), 0);
    int k = 0;
    while (k < 5 && !(cJSON_IsString(arch) && strcmp(arch->valuestring, classes[k]) == 0))
        k++;
    if (k == 5)
        return pl_errorf(PL_ERR_ARG, "%s: \"architectures\": %s is not supported (plait imports "
                         "BertForPreTraining, BertForMaskedLM, BertForSequenceClassification, "
                         "BertForTokenClassification and BertForQuestionAnswering)", path,
                         cJSON_IsString(arch) ? arch->valuestring : "(none)");
    static const char *const refused[] = {"is_decoder", "add_cross_attention", NULL};
    for (const char *const *r = refused; *r; r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, *r);
        if (v && cJSON_IsTrue(v))
            return pl_errorf(PL_ERR_ARG, "%s: \"%s\": true is not supported (plait's BERT is an "
                             "encoder)", path, *r);
    }
    pl_status st = PL_OK;
    double C, L, NH, F, T, V, types, eps, hd, ad, std, labels = 2;
    memset(c, 0, sizeof *c);
    pl_family_apply(c, PL_FAMILY_BERT);
    PL_TRY(str_key(j, path, "hidden_act", "gelu", "gelu", "plait's post-LN BERT has the exact "
                   "GELU, in its layers and its heads' transform"));
    PL_TRY(str_key(j, path, "position_embedding_type", "absolute", "absolute",
                   "plait's BERT has learned absolute positions"));
    PL_TRY(pl_hf_json_num(j, path, "hidden_size", -1, 1, 1 << 20, 1, &C));
    PL_TRY(pl_hf_json_num(j, path, "num_hidden_layers", -1, 1, 10000, 1, &L));
    PL_TRY(pl_hf_json_num(j, path, "num_attention_heads", -1, 1, 1 << 16, 1, &NH));
    PL_TRY(pl_hf_json_num(j, path, "intermediate_size", -1, 1, 1 << 24, 1, &F));
    PL_TRY(pl_hf_json_num(j, path, "max_position_embeddings", 512, 1, 1 << 24, 1, &T));
    PL_TRY(pl_hf_json_num(j, path, "vocab_size", -1, 1, 1 << 24, 1, &V));
    PL_TRY(pl_hf_json_num(j, path, "type_vocab_size", 2, 2, 2, 1, &types));
    PL_TRY(pl_hf_json_num(j, path, "layer_norm_eps", 1e-12, 1e-30, 1, 0, &eps));
    PL_TRY(pl_hf_json_num(j, path, "hidden_dropout_prob", 0.1, 0, 0.999, 0, &hd));
    PL_TRY(pl_hf_json_num(j, path, "attention_probs_dropout_prob", 0.1, 0, 0.999, 0, &ad));
    PL_TRY(pl_hf_json_num(j, path, "initializer_range", 0.02, 0, 1e3, 0, &std));
    const cJSON *id2 = cJSON_GetObjectItemCaseSensitive(j, "id2label");
    if (cJSON_IsObject(id2))
        labels = cJSON_GetArraySize(id2);
    PL_TRY(pl_hf_json_num(j, path, "num_labels", labels, 1, 1 << 20, 1, &labels));
    if ((int64_t)C % (int64_t)NH)
        return pl_errorf(PL_ERR_ARG, "%s: the hidden size %g is not a multiple of the %g heads",
                         path, C, NH);
    c->hidden = (int64_t)C;
    c->num_layers = (int64_t)L;
    c->heads = c->query_groups = (int64_t)NH;
    c->ffn_hidden = (int64_t)F;
    c->max_positions = c->seq_length = (int64_t)T;
    c->vocab_size = (int64_t)V;
    c->ln_eps = (float)eps;
    c->hidden_dropout = (float)hd;
    c->attention_dropout = (float)ad;
    c->init_std = std;
    c->block.post_norm = 1;
    c->block.act = PL_ACT_GELU_ERF;
    c->rope = (pl_rope_config){10000.0, 1.0, 0, 8.0, 1.0, 4.0, 8192}; /* unused: Megatron's defaults */
    if (k == 1) /* BertForMaskedLM: no binary head, no token types (row 0 folded) */
        c->head.binary_head = c->head.tokentypes = 0;
    if (k >= 2) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "problem_type");
        const int regression = (cJSON_IsString(pt) && strcmp(pt->valuestring, "regression") == 0) ||
                               (k == 2 && labels == 1);
        if (regression && k != 2)
            return pl_errorf(PL_ERR_ARG, "%s: \"problem_type\": regression is for "
                             "BertForSequenceClassification", path);
        pl_model_set_task(c, k == 2 ? (regression ? PL_TASK_REGRESSION : PL_TASK_SEQUENCE)
                             : k == 3 ? PL_TASK_TOKEN : PL_TASK_SPAN, (int64_t)labels);
        c->head.tokentypes = 2;
    }
    c->divisible_by = divisible_by > 0 ? divisible_by : 128;
    c->padded_vocab = pl_model_padded_vocab(c->vocab_size, c->divisible_by, tp);
fail:
    return st;
}

/* ---- the tokenizer ---- */

int pl_hf_bert_tokenizer(const char *type)
{
    return type && (strcmp(type, "BertWordPieceLowerCase") == 0 ||
                    strcmp(type, "BertWordPieceCase") == 0);
}

pl_status pl_hf_bert_tokenizer_config(const char *type, const pl_model_config *c, cJSON **out)
{
    cJSON *j = cJSON_CreateObject();
    const int lower = strcmp(type, "BertWordPieceLowerCase") == 0;
    int ok = j && cJSON_AddStringToObject(j, "tokenizer_class", "BertTokenizer") &&
             cJSON_AddBoolToObject(j, "do_lower_case", lower) &&
             cJSON_AddNumberToObject(j, "model_max_length", (double)c->max_positions) &&
             cJSON_AddStringToObject(j, "unk_token", "[UNK]") &&
             cJSON_AddStringToObject(j, "sep_token", "[SEP]") &&
             cJSON_AddStringToObject(j, "pad_token", "[PAD]") &&
             cJSON_AddStringToObject(j, "cls_token", "[CLS]") &&
             cJSON_AddStringToObject(j, "mask_token", "[MASK]");
    if (!ok) {
        cJSON_Delete(j);
        return pl_errorf(PL_ERR_NOMEM, "out of memory writing tokenizer_config.json");
    }
    *out = j;
    return PL_OK;
}

const char *pl_hf_bert_tokenizer_type(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *text = NULL;
    size_t n;
    int lower = 1; /* BertTokenizer's default */
    if (pl_file_exists(path) && pl_file_read_all(path, &text, &n) == PL_OK) {
        cJSON *j = cJSON_ParseWithLength(text, n);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "do_lower_case");
        if (cJSON_IsBool(v))
            lower = cJSON_IsTrue(v);
        cJSON_Delete(j);
    }
    pl_free(text);
    pl_error_clear();
    return lower ? "BertWordPieceLowerCase" : "BertWordPieceCase";
}

pl_status pl_hf_bert_labels(cJSON *config, const char *dir)
{
    cJSON *id2 = cJSON_GetObjectItemCaseSensitive(config, "id2label");
    char path[4200], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    if (!id2 || !pl_file_exists(path))
        return PL_OK;
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st)
        return st;
    cJSON *names = cJSON_CreateObject(), *ids = cJSON_CreateObject();
    int k = 0, ok = names && ids;
    for (char *line = text; ok && line < text + n; k++) { /* one label a line, in id order */
        char *end = memchr(line, '\n', (size_t)(text + n - line)), id[24];
        end = end ? end : text + n;
        char *next = end + 1;
        if (end > line && end[-1] == '\r')
            end--;
        *end = 0;
        snprintf(id, sizeof id, "%d", k);
        ok = cJSON_AddStringToObject(names, id, line) && cJSON_AddNumberToObject(ids, line, k);
        line = next;
    }
    pl_free(text);
    if (!ok)
        st = pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", path);
    else if (k != cJSON_GetArraySize(id2))
        st = pl_errorf(PL_ERR_FORMAT, "%s: %d labels, but the checkpoint's head has %d classes",
                       path, k, cJSON_GetArraySize(id2));
    if (st) {
        cJSON_Delete(names);
        cJSON_Delete(ids);
        return st;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(config, "id2label", names);
    cJSON_ReplaceItemInObjectCaseSensitive(config, "label2id", ids);
    return PL_OK;
}
