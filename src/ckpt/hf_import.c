/* Hugging Face directory -> plait release checkpoint (ckpt/hf.h).
 *
 * The model is assembled globally in one TP 1 registry (its vocabulary padded
 * for the target TP size, padding rows zero): every plait element is written
 * from the Hugging Face element that model/hf_names.h says it came from, so
 * import is the exact inverse of export. Then each (TP, PP) rank of the target
 * layout copies its slices out of it (pl_param_global_index) and the ranks'
 * files, the manifest and the tokenizer's files are published as a save is
 * (Megatron's release directory: weights only, iteration 0).
 *
 * What is read: config.json, then model.safetensors or the shards that
 * model.safetensors.index.json names (plain file names in the directory),
 * mapped read-only; failing those, pytorch_model.bin or the shards of
 * pytorch_model.bin.index.json, torch.save files read by plait's restricted
 * reader (ckpt/torch_file.h: nothing in them runs; torch's older non-zip
 * format is refused). F32, BF16 and F16 tensors (converted to fp32 exactly). A
 * tensor is refused when its shape is not the config's, when it is missing,
 * or when plait has no place for it (buffers transformers used to save, GPT-2's
 * attn.bias / attn.masked_bias and Llama's rotary_emb.inv_freq, are skipped). */
#include "ckpt/hf.h"

#include "ckpt/import.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/safetensors.h"
#include "ckpt/torch_file.h"
#include "data/tokenizer/tokenizer.h"
#include "kernels/kernels.h"
#include "model/hf_names.h"
#include "model/spec.h"

#include <stdio.h>
#include <string.h>

enum { HF_PATH_MAX = 4096, HF_MAX_FILES = 4096 };

/* The directory's weight files: safetensors, or (is_pt) torch.save files
 * (pytorch_model.bin, read by the restricted reader of ckpt/torch_file.h). */
typedef struct hf_files {
    pl_safetensors *st;
    pl_pt *pt;
    int is_pt;
    char (*names)[256];
    int n;
} hf_files;

static void files_close(hf_files *f)
{
    for (int i = 0; i < f->n; i++)
        if (f->is_pt)
            pl_pt_close(&f->pt[i]);
        else
            pl_safetensors_close(&f->st[i]);
    pl_free(f->st);
    pl_free(f->pt);
    pl_free(f->names);
    memset(f, 0, sizeof *f);
}

static pl_status files_add(hf_files *f, const char *dir, const char *name, const char *where)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return PL_OK;
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
        strlen(name) >= sizeof f->names[0])
        return pl_errorf(PL_ERR_FORMAT, "%s: shard \"%s\": expected a file name in the directory",
                         where, name);
    if (f->n == HF_MAX_FILES)
        return pl_errorf(PL_ERR_FORMAT, "%s: more than %d shards", where, HF_MAX_FILES);
    char path[HF_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pl_status st = f->is_pt ? pl_pt_open(&f->pt[f->n], path) : pl_safetensors_open(&f->st[f->n], path);
    if (f->is_pt && !st && pl_pt_root(&f->pt[f->n])->kind != PL_PK_DICT)
        st = pl_errorf(PL_ERR_FORMAT, "%s: not a state dict", path);
    if (st) {
        if (f->is_pt)
            pl_pt_close(&f->pt[f->n]);
        return st;
    }
    snprintf(f->names[f->n], sizeof f->names[0], "%s", name);
    f->n++;
    return PL_OK;
}

