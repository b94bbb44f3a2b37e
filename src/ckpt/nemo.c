/* NeMo .nemo archives of Megatron GPT models -> plait release checkpoints
 * (ckpt/megatron.h, pl_nemo_import). A .nemo file is a tar archive (plain or
 * gzip) holding model_config.yaml and the weights, model_weights.ckpt (TP 1 x
 * PP 1) or mp_rank_TT[_PPP]/model_weights.ckpt: torch.save state dicts, flat,
 * keys prefixed "model." (and "module." under megatron_amp_O2). The archive
 * is read into memory whole; nothing in it is run. */
#include "ckpt/megatron.h"

#include "base/alloc.h"
#include "base/log.h"
#include "base/zread.h"
#include "ckpt/import.h"
#include "ckpt/megatron_internal.h"
#include "ckpt/tar.h"
#include "model/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

enum { NEMO_MAX_KV = 256 };

typedef struct nemo_kv {
    pl_mg_kv kv[NEMO_MAX_KV];
    int n;
} nemo_kv;

static void put(nemo_kv *t, const char *key, const char *val)
{
    for (int k = 0; k < t->n; k++)
        if (strcmp(t->kv[k].key, key) == 0) {
            snprintf(t->kv[k].val, sizeof t->kv[k].val, "%s", val);
            return;
        }
    if (t->n == NEMO_MAX_KV)
        return;
    snprintf(t->kv[t->n].key, sizeof t->kv[t->n].key, "%s", key);
    snprintf(t->kv[t->n].val, sizeof t->kv[t->n].val, "%s", val);
    t->n++;
}

static const char *get(const nemo_kv *t, const char *key)
{
    for (int k = 0; k < t->n; k++)
        if (strcmp(t->kv[k].key, key) == 0)
            return t->kv[k].val;
    return NULL;
}

/* The top-level scalar keys of a YAML mapping (nested values skipped). */
static pl_status yaml_top(const uint8_t *text, size_t n, const char *what, nemo_kv *out)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return pl_errorf(PL_ERR_NOMEM, "%s: out of memory", what);
    yaml_parser_set_input_string(&p, text, n);
    pl_status st = PL_OK;
    int depth = 0, want_key = 1, done = 0;
    char key[64] = "";
    while (!done && !st) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            st = pl_errorf(PL_ERR_FORMAT, "%s: YAML error at line %zu: %s", what,
                           p.problem_mark.line + 1, p.problem ? p.problem : "?");
            break;
        }
        switch (e.type) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (depth == 1)
                want_key = 1; /* a nested value of the key just read */
            depth++;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            break;
        case YAML_SCALAR_EVENT:
            if (depth == 1) {
                const char *v = (const char *)e.data.scalar.value;
                if (want_key)
                    snprintf(key, sizeof key, "%s", v);
                else
                    put(out, key, v);
                want_key = !want_key;
            }
            break;
        case YAML_ALIAS_EVENT:
            if (depth == 1)
                want_key = !want_key;
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    return st;
}

