/* plait checkpoint -> Hugging Face directory (ckpt/hf.h).
 *
 * The whole model is gathered into one TP 1 x PP 1 registry in this process
 * (memory: the fp32 model, plus one shard's converted tensors at a time), then
 * each Hugging Face tensor of model/hf_names.h is made element by element from
 * its plait tensor (pl_hf_source_index) and written shard by shard. */
#include "ckpt/hf.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/safetensors.h"
#include "ckpt/source.h"
#include "data/tokenizer/tokenizer.h"
#include "kernels/kernels.h"
#include "model/hf_names.h"
#include "model/spec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HF_PATH_MAX = 4096 };

/* One Hugging Face tensor: what it is made of and which shard holds it. */
typedef struct hf_out {
    pl_hf_tensor t;
    int param; /* index in the registry */
    int64_t numel;
    int shard;
} hf_out;

typedef struct hf_export {
    pl_model_config cfg;
    pl_registry reg;
    float *params;
    hf_out *outs;
    int n_outs, n_shards;
    int bf16;
    int64_t total_bytes;
} hf_export;

static pl_status plan_tensors(hf_export *e, int64_t max_shard)
{
    e->outs = pl_calloc((size_t)e->reg.n * PL_HF_MAX_PER_PARAM + 1, sizeof *e->outs);
    if (!e->outs)
        return pl_errorf(PL_ERR_NOMEM, "out of memory planning the export");
    const int64_t esize = e->bf16 ? 2 : 4;
    int64_t in_shard = 0;
    int shard = 0;
    for (int i = 0; i < e->reg.n; i++) {
        pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
        const int n = pl_hf_map(&e->cfg, &e->reg.params[i], t);
        if (n < 0)
            return pl_errorf(PL_ERR_ARG, "the checkpoint's tensor %s has no Hugging Face name "
                             "(model/hf_names.c)", e->reg.params[i].name);
        for (int k = 0; k < n; k++) {
            hf_out *o = &e->outs[e->n_outs++];
            o->t = t[k];
            o->param = i;
            o->numel = t[k].shape[0] * (t[k].ndim == 2 ? t[k].shape[1] : 1);
            const int64_t bytes = o->numel * esize;
            if (in_shard > 0 && in_shard + bytes > max_shard) {
                shard++;
                in_shard = 0;
            }
            o->shard = shard;
            in_shard += bytes;
            e->total_bytes += bytes;
        }
    }
    e->n_shards = shard + 1;
    return PL_OK;
}

static void shard_name(const hf_export *e, int s, char *out, size_t n)
{
    if (e->n_shards == 1)
        snprintf(out, n, "model.safetensors");
    else
        snprintf(out, n, "model-%05d-of-%05d.safetensors", s + 1, e->n_shards);
}

/* Fills o's values (F32 or BF16) into buf. */
static void make_tensor(const hf_export *e, const hf_out *o, void *buf)
{
    const pl_param *p = &e->reg.params[o->param];
    const float *src = e->params + p->offset;
    float *f = buf;
    uint16_t *h = buf;
    for (int64_t i = 0; i < o->numel; i++) {
        const int64_t k = pl_hf_source_index(&e->cfg, p, &o->t, i);
        const float v = k >= 0 ? src[k] : 0.0f; /* -1: BERT's zero token types (TYPES0) */
        if (e->bf16)
            h[i] = pl_ref_bf16_from_f32(v);
        else
            f[i] = v;
    }
}