static pl_status files_open(hf_files *f, const char *dir)
{
    char path[HF_PATH_MAX + 64];
    memset(f, 0, sizeof *f);
    f->st = pl_calloc(HF_MAX_FILES, sizeof *f->st);
    f->pt = pl_calloc(HF_MAX_FILES, sizeof *f->pt);
    f->names = pl_calloc(HF_MAX_FILES, sizeof *f->names);
    if (!f->st || !f->pt || !f->names)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    /* safetensors first, as transformers prefers them; else PyTorch's files */
    static const char *const kinds[2][2] = {{"model.safetensors.index.json", "model.safetensors"},
                                            {"pytorch_model.bin.index.json", "pytorch_model.bin"}};
    int kind = -1, indexed = 0;
    for (int k = 0; k < 2 && kind < 0; k++)
        for (int j = 0; j < 2 && kind < 0; j++) {
            snprintf(path, sizeof path, "%s/%s", dir, kinds[k][j]);
            if (pl_file_exists(path))
                kind = k, indexed = j == 0;
        }
    if (kind < 0)
        return pl_errorf(PL_ERR_ARG, "%s: no model.safetensors, pytorch_model.bin, nor their "
                         "index", dir);
    f->is_pt = kind == 1;
    if (!indexed)
        return files_add(f, dir, kinds[kind][1], dir);
    char *text = NULL;
    size_t n;
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st)
        return st;
    cJSON *idx = cJSON_ParseWithLength(text, n);
    pl_free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(idx, "weight_map"), *e;
    if (!cJSON_IsObject(map))
        st = pl_errorf(PL_ERR_FORMAT, "%s: no \"weight_map\" object", path);
    cJSON_ArrayForEach(e, map)
    {
        if (st)
            break;
        st = cJSON_IsString(e) ? files_add(f, dir, e->valuestring, path)
                               : pl_errorf(PL_ERR_FORMAT, "%s: \"weight_map\".\"%s\" is not a "
                                           "file name", path, e->string);
    }
    cJSON_Delete(idx);
    return st;
}

/* A tensor of one of the files. */
typedef struct hf_src {
    int file;
    const pl_st_tensor *st; /* safetensors */
    const pl_pk *pk;        /* torch.save */
    int ndim;
    int64_t shape[2];
    const char *dtype;
} hf_src;

/* The tensor named name in any file, or 0. */
static int files_find(const hf_files *f, const char *name, hf_src *out)
{
    for (int i = 0; i < f->n; i++) {
        memset(out, 0, sizeof *out);
        out->file = i;
        if (f->is_pt) {
            const pl_pk *t = pl_pk_get(pl_pt_root(&f->pt[i]), name);
            if (!t)
                continue;
            if (t->kind != PL_PK_TENSOR) {
                out->ndim = -1; /* present, not a tensor */
                return 1;
            }
            out->pk = t;
            out->ndim = t->ndim;
            out->dtype = t->storage->dtype;
            for (int k = 0; k < t->ndim && k < 2; k++)
                out->shape[k] = t->shape[k];
            return 1;
        }
        const pl_st_tensor *t = pl_safetensors_find(&f->st[i], name);
        if (t) {
            out->st = t;
            out->ndim = t->ndim;
            out->dtype = t->dtype;
            for (int k = 0; k < t->ndim && k < 2; k++)
                out->shape[k] = t->shape[k];
            return 1;
        }
    }
    return 0;
}