/* NeMo's model config keys as Megatron's args (pl_mg_config reads them). */
static pl_status translate(const nemo_kv *y, const char *what, nemo_kv *a)
{
    static const char *const same[] = {
        "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
        "max_position_embeddings", "make_vocab_size_divisible_by", "tensor_model_parallel_size",
        "pipeline_model_parallel_size", "layernorm_epsilon", "init_method_std", "hidden_dropout",
        "attention_dropout", "num_query_groups", "rotary_base", "openai_gelu",
        "position_embedding_type", "virtual_pipeline_model_parallel_size", NULL};
    for (int k = 0; same[k]; k++)
        if (get(y, same[k]))
            put(a, same[k], get(y, same[k]));
    const char *v;
    if ((v = get(y, "encoder_seq_length")))
        put(a, "seq_length", v);
    if ((v = get(y, "rotary_percentage")))
        put(a, "rotary_percent", v);
    if ((v = get(y, "num_moe_experts")))
        put(a, "num_experts", v);
    if ((v = get(y, "normalization"))) {
        if (strcmp(v, "layernorm") && strcmp(v, "rmsnorm"))
            return pl_errorf(PL_ERR_ARG, "%s: normalization: %s is not supported (layernorm, "
                             "rmsnorm)", what, v);
        put(a, "normalization", v[0] == 'l' ? "LayerNorm" : "RMSNorm");
    }
    if ((v = get(y, "activation"))) {
        const int swiglu = !strcmp(v, "swiglu") || !strcmp(v, "fast-swiglu");
        if (!swiglu && strcmp(v, "gelu"))
            return pl_errorf(PL_ERR_ARG, "%s: activation: %s is not supported (gelu, swiglu, "
                             "fast-swiglu)", what, v);
        put(a, "swiglu", swiglu ? "true" : "false");
    }
    /* NeMo's legacy layer reads it, its Megatron core layer ignores it (mcore_gpt) */
    if ((v = get(y, "apply_residual_connection_post_layernorm")) &&
        (!strcmp(v, "true") || !strcmp(v, "True")))
        return pl_errorf(PL_ERR_ARG, "%s: apply_residual_connection_post_layernorm: true is not "
                         "imported from a .nemo (NeMo's legacy layer reads it, its Megatron "
                         "core layer ignores it: which one ran is unknown)", what);
    if ((v = get(y, "transformer_block_type")) && strcmp(v, "pre_ln"))
        return pl_errorf(PL_ERR_ARG, "%s: transformer_block_type: %s is not supported (pre_ln)",
                         what, v);
    if ((v = get(y, "bias")))
        put(a, "add_bias_linear", v);
    v = get(y, "share_embeddings_and_output_weights");
    const int shared = !v || !strcmp(v, "true") || !strcmp(v, "True");
    put(a, "untie_embeddings_and_output_weights", shared ? "false" : "true");
    const char *g = get(y, "num_query_groups"), *h = get(y, "num_attention_heads");
    if (g && strcmp(g, "null") && strcmp(g, "~") && h && strcmp(g, h))
        put(a, "group_query_attention", "true");
    return PL_OK;
}

/* The vocabulary rows of a rank's word embeddings (any key ending so). */
static int64_t embedding_rows(const pl_pk *sd)
{
    for (int64_t k = 0; sd && sd->kind == PL_PK_DICT && k + 1 < sd->n; k += 2) {
        const pl_pk *key = sd->v[k], *val = sd->v[k + 1];
        const char *suf = "word_embeddings.weight";
        if (key->kind == PL_PK_STR && key->n >= (int64_t)strlen(suf) &&
            !strcmp(key->s + key->n - strlen(suf), suf) && val->kind == PL_PK_TENSOR &&
            val->ndim == 2)
            return val->shape[0];
    }
    return -1;
}

static void weights_name(int tp, int pp, int t, int p, char *out, size_t n)
{
    if (tp == 1 && pp == 1)
        snprintf(out, n, "model_weights.ckpt");
    else if (pp == 1)
        snprintf(out, n, "mp_rank_%02d/model_weights.ckpt", t);
    else
        snprintf(out, n, "mp_rank_%02d_%03d/model_weights.ckpt", t, p);
}

