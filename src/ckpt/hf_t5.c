/* transformers' T5ForConditionalGeneration (models/t5/modeling_t5.py) both ways
 * (ckpt/hf.h): config.json's T5Config keys, its tokenizer (SentencePiece's
 * spiece.model with T5Tokenizer's files, the sentinels <extra_id_N> renumbered
 * between plait's legacy SentencePieceTokenizer and T5Tokenizer, the padding rows
 * kept), and the tensors an import skips.
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
    NUM("vocab_size", c->t5_sentinels > 0 ? c->padded_vocab : c->vocab_size);
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

/* plait's legacy SentencePieceTokenizer (Megatron's _SentencePieceTokenizer) appends, after
 * the P pieces, the added tokens of this list that are no piece (K of them), then
 * <extra_id_0> .. <extra_id_{N-1}>; T5Tokenizer (tokenization_t5.py, the T5Converter) numbers
 * <extra_id_i> P + N - 1 - i and has no added tokens: they are written as added tokens after
 * the sentinels, so every id of plait's has its Hugging Face twin (hf_t5_names.c). */
static const char *const added_names[] = {"<CLS>", "<SEP>", "<EOD>", "<MASK>",
                                          "<PAD>", "<BOS>", "<EOS>"};
enum { ADDED_MAX = sizeof added_names / sizeof *added_names };

typedef struct sp_layout {
    int64_t pieces, specials, sentinels;
    const char *added[ADDED_MAX]; /* the K added tokens by plait id */
} sp_layout;

/* The layout of the legacy tokenizer over model with n sentinels; an error names the model. */
static pl_status layout_of(const char *model, int64_t n, sp_layout *l)
{
    memset(l, 0, sizeof *l);
    pl_tokenizer *plain = NULL, *legacy = NULL;
    pl_status st = pl_tokenizer_open(&plain, &(pl_tokenizer_spec){"SentencePieceTokenizer", NULL,
                                                                  NULL, model, 0, 0});
    if (!st)
        st = pl_tokenizer_open(&legacy, &(pl_tokenizer_spec){"SentencePieceTokenizer", NULL, NULL,
                                                             model, n, 1});
    if (st)
        goto done;
    l->pieces = plain->vocab_size;
    l->sentinels = n;
    l->specials = legacy->vocab_size - l->pieces - n;
    int found = 0;
    for (int k = 0; k < ADDED_MAX; k++) {
        const int32_t id = pl_tokenizer_token_id(legacy, added_names[k]);
        if (id >= l->pieces && id < l->pieces + l->specials && id - l->pieces < ADDED_MAX) {
            l->added[id - l->pieces] = added_names[k];
            found++;
        }
    }
    for (int64_t i = 0; i < n && found == l->specials; i++) {
        char name[40];
        snprintf(name, sizeof name, "<extra_id_%lld>", (long long)i);
        if (pl_tokenizer_token_id(legacy, name) != l->pieces + l->specials + i)
            found = -1;
    }
    if (found != l->specials)
        st = pl_errorf(PL_ERR_FORMAT, "%s: the legacy SentencePieceTokenizer's added tokens are "
                       "not the %lld pieces, <CLS> <SEP> <EOD> <MASK> (and <PAD> <BOS> <EOS> "
                       "when no piece) then <extra_id_0..%lld>", model, (long long)l->pieces,
                       (long long)n - 1);
done:
    pl_tokenizer_free(plain);
    pl_tokenizer_free(legacy);
    return st;
}

pl_status pl_hf_t5_export_vocab(const pl_ckpt_meta *m, pl_model_config *c)
{
    c->t5_sentinels = c->t5_specials = 0;
    const char *type = m->tokenizer_type;
    if (!type || strcmp(type, "SentencePieceTokenizer") != 0 || m->vocab_extra_ids <= 0)
        return PL_OK;
    sp_layout l;
    pl_status st = layout_of(m->tokenizer_model, m->vocab_extra_ids, &l);
    if (st)
        return st;
    if (l.pieces + l.specials + l.sentinels != c->vocab_size)
        return pl_errorf(PL_ERR_FORMAT, "the checkpoint's vocabulary has %lld tokens but its "
                         "tokenizer %s with --vocab-extra-ids %lld has %lld",
                         (long long)c->vocab_size, m->tokenizer_model,
                         (long long)m->vocab_extra_ids,
                         (long long)(l.pieces + l.specials + l.sentinels));
    c->t5_sentinels = l.sentinels;
    c->t5_specials = l.specials;
    return PL_OK;
}