static float element(const char *dtype, const uint8_t *p, int64_t i)
{
    if (dtype[0] == 'F' && dtype[1] == '3') {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    if (strcmp(dtype, "BF16") == 0)
        return pl_ref_bf16_to_f32(h);
    return pl_ref_fp16_to_f32(h);
}

/* name's older LayerNorm spelling in out (".weight" -> ".gamma", ".bias" -> ".beta",
 * which BERT checkpoints such as bert-base-uncased's still use and transformers
 * renames on load), or name itself when it has none. */
static const char *legacy_name(const char *name, char out[PL_PARAM_NAME_MAX + 8])
{
    const size_t n = strlen(name);
    if (n > 16 && strcmp(name + n - 16, "LayerNorm.weight") == 0)
        snprintf(out, PL_PARAM_NAME_MAX + 8, "%.*sgamma", (int)(n - 6), name);
    else if (n > 14 && strcmp(name + n - 14, "LayerNorm.bias") == 0)
        snprintf(out, PL_PARAM_NAME_MAX + 8, "%.*sbeta", (int)(n - 4), name);
    else
        return name;
    return out;
}

/* Writes the Hugging Face tensor t of parameter p into the global buffer. */
static pl_status place(const hf_files *f, const pl_model_config *c, const pl_param *p,
                       const pl_hf_tensor *t, float *global, const char *dir)
{
    hf_src s;
    char legacy[PL_PARAM_NAME_MAX + 8];
    if (!files_find(f, t->name, &s) && !files_find(f, legacy_name(t->name, legacy), &s))
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s is missing (plait's %s)", dir, t->name,
                         p->name);
    const int64_t cols = t->ndim == 2 ? t->shape[1] : 0;
    if (s.ndim != t->ndim || s.shape[0] != t->shape[0] || (t->ndim == 2 && s.shape[1] != cols))
        return pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s has %d dimensions [%lld, %lld], "
                         "config.json gives [%lld, %lld]", dir, f->names[s.file], t->name, s.ndim,
                         (long long)s.shape[0], (long long)(s.ndim > 1 ? s.shape[1] : 0),
                         (long long)t->shape[0], (long long)cols);
    if (strcmp(s.dtype, "F32") != 0 && strcmp(s.dtype, "BF16") != 0 && strcmp(s.dtype, "F16") != 0)
        return pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s is %s: expected F32, BF16 or F16", dir,
                         f->names[s.file], t->name, s.dtype);
    const int64_t numel = t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    float *x = pl_malloc((size_t)(numel ? numel : 1) * sizeof *x);
    pl_status st = x ? PL_OK : pl_errorf(PL_ERR_NOMEM, "out of memory for %s", t->name);
    for (int64_t i = 0; !st && s.st && i < numel; i++)
        x[i] = element(s.dtype, f->st[s.file].data + s.st->begin, i);
    if (!st && !s.st)
        st = pl_pt_tensor_floats(&f->pt[s.file], s.pk, x, numel);
    int dropped = 0;
    for (int64_t i = 0; !st && i < numel; i++) {
        const int64_t k = pl_hf_source_index(c, p, t, i);
        if (k >= 0)
            global[p->offset + k] = x[i];
        else if (t->tf == PL_HF_TYPES0) /* BERT's token types of a model without them */
            dropped |= pl_hf_bert_fold_types(c, i, x[i], global + p->offset);
        /* else BART's two position rows before its offset: never read */
    }
    if (dropped)
        pl_log_warn("%s: %s: the rows of token types other than 0 are not zero, and plait's "
                    "BERT without a binary head has no token types: type 0's row is added to "
                    "the position embeddings, the others are dropped", dir, t->name);
    pl_free(x);
    return st;
}

/* A tensor of the directory that nothing took: a skipped buffer, or an error. */
static int skipped_buffer(const char *name)
{
    static const char *const suffixes[] = {".attn.bias", ".attn.masked_bias",
                                           ".rotary_emb.inv_freq",
                                           /* BERT: the tied decoder, a position buffer */
                                           "cls.predictions.decoder.weight",
                                           "cls.predictions.decoder.bias",
                                           "embeddings.position_ids",
                                           /* BART: tied to model.shared */
                                           "model.encoder.embed_tokens.weight",
                                           "model.decoder.embed_tokens.weight"};
    const size_t n = strlen(name);
    for (size_t k = 0; k < sizeof suffixes / sizeof *suffixes; k++) {
        const size_t m = strlen(suffixes[k]);
        if (n > m && strcmp(name + n - m, suffixes[k]) == 0)
            return 1;
    }
    return 0;
}

