/* Megatron-LM torch-format checkpoints -> plait release checkpoints
 * (ckpt/megatron.h). */
#include "ckpt/megatron.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/files.h"
#include "ckpt/import.h"
#include "ckpt/tools.h"
#include "ckpt/torch_file.h"
#include "model/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MG_PATH = 4096, MG_FILE = MG_PATH + 128 };

/* ---- args (argparse.Namespace) ---- */

typedef struct mg_args {
    const pl_pk *ns;
    const char *file;
} mg_args;

static pl_status arg_num(const mg_args *a, const char *key, double def, double *out, int *present)
{
    const pl_pk *v = pl_pk_get(a->ns, key);
    if (present)
        *present = v && v->kind != PL_PK_NONE;
    if (!v || v->kind == PL_PK_NONE) {
        *out = def;
        return PL_OK;
    }
    if (v->kind == PL_PK_INT || v->kind == PL_PK_BOOL)
        *out = (double)v->i;
    else if (v->kind == PL_PK_FLOAT)
        *out = v->f;
    else
        return pl_errorf(PL_ERR_FORMAT, "%s: args.%s is not a number", a->file, key);
    return PL_OK;
}

static pl_status arg_int(const mg_args *a, const char *key, int64_t def, int64_t lo, int64_t hi,
                         int64_t *out)
{
    double v = 0;
    pl_status st = arg_num(a, key, (double)def, &v, NULL);
    if (st)
        return st;
    if (v != (double)(int64_t)v || v < (double)lo || v > (double)hi)
        return pl_errorf(PL_ERR_FORMAT, "%s: args.%s is %g: expected an integer in [%lld, %lld]",
                         a->file, key, v, (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return PL_OK;
}

static const char *arg_str(const mg_args *a, const char *key)
{
    const pl_pk *v = pl_pk_get(a->ns, key);
    return v && v->kind == PL_PK_STR ? v->s : NULL;
}

static int arg_true(const mg_args *a, const char *key)
{
    const pl_pk *v = pl_pk_get(a->ns, key);
    return v && (v->kind == PL_PK_BOOL || v->kind == PL_PK_INT) && v->i != 0;
}

/* Settings plait's block cannot run: refused naming the arg. */
static pl_status refuse_args(const mg_args *a)
{
    static const char *const on[] = {"apply_residual_connection_post_layernorm", "rotary_interleaved",
                                     "squared_relu", "apply_layernorm_1p", "qk_layernorm", NULL};
    for (int k = 0; on[k]; k++)
        if (arg_true(a, on[k]))
            return pl_errorf(PL_ERR_ARG, "%s: args.%s is set, which plait's GPT/Llama block does not "
                             "run", a->file, on[k]);
    const char *set[] = {"virtual_pipeline_model_parallel_size", "num_experts", NULL};
    for (int k = 0; set[k]; k++) {
        double v;
        int present;
        pl_status st = arg_num(a, set[k], 0, &v, &present);
        if (st)
            return st;
        if (present && v > 1)
            return pl_errorf(PL_ERR_ARG, "%s: args.%s is %g, which the import does not read "
                             "(model chunks / experts)", a->file, set[k], v);
    }
    return PL_OK;
}

static pl_status read_config(const mg_args *a, const pl_pk *root, pl_model_config *c, int *tp,
                             int *pp)
{
    pl_status st = refuse_args(a);
    if (st)
        return st;
    const pl_pk *cv = pl_pk_get(root, "checkpoint_version");
    const double version = !cv ? 0 : cv->kind == PL_PK_FLOAT ? cv->f
                                 : cv->kind == PL_PK_INT ? (double)cv->i : 0;
    int64_t v[12];
    const char *norm = arg_str(a, "normalization"), *pos = arg_str(a, "position_embedding_type");
    const int rms = norm && strcmp(norm, "RMSNorm") == 0;
    if (norm && !rms && strcmp(norm, "LayerNorm") != 0)
        return pl_errorf(PL_ERR_ARG, "%s: args.normalization %s: plait has LayerNorm and RMSNorm",
                         a->file, norm);
    const int rope = arg_true(a, "use_rotary_position_embeddings") || (pos && !strcmp(pos, "rope"));
    if (pos && strcmp(pos, "rope") && strcmp(pos, "learned_absolute") && strcmp(pos, "none"))
        return pl_errorf(PL_ERR_ARG, "%s: args.position_embedding_type %s is not supported",
                         a->file, pos);
    int64_t mp_old = 1;
    if ((st = arg_int(a, "num_layers", -1, 1, 10000, &v[0])) ||
        (st = arg_int(a, "hidden_size", -1, 1, 1 << 20, &v[1])) ||
        (st = arg_int(a, "num_attention_heads", -1, 1, 1 << 16, &v[2])) ||
        (st = arg_int(a, "ffn_hidden_size", 4 * v[1], 1, 1 << 24, &v[3])) ||
        (st = arg_int(a, "seq_length", 1024, 1, 1 << 24, &v[4])) ||
        (st = arg_int(a, "max_position_embeddings", v[4], 1, 1 << 24, &v[5])) ||
        (st = arg_int(a, "padded_vocab_size", -1, 1, 1 << 25, &v[6])) ||
        (st = arg_int(a, "make_vocab_size_divisible_by", 128, 1, 1 << 20, &v[7])) ||
        (st = arg_int(a, "model_parallel_size", 1, 1, 4096, &mp_old)) ||
        (st = arg_int(a, "tensor_model_parallel_size", mp_old, 1, 4096, &v[8])) ||
        (st = arg_int(a, "pipeline_model_parallel_size", 1, 1, 4096, &v[9])) ||
        (st = arg_int(a, "num_query_groups", v[2], 1, v[2], &v[10])))
        return st;
    if (version < 2)
        return pl_errorf(PL_ERR_ARG, "%s: checkpoint_version %g: the import reads Megatron's "
                         "version 2 and 3 query/key/value layout (checkpoints since 2020)",
                         a->file, version);
    double eps, eps_old, base, percent, factor, std, hd, ad;
    if ((st = arg_num(a, "layernorm_epsilon", 1e-5, &eps_old, NULL)) ||
        (st = arg_num(a, "norm_epsilon", eps_old, &eps, NULL)) ||
        (st = arg_num(a, "rotary_base", 10000, &base, NULL)) ||
        (st = arg_num(a, "rotary_percent", 1.0, &percent, NULL)) ||
        (st = arg_num(a, "rope_scaling_factor", 8.0, &factor, NULL)) ||
        (st = arg_num(a, "init_method_std", 0.02, &std, NULL)) ||
        (st = arg_num(a, "hidden_dropout", 0.1, &hd, NULL)) ||
        (st = arg_num(a, "attention_dropout", 0.1, &ad, NULL)))
        return st;
    const int swiglu = arg_true(a, "swiglu");
    int bias = !arg_true(a, "disable_bias_linear");
    if (pl_pk_get(a->ns, "add_bias_linear"))
        bias = arg_true(a, "add_bias_linear");
    if (!bias && arg_true(a, "add_qkv_bias"))
        return pl_errorf(PL_ERR_ARG, "%s: args.add_qkv_bias without the other biases, which plait's "
                         "block does not run", a->file);
    const int untie = arg_true(a, "untie_embeddings_and_output_weights");
    const int llama = rms && swiglu && rope && !bias && untie;
    memset(c, 0, sizeof *c);
    pl_family_apply(c, llama ? PL_FAMILY_LLAMA : PL_FAMILY_GPT);
    c->block.norm = rms ? PL_NORM_RMSNORM : PL_NORM_LAYERNORM;
    c->block.norm_bias = !rms;
    c->block.act = swiglu ? PL_ACT_SWIGLU : PL_ACT_GELU;
    c->block.pos = rope ? PL_POS_ROPE : pos && !strcmp(pos, "none") ? PL_POS_NONE : PL_POS_LEARNED;
    c->block.bias = bias;
    c->untie = untie;
    c->num_layers = v[0];
    c->hidden = v[1];
    c->heads = v[2];
    c->ffn_hidden = v[3];
    c->seq_length = v[4];
    c->max_positions = v[5];
    c->padded_vocab = c->vocab_size = v[6];
    c->divisible_by = v[7];
    c->query_groups = arg_true(a, "group_query_attention") ? v[10] : v[2];
    c->ln_eps = (float)eps;
    c->init_std = std;
    c->hidden_dropout = (float)hd;
    c->attention_dropout = (float)ad;
    c->rope = (pl_rope_config){base, percent, arg_true(a, "use_rope_scaling"), factor, 1.0, 4.0, 8192};
    *tp = (int)v[8];
    *pp = (int)v[9];
    if (c->hidden % c->heads || c->heads % c->query_groups || c->padded_vocab % (c->divisible_by * *tp))
        return pl_errorf(PL_ERR_FORMAT, "%s: args: hidden_size %lld, num_attention_heads %lld, "
                         "num_query_groups %lld, padded_vocab_size %lld (divisible by %lld x TP %d) "
                         "are inconsistent", a->file, (long long)c->hidden, (long long)c->heads,
                         (long long)c->query_groups, (long long)c->padded_vocab,
                         (long long)c->divisible_by, *tp);
    if (!swiglu && !arg_true(a, "openai_gelu"))
        pl_log_warn("%s: Megatron computed GELU exactly (erf; no args.openai_gelu); plait's GPT "
                    "uses the tanh approximation (Megatron's --openai-gelu), so the imported model's "
                    "activations differ slightly (up to ~5e-4 per GELU)", a->file);
    return PL_OK;
}

/* ---- names ---- */

/* Megatron's legacy layer suffixes -> Megatron core's (plait's). */
static const char *const legacy_suffix[][2] = {
    {"self_attention.query_key_value.", "self_attention.linear_qkv."},
    {"attention.query_key_value.", "self_attention.linear_qkv."},
    {"self_attention.dense.", "self_attention.linear_proj."},
    {"attention.dense.", "self_attention.linear_proj."},
    {"post_attention_layernorm.", "pre_mlp_layernorm."},
    {"mlp.dense_h_to_4h.", "mlp.linear_fc1."},
    {"mlp.dense_4h_to_h.", "mlp.linear_fc2."},
    {"input_layernorm.", "input_layernorm."},
};

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* plait's global name of Megatron's name in (the `model` dict's flattened key) on
 * stage layers [l0, l0 + nl); 0 when unknown. */
static int plait_name(const char *in, int64_t l0, int64_t nl, char *out, size_t n)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", starts(in, "language_model.") ? in + 15 : in);
    if (strcmp(buf, "word_embeddings_for_head.weight") == 0) {
        snprintf(out, n, "output_layer.weight");
        return 1;
    }
    const char *stack = NULL;
    if (starts(buf, "encoder.") || starts(buf, "transformer.") || starts(buf, "decoder."))
        stack = strchr(buf, '.') + 1;
    if (!stack) {
        snprintf(out, n, "%s", buf);
        return 1;
    }
    if (starts(stack, "final_layernorm.") || starts(stack, "final_norm.")) {
        snprintf(out, n, "decoder.final_layernorm.%s", strchr(stack, '.') + 1);
        return 1;
    }
    int layer, used = 0;
    if (sscanf(stack, "layers.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0 || layer >= nl)
        return 0;
    const char *rest = stack + used;
    for (size_t k = 0; k < sizeof legacy_suffix / sizeof *legacy_suffix; k++)
        if (starts(rest, legacy_suffix[k][0])) {
            snprintf(out, n, "decoder.layers.%lld.%s%s", (long long)(layer + l0), legacy_suffix[k][1],
                     rest + strlen(legacy_suffix[k][0]));
            return 1;
        }
    snprintf(out, n, "decoder.layers.%lld.%s", (long long)(layer + l0), rest);
    return 1;
}

/* ---- one rank file ---- */

typedef struct mg_rank {
    const pl_pt *f;
    const pl_model_config *cfg;
    const pl_registry *reg, *g;
    float *global, *tmp;
    int64_t l0, nl;
    unsigned char *seen; /* per reg entry */
} mg_rank;

static pl_status take_tensor(mg_rank *r, const char *key, const pl_pk *t)
{
    char name[600];
    if (!plait_name(key, r->l0, r->nl, name, sizeof name))
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor model.%s: a layer outside this stage's %lld "
                         "layers", r->f->what, key, (long long)r->nl);
    const pl_param *p = pl_registry_find(r->reg, name);
    if (!p || p->offset < 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor model.%s (plait's %s) has no place in the "
                         "model args describe", r->f->what, key, name);
    const int64_t rows = p->local_shape[0], cols = p->local_shape[1];
    if (t->ndim != p->ndim || t->shape[0] != rows || (p->ndim == 2 && t->shape[1] != cols))
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor model.%s is [%lld, %lld]: plait's %s slice "
                         "is [%lld, %lld]", r->f->what, key, (long long)t->shape[0],
                         (long long)(t->ndim > 1 ? t->shape[1] : 0), name, (long long)rows,
                         (long long)(p->ndim == 2 ? cols : 0));
    r->seen[p - r->reg->params] = 1;
    if (p->tied_copy)
        return PL_OK; /* the last stage's copy of the word embeddings */
    pl_status st = pl_pt_tensor_floats(r->f, t, r->tmp, rows * cols);
    if (st)
        return st;
    const pl_param *gp = pl_registry_find(r->g, name);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            r->global[gp->offset + pl_param_global_index(p, i, j)] = r->tmp[i * cols + j];
    return PL_OK;
}

/* The tensors of a (nested) dict, keys joined by '.'. */
static pl_status walk(mg_rank *r, const pl_pk *d, char *prefix, size_t len, int depth)
{
    if (depth > 16)
        return pl_errorf(PL_ERR_FORMAT, "%s: the model dict nests deeper than 16", r->f->what);
    for (int64_t k = 0; k + 1 < d->n; k += 2) {
        const pl_pk *key = d->v[k], *val = d->v[k + 1];
        if (key->kind != PL_PK_STR)
            return pl_errorf(PL_ERR_FORMAT, "%s: a model key that is not a string", r->f->what);
        const int w = snprintf(prefix + len, 512 - len, "%s%s", len ? "." : "", key->s);
        if (w < 0 || (size_t)w >= 512 - len)
            return pl_errorf(PL_ERR_FORMAT, "%s: a model key longer than 512", r->f->what);
        pl_status st = PL_OK;
        if (val->kind == PL_PK_DICT)
            st = walk(r, val, prefix, len + (size_t)w, depth + 1);
        else if (val->kind == PL_PK_TENSOR)
            st = take_tensor(r, prefix, val);
        else if (val->kind != PL_PK_NONE) /* TE's _extra_state may be None */
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.%s is neither a tensor nor a dict", r->f->what,
                           prefix);
        if (st)
            return st;
        prefix[len] = 0;
    }
    return PL_OK;
}

static pl_status read_rank(const char *file, const pl_model_config *cfg, int tp, int pp, int t,
                           int p, const pl_registry *g, float *global)
{
    pl_pt f;
    pl_registry reg;
    pl_registry_init(&reg, tp, t, p);
    mg_rank r = {&f, cfg, &reg, g, global, NULL, 0, 0, NULL};
    pl_status st = pl_pt_open(&f, file);
    if (!st)
        st = pl_model_register(&reg, cfg, pp);
    if (!st)
        st = pl_model_stage_layers(cfg, pp, p, &r.l0, &r.nl);
    int64_t most = 1;
    for (int i = 0; !st && i < reg.n; i++)
        if (reg.params[i].numel > most)
            most = reg.params[i].numel;
    if (!st && (!(r.tmp = pl_malloc((size_t)most * sizeof(float))) ||
                !(r.seen = pl_calloc((size_t)reg.n, 1))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory reading %s", file);
    const pl_pk *model = st ? NULL : pl_pk_get(pl_pt_root(&f), "model");
    if (!st && !model) /* DeepSpeed's engine: the module's state dict */
        model = pl_pk_get(pl_pt_root(&f), "module");
    if (!st && (!model || model->kind != PL_PK_DICT))
        st = pl_errorf(PL_ERR_FORMAT, "%s: no \"model\" dict (%s)", file,
                       pl_pk_get(pl_pt_root(&f), "model0") ? "model0, model1, ...: virtual "
                       "pipeline chunks, which the import does not read" : "not a Megatron "
                       "checkpoint?");
    char prefix[512] = "";
    if (!st)
        st = walk(&r, model, prefix, 0, 0);
    for (int i = 0; !st && i < reg.n; i++)
        if (reg.params[i].offset >= 0 && !r.seen[i])
            st = pl_errorf(PL_ERR_FORMAT, "%s: no tensor for plait's %s (TP rank %d, stage %d)",
                           file, reg.params[i].name, t, p);
    pl_free(r.tmp);
    pl_free(r.seen);
    pl_registry_free(&reg);
    pl_pt_close(&f);
    return st;
}

static void rank_file(const char *idir, int ds, int t, int p, int pp, char *out, size_t n)
{
    if (strlen(idir) + 48 > n)
        snprintf(out, n, "(path too long)");
    else if (ds) /* DeepSpeed's engine: one file per model-parallel rank */
        snprintf(out, n, "%.4000s/mp_rank_%02d_model_states.pt", idir, t);
    else if (pp > 1)
        snprintf(out, n, "%.4000s/mp_rank_%02d_%03d/model_optim_rng.pt", idir, t, p);
    else
        snprintf(out, n, "%.4000s/mp_rank_%02d/model_optim_rng.pt", idir, t);
}

/* The directory of the rank files: DeepSpeed's tag directory (path is one,
 * global_stepN, or path/latest names it: Megatron-DeepSpeed writes both
 * files) or Megatron's iteration directory. */
static pl_status locate(const char *path, char *idir, size_t n, int *ds)
{
    char latest[MG_FILE], dir[MG_PATH], name[32];
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    const char *base = path + len;
    while (base > path && base[-1] != '/')
        base--;
    *ds = strncmp(base, "global_step", 11) == 0;
    if (*ds) {
        snprintf(idir, n, "%.*s", (int)len, path);
        return PL_OK;
    }
    snprintf(latest, sizeof latest, "%.*s/latest", (int)len, path);
    if (pl_file_exists(latest)) {
        char *text = NULL;
        size_t size;
        pl_status st = pl_file_read_all(latest, &text, &size);
        if (st)
            return st;
        size_t k = 0;
        while (k < size && text[k] != '\n' && text[k] != '\r' && text[k] != ' ')
            k++;
        text[k] = 0;
        const int ok = k > 0 && k < 200 && !strchr(text, '/') && strcmp(text, ".") && strcmp(text, "..");
        if (ok)
            snprintf(idir, n, "%.*s/%s", (int)len, path, text);
        pl_free(text);
        if (!ok)
            return pl_errorf(PL_ERR_FORMAT, "%s: expected the name of a checkpoint directory (a "
                             "DeepSpeed tag such as global_step100)", latest);
        *ds = 1;
        return PL_OK;
    }
    int64_t it;
    pl_status st = pl_ckpt_resolve(path, -1, dir, sizeof dir, &it);
    if (st)
        return st;
    if (it == -1)
        return pl_errorf(PL_ERR_ARG, "%s: neither Megatron's latest_checkpointed_iteration.txt nor "
                         "DeepSpeed's latest (name an iter_NNNNNNN, release or global_stepN "
                         "directory)", path);
    pl_ckpt_iter_name(it, name, sizeof name);
    snprintf(idir, n, "%s/%s", dir, name);
    return PL_OK;
}

/* The run's tokenizer, when args names one whose files are here. */
static void tokenizer(const mg_args *a, pl_ckpt_meta *m)
{
    const char *type = arg_str(a, "tokenizer_type");
    const char *files[3] = {arg_str(a, "vocab_file"), arg_str(a, "merge_file"),
                            arg_str(a, "tokenizer_model")};
    if (!type)
        return;
    for (int k = 0; k < 3; k++)
        if (files[k] && !pl_file_exists(files[k])) {
            pl_log_warn("%s: args names tokenizer %s with %s, which is not here: the checkpoint "
                        "names no tokenizer (give --tokenizer-type and its files to plait train)",
                        a->file, type, files[k]);
            return;
        }
    m->tokenizer_type = type;
    m->vocab_file = files[0];
    m->merge_file = files[1];
    m->tokenizer_model = files[2];
}

pl_status pl_megatron_import(const char *path, const char *out, const pl_megatron_import_opts *o)
{
    char idir[MG_PATH + 32], file[MG_FILE];
    int ds = 0;
    pl_status st = locate(path, idir, sizeof idir, &ds);
    if (st)
        return st;
    rank_file(idir, ds, 0, 0, 1, file, sizeof file);
    if (!ds && !pl_file_exists(file))
        rank_file(idir, ds, 0, 0, 2, file, sizeof file);
    pl_pt first;
    pl_registry g;
    pl_registry_init(&g, 1, 0, 0);
    float *global = NULL;
    pl_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    pl_ckpt_meta meta = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .seed = 1234, .dp = 1};
    int tp = 1, pp = 1;
    if ((st = pl_pt_open(&first, file))) {
        pl_pt_close(&first);
        return st;
    }
    mg_args a = {pl_pk_get(pl_pt_root(&first), "args"), file};
    if (!a.ns || a.ns->kind != PL_PK_OBJECT)
        st = pl_errorf(PL_ERR_FORMAT, "%s: no \"args\" (argparse.Namespace): the model's sizes are "
                       "unknown", file);
    if (!st)
        st = read_config(&a, pl_pt_root(&first), &cfg, &tp, &pp);
    if (!st && ds && pp > 1)
        st = pl_errorf(PL_ERR_ARG, "%s: args.pipeline_model_parallel_size %d: DeepSpeed's pipeline "
                       "engine saves layer_NN-model_TT-model_states.pt files, which the import "
                       "does not read", file, pp);
    if (!st)
        tokenizer(&a, &meta);
    if (!st)
        st = pl_model_register(&g, &cfg, 1);
    if (!st && !(global = pl_calloc((size_t)(g.numel > 0 ? g.numel : 1), sizeof(float))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for the model's %lld parameters",
                       (long long)g.numel);
    for (int t = 0; t < tp && !st; t++)
        for (int p = 0; p < pp && !st; p++) {
            rank_file(idir, ds, t, p, pp, file, sizeof file);
            st = read_rank(file, &cfg, tp, pp, t, p, &g, global);
        }
    pl_model_config target = cfg;
    const int out_tp = o->tp > 0 ? o->tp : tp, out_pp = o->pp > 0 ? o->pp : pp;
    if (!st && o->vocab_size > 0) {
        if (o->vocab_size > cfg.padded_vocab)
            st = pl_errorf(PL_ERR_ARG, "--vocab-size %lld exceeds the checkpoint's padded "
                           "vocabulary %lld", (long long)o->vocab_size, (long long)cfg.padded_vocab);
        target.vocab_size = o->vocab_size;
    }
    if (!st)
        target.padded_vocab = pl_model_padded_vocab(target.vocab_size, target.divisible_by, out_tp);
    meta.tp = out_tp;
    meta.pp = out_pp;
    if (!st)
        st = pl_ckpt_import_write(out, &target, &meta, &g, global, out_tp, out_pp);
    if (!st)
        pl_log_info("wrote %s/release: Megatron %s (TP %d x PP %d, %lld layers, vocabulary %lld "
                    "padded to %lld) as TP %d x PP %d", out, pl_family_get(cfg.family)->name, tp, pp,
                    (long long)cfg.num_layers, (long long)target.vocab_size,
                    (long long)target.padded_vocab, out_tp, out_pp);
    pl_free(global);
    pl_registry_free(&g);
    pl_pt_close(&first);
    return st;
}