pl_status pl_nemo_import(const char *path, const char *out, const pl_megatron_import_opts *o)
{
    char *img = NULL, name[64], what[4400];
    size_t size = 0;
    pl_tar tar;
    memset(&tar, 0, sizeof tar);
    pl_registry g;
    pl_registry_init(&g, 1, 0, 0);
    float *global = NULL;
    nemo_kv *y = pl_calloc(1, sizeof *y), *a = pl_calloc(1, sizeof *a);
    pl_pt f;
    memset(&f, 0, sizeof f);
    pl_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    pl_ckpt_meta meta = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .seed = 1234, .dp = 1};
    int tp = 1, pp = 1;
    pl_status st = y && a ? pl_zread_file(path, &img, &size) : pl_errorf(PL_ERR_NOMEM, "out of memory");
    if (!st)
        st = pl_tar_parse(&tar, (const uint8_t *)img, size, path);
    const pl_tar_entry *yml = st ? NULL : pl_tar_find(&tar, "model_config.yaml");
    if (!st && !yml)
        st = pl_errorf(PL_ERR_FORMAT, "%s: no model_config.yaml: not a .nemo archive", path);
    snprintf(what, sizeof what, "%s: model_config.yaml", path);
    if (!st)
        st = yaml_top(yml->data, yml->size, what, y);
    if (!st)
        st = translate(y, what, a);
    /* the padded vocabulary: rank 0's embedding rows x TP */
    const char *tps = get(a, "tensor_model_parallel_size"), *pps = get(a, "pipeline_model_parallel_size");
    const int tp0 = tps ? atoi(tps) : 1, pp0 = pps ? atoi(pps) : 1;
    const pl_tar_entry *w0 = NULL;
    if (!st) {
        weights_name(tp0 > 0 ? tp0 : 1, pp0 > 0 ? pp0 : 1, 0, 0, name, sizeof name);
        if (!(w0 = pl_tar_find(&tar, name)))
            st = pl_errorf(PL_ERR_FORMAT, "%s: no %s (TP %d x PP %d)", path, name, tp0, pp0);
    }
    if (!st) {
        snprintf(what, sizeof what, "%s: %s", path, name);
        st = pl_pt_parse(&f, w0->data, w0->size, what);
    }
    if (!st) {
        const int64_t rows = embedding_rows(pl_pt_root(&f));
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)(rows * (tp0 > 0 ? tp0 : 1)));
        if (rows <= 0)
            st = pl_errorf(PL_ERR_FORMAT, "%s: no word_embeddings.weight to size the vocabulary", what);
        put(a, "padded_vocab_size", buf);
    }
    pl_pt_close(&f);
    pl_mg_args args = {NULL, a ? a->kv : NULL, a ? a->n : 0, what, 0};
    snprintf(what, sizeof what, "%s: model_config.yaml", path);
    if (!st)
        st = pl_mg_config(&args, NULL, &cfg, &tp, &pp);
    if (!st)
        st = pl_model_register(&g, &cfg, 1);
    if (!st && !(global = pl_calloc((size_t)(g.numel > 0 ? g.numel : 1), sizeof(float))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's %lld parameters",
                       (long long)g.numel);
    for (int t = 0; t < tp && !st; t++)
        for (int p = 0; p < pp && !st; p++) {
            weights_name(tp, pp, t, p, name, sizeof name);
            const pl_tar_entry *w = pl_tar_find(&tar, name);
            snprintf(what, sizeof what, "%s: %s", path, name);
            if (!w) {
                st = pl_errorf(PL_ERR_FORMAT, "%s: missing from the archive", what);
                break;
            }
            memset(&f, 0, sizeof f);
            st = pl_pt_parse(&f, w->data, w->size, what);
            if (!st && pl_pt_root(&f)->kind != PL_PK_DICT)
                st = pl_errorf(PL_ERR_FORMAT, "%s: not a state dict", what);
            if (!st)
                st = pl_mg_take_rank(&f, pl_pt_root(&f), &cfg, tp, pp, t, p, &g, global, 0);
            pl_pt_close(&f);
        }
    pl_model_config target = cfg;
    const int out_tp = o->tp > 0 ? o->tp : tp, out_pp = o->pp > 0 ? o->pp : pp;
    if (!st && o->vocab_size > 0) {
        if (o->vocab_size > cfg.padded_vocab)
            st = pl_errorf(PL_ERR_ARG, "--vocab-size %lld exceeds the checkpoint's padded "
                           "vocabulary %lld", (long long)o->vocab_size, (long long)cfg.padded_vocab);
        target.vocab_size = o->vocab_size;
    }
    if (!st) {
        target.padded_vocab = pl_model_padded_vocab(target.vocab_size, target.divisible_by, out_tp);
        meta.tp = out_tp;
        meta.pp = out_pp;
        pl_log_warn("%s: NeMo's tokenizer (its files inside the archive) is not recorded: give "
                    "--tokenizer-type and its files to plait train", path);
        st = pl_ckpt_import_write(out, &target, &meta, &g, global, out_tp, out_pp);
    }
    if (!st)
        pl_ckpt_import_log(out, "NeMo", &cfg, tp, pp, &target, out_tp, out_pp);
    pl_free(global);
    pl_registry_free(&g);
    pl_tar_free(&tar);
    pl_free(img);
    pl_free(y);
    pl_free(a);
    return st;
}