static pl_status write_shard(const hf_export *e, int s, const char *tmp)
{
    pl_st_writer *w = NULL;
    void **bufs = pl_calloc((size_t)e->n_outs, sizeof *bufs);
    pl_status st = bufs ? pl_st_writer_new(&w) : pl_errorf(PL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < e->n_outs && !st; k++) {
        const hf_out *o = &e->outs[k];
        if (o->shard != s)
            continue;
        bufs[k] = pl_malloc((size_t)o->numel * (e->bf16 ? 2 : 4));
        if (!bufs[k]) {
            st = pl_errorf(PL_ERR_NOMEM, "out of memory for %s", o->t.name);
            break;
        }
        make_tensor(e, o, bufs[k]);
        st = pl_st_writer_add(w, o->t.name, e->bf16 ? "BF16" : "F32", o->t.ndim, o->t.shape,
                              bufs[k]);
    }
    if (!st) /* transformers' from_pretrained requires the "format" metadata */
        st = pl_st_writer_meta(w, "format", "pt");
    if (!st) {
        char name[64], path[HF_PATH_MAX + 64];
        shard_name(e, s, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", tmp, name);
        st = pl_st_writer_finish(w, path);
        w = NULL;
    }
    pl_st_writer_free(w);
    for (int k = 0; bufs && k < e->n_outs; k++)
        pl_free(bufs[k]);
    pl_free(bufs);
    return st;
}

static pl_status write_json(const char *tmp, const char *name, const cJSON *j)
{
    char path[HF_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    char *text = cJSON_Print(j);
    if (!text)
        return pl_errorf(PL_ERR_NOMEM, "out of memory writing %s", name);
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON's buffer has its NUL there; a file ends with a newline */
    pl_status st = pl_file_write_atomic(path, text, n + 1);
    cJSON_free(text);
    return st;
}

static pl_status write_index(const hf_export *e, const char *tmp)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    int ok = meta && map && cJSON_AddNumberToObject(meta, "total_size", (double)e->total_bytes);
    /* sorted by name, as transformers writes it */
    for (int placed = 0; ok && placed < e->n_outs; placed++) {
        const hf_out *next = NULL;
        for (int k = 0; k < e->n_outs; k++) {
            const hf_out *o = &e->outs[k];
            if (cJSON_GetObjectItemCaseSensitive(map, o->t.name))
                continue;
            if (!next || strcmp(o->t.name, next->t.name) < 0)
                next = o;
        }
        char name[64];
        shard_name(e, next->shard, name, sizeof name);
        ok = cJSON_AddStringToObject(map, next->t.name, name) != NULL;
    }
    pl_status st = ok ? write_json(tmp, "model.safetensors.index.json", root)
                      : pl_errorf(PL_ERR_NOMEM, "out of memory writing the index");
    cJSON_Delete(root);
    return st;
}

static pl_status copy_to(const char *src, const char *tmp, const char *name)
{
    char *data = NULL, path[HF_PATH_MAX + 64];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    pl_status st = pl_file_read_all(src, &data, &n);
    if (!st)
        st = pl_file_write_atomic(path, data, n);
    pl_free(data);
    return st;
}

/* The tokenizer's files, as transformers' tokenizer classes name them, and
 * its bos/eos ids. Types without a Hugging Face counterpart write nothing. */
static pl_status export_tokenizer(const pl_ckpt_meta *m, const pl_model_config *c, const char *tmp,
                                  int64_t *bos, int64_t *eos, int64_t *pad)
{
    *bos = *eos = *pad = -1;
    const char *type = m->tokenizer_type;
    if (!type) {
        pl_log_info("the checkpoint names no tokenizer: no tokenizer files exported");
        return PL_OK;
    }
    pl_tokenizer *tok = NULL;
    pl_status st = pl_tokenizer_open(&tok, &(pl_tokenizer_spec){type, m->vocab_file, m->merge_file,
                                                                m->tokenizer_model,
                                                                m->vocab_extra_ids,
                                                                m->legacy_tokenizer});
    if (st)
        return st;
    *eos = tok->eod;
    const char *cls = NULL, *bos_tok = NULL;
    char dir[HF_PATH_MAX], from[HF_PATH_MAX + 64];
    if (strcmp(type, "GPT2BPETokenizer") == 0) {
        cls = "GPT2Tokenizer";
        bos_tok = "<|endoftext|>";
        st = copy_to(m->vocab_file, tmp, "vocab.json");
        if (!st)
            st = copy_to(m->merge_file, tmp, "merges.txt");
    } else if (strcmp(type, "HuggingFaceTokenizer") == 0 ||
               strcmp(type, "SentencePieceTokenizer") == 0 ||
               strcmp(type, "GPTSentencePieceTokenizer") == 0 ||
               strcmp(type, "Llama2Tokenizer") == 0) {
        struct stat sb;
        const int is_dir = stat(m->tokenizer_model, &sb) == 0 && S_ISDIR(sb.st_mode);
        const char *slash = strrchr(m->tokenizer_model, '/');
        snprintf(dir, sizeof dir, "%.*s", is_dir ? (int)strlen(m->tokenizer_model)
                                                 : slash ? (int)(slash - m->tokenizer_model) : 1,
                 is_dir || slash ? m->tokenizer_model : ".");
        const int hf = strcmp(type, "HuggingFaceTokenizer") == 0;
        if (!hf)
            st = copy_to(m->tokenizer_model, tmp, "tokenizer.model");
        else if (is_dir)
            snprintf(from, sizeof from, "%s/tokenizer.json", dir), st = copy_to(from, tmp, "tokenizer.json");
        else
            st = copy_to(m->tokenizer_model, tmp, "tokenizer.json");
        static const char *const beside[] = {"tokenizer_config.json", "special_tokens_map.json"};
        for (int k = 0; k < 2 && !st; k++) {
            snprintf(from, sizeof from, "%s/%s", dir, beside[k]);
            if (pl_file_exists(from))
                st = copy_to(from, tmp, beside[k]);
        }
        snprintf(from, sizeof from, "%s/tokenizer_config.json", dir);
        cls = pl_file_exists(from) ? NULL : hf ? "PreTrainedTokenizerFast" : "LlamaTokenizer";
        int32_t id = pl_tokenizer_token_id(tok, "<s>");
        if (id < 0)
            id = pl_tokenizer_token_id(tok, "<|begin_of_text|>");
        *bos = id;
    } else if (pl_hf_bert_tokenizer(type)) { /* BertTokenizer: vocab.txt; BERT's bos: [PAD] */
        cJSON *j = NULL;
        st = copy_to(m->vocab_file, tmp, "vocab.txt");
        if (!st)
            st = pl_hf_bert_tokenizer_config(type, c, &j);
        if (!st)
            st = write_json(tmp, "tokenizer_config.json", j);
        cJSON_Delete(j);
        *pad = pl_tokenizer_token_id(tok, "[PAD]");
        *bos = c->family == PL_FAMILY_BART ? pl_tokenizer_token_id(tok, "[BOS]") : *pad;
        *eos = c->family == PL_FAMILY_BART ? tok->eod : -1;
    } else {
        pl_log_warn("tokenizer %s has no Hugging Face counterpart written by plait: no "
                    "tokenizer files exported", type);
    }
    if (!st && bos_tok)
        *bos = pl_tokenizer_token_id(tok, bos_tok);
    if (!st && cls) {
        cJSON *j = cJSON_CreateObject();
        int ok = j && cJSON_AddStringToObject(j, "tokenizer_class", cls) &&
                 cJSON_AddNumberToObject(j, "model_max_length", (double)c->max_positions);
        if (ok && bos_tok)
            ok = cJSON_AddStringToObject(j, "bos_token", bos_tok) &&
                 cJSON_AddStringToObject(j, "eos_token", bos_tok) &&
                 cJSON_AddStringToObject(j, "unk_token", bos_tok);
        st = ok ? write_json(tmp, "tokenizer_config.json", j)
                : pl_errorf(PL_ERR_NOMEM, "out of memory writing tokenizer_config.json");
        cJSON_Delete(j);
    }
    pl_tokenizer_free(tok);
    return st;
}

static pl_status write_generation_config(const char *tmp, int64_t bos, int64_t eos)
{
    cJSON *j = cJSON_CreateObject();
    int ok = j && cJSON_AddBoolToObject(j, "_from_model_config", 1);
    if (ok && bos >= 0)
        ok = cJSON_AddNumberToObject(j, "bos_token_id", (double)bos) != NULL;
    if (ok && eos >= 0)
        ok = cJSON_AddNumberToObject(j, "eos_token_id", (double)eos) != NULL;
    pl_status st = ok ? write_json(tmp, "generation_config.json", j)
                      : pl_errorf(PL_ERR_NOMEM, "out of memory writing generation_config.json");
    cJSON_Delete(j);
    return st;
}

/* OUT.tmp, fresh; OUT must not exist or be an empty directory. */
static pl_status out_begin(const char *out, char *tmp, size_t n)
{
    snprintf(tmp, n, "%s.tmp", out);
    struct stat sb;
    if (stat(out, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode) || rmdir(out) != 0)
            return pl_errorf(PL_ERR_ARG, "--out %s exists and is not an empty directory: give a "
                             "new directory", out);
    }
    pl_status st = pl_rmtree(tmp);
    return st ? st : pl_mkdirs(tmp);
}