static pl_status write_json(const char *tmp, const char *name, const cJSON *j)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    char *text = cJSON_Print(j);
    if (!text)
        return pl_errorf(PL_ERR_NOMEM, "out of memory writing %s", name);
    const size_t len = strlen(text);
    text[len] = '\n'; /* cJSON's buffer has its NUL there; a file ends with a newline */
    pl_status st = pl_file_write_atomic(path, text, len + 1);
    cJSON_free(text);
    return st;
}

/* An added token of transformers' added_tokens_decoder. */
static int add_decoder_entry(cJSON *dec, int64_t id, const char *content)
{
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    cJSON *e = cJSON_AddObjectToObject(dec, key);
    return e && cJSON_AddStringToObject(e, "content", content) &&
           cJSON_AddBoolToObject(e, "lstrip", 0) && cJSON_AddBoolToObject(e, "normalized", 0) &&
           cJSON_AddBoolToObject(e, "rstrip", 0) && cJSON_AddBoolToObject(e, "single_word", 0) &&
           cJSON_AddBoolToObject(e, "special", 1);
}

/* tokenizer_config.json (tok: 1) or special_tokens_map.json (0) of a T5Tokenizer. */
static pl_status write_tokenizer_json(const pl_model_config *c, const sp_layout *l,
                                      const char *tmp, int tok)
{
    const int64_t N = l->sentinels, K = l->specials, P = l->pieces;
    cJSON *j = cJSON_CreateObject(), *extra = cJSON_CreateArray();
    int ok = j && extra && cJSON_AddItemToObject(j, "additional_special_tokens", extra);
    if (!ok)
        cJSON_Delete(extra);
    for (int64_t i = 0; ok && i < N; i++) {
        char name[40];
        snprintf(name, sizeof name, "<extra_id_%lld>", (long long)i);
        ok = cJSON_AddItemToArray(extra, cJSON_CreateString(name));
    }
    if (ok && tok) {
        cJSON *dec = cJSON_AddObjectToObject(j, "added_tokens_decoder");
        ok = dec && cJSON_AddStringToObject(j, "tokenizer_class", "T5Tokenizer") &&
             cJSON_AddNumberToObject(j, "extra_ids", (double)N) &&
             cJSON_AddNumberToObject(j, "model_max_length", (double)c->max_positions);
        for (int64_t i = 0; ok && i < N; i++) {
            char name[40];
            snprintf(name, sizeof name, "<extra_id_%lld>", (long long)(N - 1 - i));
            ok = add_decoder_entry(dec, P + i, name);
        }
        for (int64_t k = 0; ok && k < K; k++)
            ok = add_decoder_entry(dec, P + N + k, l->added[k]);
    }
    ok = ok && cJSON_AddStringToObject(j, "eos_token", "</s>") &&
         cJSON_AddStringToObject(j, "unk_token", "<unk>") &&
         cJSON_AddStringToObject(j, "pad_token", "<pad>");
    pl_status st = ok ? write_json(tmp, tok ? "tokenizer_config.json" : "special_tokens_map.json", j)
                      : pl_errorf(PL_ERR_NOMEM, "out of memory writing the tokenizer's files");
    cJSON_Delete(j);
    return st;
}

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
    sp_layout l = {0};
    char path[4200], *data = NULL;
    size_t n;
    pl_status st = c->t5_sentinels > 0 ? layout_of(m->tokenizer_model, c->t5_sentinels, &l) : PL_OK;
    if (!st)
        st = pl_file_read_all(m->tokenizer_model, &data, &n);
    if (!st) {
        snprintf(path, sizeof path, "%s/spiece.model", tmp);
        st = pl_file_write_atomic(path, data, n);
    }
    for (int k = 1; k >= 0 && !st; k--)
        st = write_tokenizer_json(c, &l, tmp, k);
    pl_tokenizer *tok = NULL; /* eos: the model's </s> (T5's id 1), else its end of document */
    if (!st && !(st = pl_tokenizer_open(&tok, &(pl_tokenizer_spec){type, NULL, NULL,
                                                                    m->tokenizer_model, 0, 0}))) {
        const int32_t id = pl_tokenizer_token_id(tok, "</s>");
        *eos = id >= 0 ? id : tok->eod;
    }
    pl_tokenizer_free(tok);
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