static pl_status assemble(const hf_files *f, const pl_model_config *c, const pl_registry *reg,
                          float *global, const char *dir)
{
    for (int i = 0; i < reg->n; i++) {
        pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
        const int n = pl_hf_map(c, &reg->params[i], t);
        if (n < 0)
            return pl_errorf(PL_ERR_ARG, "plait's %s has no Hugging Face name", reg->params[i].name);
        for (int k = 0; k < n; k++) {
            pl_status st = place(f, c, &reg->params[i], &t[k], global, dir);
            if (st)
                return st;
        }
    }
    /* every tensor of the directory taken, or a known buffer, or a tied lm_head */
    for (int i = 0; i < f->n; i++)
        for (int64_t k = 0; k < (f->is_pt ? pl_pt_root(&f->pt[i])->n / 2 : f->st[i].n); k++) {
            const pl_pk *key = f->is_pt ? pl_pt_root(&f->pt[i])->v[2 * k] : NULL;
            if (key && key->kind != PL_PK_STR)
                return pl_errorf(PL_ERR_FORMAT, "%s/%s: a key that is not a string", dir,
                                 f->names[i]);
            const char *name = key ? key->s : f->st[i].tensors[k].name;
            if (skipped_buffer(name) || pl_hf_t5_tied_copy(c, name) ||
                (!c->untie && strcmp(name, "lm_head.weight") == 0))
                continue;
            int found = 0;
            char legacy[PL_PARAM_NAME_MAX + 8];
            for (int p = 0; p < reg->n && !found; p++) {
                pl_hf_tensor t[PL_HF_MAX_PER_PARAM];
                const int n = pl_hf_map(c, &reg->params[p], t);
                for (int j = 0; j < n; j++)
                    found |= strcmp(t[j].name, name) == 0 ||
                             strcmp(legacy_name(t[j].name, legacy), name) == 0;
            }
            if (!found && c->family == PL_FAMILY_BERT &&
                (strncmp(name, "bert.pooler.", 12) == 0 || strncmp(name, "cls.", 4) == 0)) {
                /* another BERT class's head (bert-base-uncased's BertForMaskedLM files hold
                 * BertForPreTraining's): dropped, as transformers drops unexpected keys */
                pl_log_warn("%s/%s: %s is not part of the config's class: dropped", dir,
                            f->names[i], name);
                continue;
            }
            if (!found)
                return pl_errorf(PL_ERR_FORMAT, "%s/%s: tensor %s has no place in plait's %s",
                                 dir, f->names[i], name,
                                 pl_family_get(c->family)->hf_architecture);
        }
    return PL_OK;
}

/* The tokenizer the directory holds, as Megatron's flags name it. */
static void find_tokenizer(const char *in, const pl_model_config *c, pl_ckpt_meta *m, char *a,
                           char *b, size_t n)
{
    if (pl_hf_t5_find_tokenizer(in, c, m, a, n))
        return;
    snprintf(a, n, "%s/vocab.json", in);
    snprintf(b, n, "%s/merges.txt", in);
    if (pl_file_exists(a) && pl_file_exists(b)) {
        m->tokenizer_type = "GPT2BPETokenizer";
        m->vocab_file = a;
        m->merge_file = b;
        return;
    }
    snprintf(a, n, "%s/tokenizer.model", in);
    if (c->family == PL_FAMILY_LLAMA && pl_file_exists(a)) {
        m->tokenizer_type = "Llama2Tokenizer";
        m->tokenizer_model = a;
        return;
    }
    snprintf(a, n, "%s/vocab.txt", in);
    if ((c->family == PL_FAMILY_BERT || c->family == PL_FAMILY_BART) &&
        pl_file_exists(a)) { /* BertTokenizer */
        m->tokenizer_type = pl_hf_bert_tokenizer_type(in);
        m->vocab_file = a;
        return;
    }
    snprintf(a, n, "%s/tokenizer.json", in);
    if (pl_file_exists(a)) {
        m->tokenizer_type = "HuggingFaceTokenizer";
        snprintf(a, n, "%s", in);
        m->tokenizer_model = a;
    }
}