static pl_status out_publish(const char *out, const char *tmp)
{
    pl_status st = pl_fsync_dir(tmp);
    if (st)
        return st;
    if (rename(tmp, out) != 0)
        return pl_errorf(PL_ERR_IO, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
    char parent[HF_PATH_MAX];
    const char *slash = strrchr(out, '/');
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
    return pl_fsync_dir(parent[0] ? parent : "/");
}

pl_status pl_hf_export(const char *dir, int64_t it, const char *out, const pl_hf_export_opts *o)
{
    hf_export e;
    memset(&e, 0, sizeof e);
    e.bf16 = o->bf16;
    pl_ckpt_source *s;
    pl_status st = pl_ckpt_source_open(dir, it, &s);
    if (st)
        return st;
    e.cfg = *pl_ckpt_source_config(s);
    e.cfg.pp_chunks = 0;
    e.cfg.pp_first_layers = e.cfg.pp_last_layers = 0;
    const pl_ckpt_meta *m = pl_ckpt_source_meta(s);
    char tmp[HF_PATH_MAX];
    int published = 1; /* nothing to remove until OUT.tmp exists */
    cJSON *config = NULL;
    pl_registry_init(&e.reg, 1, 0, 0);
    int64_t bos = -1, eos = -1, pad = -1;
    if ((st = pl_hf_config_build(&e.cfg, e.bf16, -1, -1, &config))) /* refuses early */
        goto done;
    cJSON_Delete(config);
    config = NULL;
    if (e.cfg.family == PL_FAMILY_T5 && (st = pl_hf_t5_export_vocab(m, &e.cfg)))
        goto done;
    if ((st = pl_model_register(&e.reg, &e.cfg, 1)))
        goto done;
    if ((st = plan_tensors(&e, o->max_shard_bytes > 0 ? o->max_shard_bytes
                                                       : PL_HF_DEFAULT_SHARD_BYTES)))
        goto done;
    e.params = pl_malloc((size_t)(e.reg.numel > 0 ? e.reg.numel : 1) * sizeof(float));
    if (!e.params) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's %lld parameters",
                       (long long)e.reg.numel);
        goto done;
    }
    if ((st = pl_ckpt_source_fill(s, &e.reg, PL_CKPT_PARAMS, e.params, 0, e.reg.numel)))
        goto done;
    if ((st = out_begin(out, tmp, sizeof tmp)))
        goto done;
    published = 0;
    for (int k = 0; k < e.n_shards && !st; k++)
        st = write_shard(&e, k, tmp);
    if (!st && e.n_shards > 1)
        st = write_index(&e, tmp);
    if (!st && e.cfg.family == PL_FAMILY_T5)
        st = pl_hf_t5_export_tokenizer(m, &e.cfg, tmp, &eos);
    else if (!st)
        st = export_tokenizer(m, &e.cfg, tmp, &bos, &eos, &pad);
    if (!st && e.cfg.family == PL_FAMILY_BART) /* with the [PAD] id */
        st = pl_hf_bart_config_build(&e.cfg, e.bf16, bos, eos, pad, &config);
    else if (!st)
        st = pl_hf_config_build(&e.cfg, e.bf16, bos, eos, &config);
    if (!st && e.cfg.family == PL_FAMILY_BERT)
        st = pl_hf_bert_labels(config, dir);
    if (!st)
        st = write_json(tmp, "config.json", config);
    if (!st && e.cfg.family != PL_FAMILY_BERT && e.cfg.family != PL_FAMILY_BART)
        /* BERT: transformers writes none; BART's ids are in config.json */
        st = write_generation_config(tmp, bos, eos);
    if (!st && !(st = out_publish(out, tmp)))
        published = 1;
    if (!st)
        pl_log_info("wrote %s: %s, %d tensors in %d file%s, %lld bytes (%s)", out,
                    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(config, "architectures"),
                                       0)->valuestring, e.n_outs, e.n_shards,
                    e.n_shards > 1 ? "s" : "", (long long)e.total_bytes, e.bf16 ? "bf16" : "fp32");
done:
    if (!published)
        pl_rmtree(tmp); /* a failed export leaves nothing behind */
    cJSON_Delete(config);
    pl_free(e.params);
    pl_free(e.outs);
    pl_registry_free(&e.reg);
    pl_ckpt_source_close(s);
    return st;
}