/* The sentinels a T5Tokenizer directory declares: tokenizer_config.json's extra_ids, else
 * its <extra_id_N> additional_special_tokens, else T5Tokenizer's default, 100. */
static pl_status declared_sentinels(const char *in, int64_t *n)
{
    char path[4200], *text = NULL;
    size_t len;
    *n = 100;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", in);
    if (!pl_file_exists(path))
        return PL_OK;
    pl_status st = pl_file_read_all(path, &text, &len);
    if (st)
        return st;
    cJSON *j = cJSON_ParseWithLength(text, len);
    pl_free(text);
    if (!j)
        return pl_errorf(PL_ERR_FORMAT, "%s: not valid JSON", path);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "extra_ids");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "additional_special_tokens"), *x;
    if (e && !cJSON_IsNull(e)) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1 << 20 ||
            e->valuedouble != floor(e->valuedouble))
            st = pl_errorf(PL_ERR_FORMAT, "%s: \"extra_ids\" must be an integer in [0, %d]", path,
                           1 << 20);
        else
            *n = (int64_t)e->valuedouble;
    } else if (cJSON_IsArray(a)) {
        *n = 0;
        cJSON_ArrayForEach(x, a) *n += cJSON_IsString(x) &&
                                       strncmp(x->valuestring, "<extra_id_", 10) == 0;
    }
    cJSON_Delete(j);
    return st;
}

pl_status pl_hf_t5_import_vocab(const char *in, int64_t divisible_by, int tp, pl_model_config *c,
                                pl_ckpt_meta *m)
{
    int64_t n;
    sp_layout l;
    if (!m->tokenizer_type || strcmp(m->tokenizer_type, "SentencePieceTokenizer") != 0)
        return PL_OK;
    pl_status st = declared_sentinels(in, &n);
    if (st || n == 0)
        return st;
    if ((st = layout_of(m->tokenizer_model, n, &l)))
        return st;
    /* the rows past the tokenizer's are Megatron's padding: find the divisor that makes them */
    const int64_t V = l.pieces + l.specials + l.sentinels, rows = c->vocab_size;
    int64_t d = divisible_by > 0 ? divisible_by : 128;
    while (d > 0 && (V > rows || pl_model_padded_vocab(V, d, tp) != rows))
        d--;
    if (d == 0) {
        pl_log_warn("%s: spiece.model's %lld pieces with %lld sentinels are %lld tokens as plait's "
                    "legacy SentencePieceTokenizer numbers them, which config.json's vocab_size "
                    "%lld does not hold as Megatron's padding at TP %d: imported without "
                    "sentinels (as a SentencePieceTokenizer of the pieces)", in,
                    (long long)l.pieces, (long long)n, (long long)V, (long long)rows, tp);
        return PL_OK;
    }
    c->vocab_size = V;
    c->divisible_by = d;
    c->padded_vocab = rows;
    c->t5_sentinels = l.sentinels;
    c->t5_specials = l.specials;
    m->vocab_extra_ids = n;
    m->legacy_tokenizer = 1;
    pl_log_info("%s: %lld sentinels <extra_id_N> renumbered as plait's legacy "
                "SentencePieceTokenizer has them (--legacy-tokenizer --vocab-extra-ids %lld), "
                "%lld rows past its %lld tokens kept as padding (--make-vocab-size-divisible-by "
                "%lld)", in, (long long)n, (long long)n, (long long)(rows - V), (long long)V,
                (long long)d);
    return PL_OK;
}