static pl_status check_tokenizer(const pl_ckpt_meta *m, const pl_model_config *c)
{
    if (!m->tokenizer_type) {
        pl_log_warn("no tokenizer files recognised (vocab.json + merges.txt, tokenizer.model, "
                    "tokenizer.json): the checkpoint names none");
        return PL_OK;
    }
    pl_tokenizer *tok = NULL;
    pl_status st = pl_tokenizer_open(&tok, &(pl_tokenizer_spec){m->tokenizer_type, m->vocab_file,
                                                                m->merge_file, m->tokenizer_model,
                                                                m->vocab_extra_ids,
                                                                m->legacy_tokenizer});
    if (st)
        return st;
    if (tok->vocab_size == c->vocab_size + 2 && strncmp(m->tokenizer_type, "BertWordPiece", 13) == 0)
        pl_log_info("the tokenizer (%s) has vocab.txt's %lld tokens and Megatron's [BOS] and "
                    "[EOS]: the checkpoint keeps vocab_size %lld, which a run with the "
                    "tokenizer takes (their rows start as padding)", m->tokenizer_type,
                    (long long)c->vocab_size, (long long)c->vocab_size);
    else if (tok->vocab_size != c->vocab_size)
        pl_log_warn("the tokenizer (%s) has %lld tokens but config.json's vocab_size is %lld: "
                    "plait train with this tokenizer will refuse the checkpoint's vocabulary "
                    "(train with --vocab-size %lld and pretokenized data instead)",
                    m->tokenizer_type, (long long)tok->vocab_size, (long long)c->vocab_size,
                    (long long)c->vocab_size);
    pl_tokenizer_free(tok);
    return PL_OK;
}

pl_status pl_hf_import(const char *in, const char *out, const pl_hf_import_opts *o)
{
    char path[HF_PATH_MAX + 64];
    char tok_a[HF_PATH_MAX + 64], tok_b[HF_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/config.json", in);
    char *text = NULL;
    size_t n;
    cJSON *config = NULL;
    hf_files files;
    memset(&files, 0, sizeof files);
    pl_registry g;
    pl_registry_init(&g, 1, 0, 0);
    float *global = NULL;
    pl_model_config cfg;
    pl_status st = pl_file_read_all(path, &text, &n);
    if (st)
        goto fail;
    if (!(config = cJSON_ParseWithLength(text, n))) {
        st = pl_errorf(PL_ERR_FORMAT, "%s: not valid JSON", path);
        goto fail;
    }
    PL_TRY(pl_hf_config_parse(config, path, o->divisible_by, o->tp, &cfg));
    pl_ckpt_meta meta = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .seed = 1234,
                         .tp = o->tp, .pp = o->pp, .dp = 1};
    find_tokenizer(in, &cfg, &meta, tok_a, tok_b, sizeof tok_a);
    if (cfg.family == PL_FAMILY_T5)
        PL_TRY(pl_hf_t5_import_vocab(in, o->divisible_by, o->tp, &cfg, &meta));
    PL_TRY(check_tokenizer(&meta, &cfg));
    PL_TRY(files_open(&files, in));
    PL_TRY(pl_model_register(&g, &cfg, 1));
    global = pl_calloc((size_t)(g.numel > 0 ? g.numel : 1), sizeof(float));
    if (!global) {
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's %lld parameters",
                       (long long)g.numel);
        goto fail;
    }
    PL_TRY(assemble(&files, &cfg, &g, global, in));
    PL_TRY(pl_ckpt_import_write(out, &cfg, &meta, &g, global, o->tp, o->pp));
    pl_log_info("wrote %s/release: %s %s as TP %d x PP %d (vocabulary %lld padded to %lld)", out,
                pl_family_get(cfg.family)->name, in, o->tp, o->pp, (long long)cfg.vocab_size,
                (long long)cfg.padded_vocab);
fail:
    pl_free(text);
    cJSON_Delete(config);
    files_close(&files);
    pl_free(global);
    pl_registry_free(&g);
    return st;
}
