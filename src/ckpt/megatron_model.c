/* Megatron-LM checkpoints' model: its config from args and its tensors from
 * state dicts, shared by the Megatron / DeepSpeed import (megatron.c) and the
 * NeMo import (nemo.c); ckpt/megatron.h says what is read and refused. */
#include "ckpt/megatron_internal.h"

#include "base/alloc.h"
#include "base/log.h"
#include "model/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- args (argparse.Namespace) ---- */


/* The kv table's value of key, or NULL. */
static const char *kv_get(const pl_mg_args *a, const char *key)
{
    for (int k = 0; k < a->nkv; k++)
        if (strcmp(a->kv[k].key, key) == 0)
            return a->kv[k].val;
    return NULL;
}

static pl_status arg_num(const pl_mg_args *a, const char *key, double def, double *out, int *present)
{
    if (!a->ns) {
        const char *s = kv_get(a, key);
        char *end;
        const int absent = !s || !*s || !strcmp(s, "null") || !strcmp(s, "~") || !strcmp(s, "None");
        if (present)
            *present = !absent;
        if (absent) {
            *out = def;
            return PL_OK;
        }
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "false") || !strcmp(s, "False")) {
            *out = s[0] == 't' || s[0] == 'T';
            return PL_OK;
        }
        *out = strtod(s, &end);
        if (*end)
            return pl_errorf(PL_ERR_FORMAT, "%s: %s is %s: expected a number", a->file, key, s);
        return PL_OK;
    }
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

static pl_status arg_int(const pl_mg_args *a, const char *key, int64_t def, int64_t lo, int64_t hi,
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

const char *pl_mg_arg_str(const pl_mg_args *a, const char *key)
{
    if (!a->ns)
        return kv_get(a, key);
    const pl_pk *v = pl_pk_get(a->ns, key);
    return v && v->kind == PL_PK_STR ? v->s : NULL;
}

static int arg_true(const pl_mg_args *a, const char *key)
{
    if (!a->ns) {
        double v = 0;
        int present = 0;
        return !arg_num(a, key, 0, &v, &present) && present && v != 0;
    }
    const pl_pk *v = pl_pk_get(a->ns, key);
    return v && (v->kind == PL_PK_BOOL || v->kind == PL_PK_INT) && v->i != 0;
}

static int has_arg(const pl_mg_args *a, const char *key)
{
    return a->ns ? pl_pk_get(a->ns, key) != NULL : kv_get(a, key) != NULL;
}

/* Whether a rank file's model is Megatron's legacy model (its state dict's keys, one
 * level: "language_model", or legacy layer names in flat keys), not Megatron core's. */
static int legacy_model(const pl_pk *root)
{
    const pl_pk *m = root ? pl_pk_get(root, "model") : NULL;
    if (!m)
        m = root ? pl_pk_get(root, "module") : NULL;
    for (int64_t k = 0; m && m->kind == PL_PK_DICT && k + 1 < m->n; k += 2) {
        const pl_pk *key = m->v[k];
        if (key->kind == PL_PK_STR && (strstr(key->s, "language_model") ||
                                       strstr(key->s, "query_key_value")))
            return 1;
    }
    return 0;
}

/* args.apply_residual_connection_post_layernorm: Megatron's legacy
 * ParallelTransformerLayer reads it; Megatron core's TransformerLayer read it until
 * its spec-based rewrite (cff83981f1, August 2023) and ignores it since, so which
 * layer a core checkpoint with it was trained with is unknown: refused. */
static pl_status residual_post_norm(const pl_mg_args *a, const pl_pk *root, int *out)
{
    *out = arg_true(a, "apply_residual_connection_post_layernorm");
    if (*out && !legacy_model(root))
        return pl_errorf(PL_ERR_ARG, "%s: args.apply_residual_connection_post_layernorm is set on "
                         "a Megatron core model, whose TransformerLayer ignores it since August "
                         "2023 (and read it before): which layer it ran is unknown, so it is not "
                         "imported (a legacy model's is)", a->file);
    return PL_OK;
}

/* Settings plait's block cannot run: refused naming the arg. */
static pl_status refuse_args(const pl_mg_args *a)
{
    static const char *const on[] = {"rotary_interleaved", "squared_relu", "apply_layernorm_1p",
                                     "qk_layernorm", NULL};
    for (int k = 0; on[k]; k++)
        if (arg_true(a, on[k]))
            return pl_errorf(PL_ERR_ARG, "%s: args.%s is set, which plait's GPT/Llama block does not "
                             "run", a->file, on[k]);
    const char *set[] = {"virtual_pipeline_model_parallel_size", "num_experts", NULL};
    for (int k = a->global_keys ? 1 : 0; set[k]; k++) {
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

pl_status pl_mg_config(const pl_mg_args *a, const pl_pk *root, pl_model_config *c, int *tp,
                       int *pp)
{
    pl_status st = refuse_args(a);
    if (st)
        return st;
    const pl_pk *cv = root ? pl_pk_get(root, "checkpoint_version") : NULL;
    const double version = !root ? 3 : !cv ? 0 : cv->kind == PL_PK_FLOAT ? cv->f
                                   : cv->kind == PL_PK_INT ? (double)cv->i : 0;
    int64_t v[12];
    const char *norm = pl_mg_arg_str(a, "normalization"), *pos = pl_mg_arg_str(a, "position_embedding_type");
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
    if (has_arg(a, "add_bias_linear"))
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
    if ((st = residual_post_norm(a, root, &c->block.res_post_norm)))
        return st;
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

/* Megatron-DeepSpeed since 676a482c ("Adding the new feature of FPDT", 2024-12-04; its args
 * carry ds_sequence_parallel_fpdt from then on) splits a rank's query_key_value output into
 * [Q; K; V] thirds (ParallelAttention.forward), not Megatron's per-head [q; k; v]: such
 * files are read by thirds; with key/value groups the thirds are not Q, K and V, so those
 * are refused. */
pl_status pl_mg_qkv_blocks(const pl_mg_args *a, const pl_model_config *c, int *blocks)
{
    *blocks = has_arg(a, "ds_sequence_parallel_fpdt");
    if (*blocks && c->query_groups != c->heads)
        return pl_errorf(PL_ERR_ARG, "%s: args.ds_sequence_parallel_fpdt is present (Megatron-"
                         "DeepSpeed since December 2024, whose attention splits query_key_value "
                         "into thirds) with %lld key/value groups for %lld heads: those thirds are "
                         "not the queries, keys and values, so the model is not imported", a->file,
                         (long long)c->query_groups, (long long)c->heads);
    return PL_OK;
}

/* ---- names ---- */

/* Megatron's legacy layer suffixes -> Megatron core's (plait's). */
static const char *const legacy_suffix[][2] = {
    /* Transformer Engine's norms fused into the next linear layer */
    {"self_attention.linear_qkv.layer_norm_", "input_layernorm."},
    {"mlp.linear_fc1.layer_norm_", "pre_mlp_layernorm."},
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
int pl_mg_plait_name(const char *in, int64_t l0, int64_t nl, char *out, size_t n)
{
    char buf[512];
    while (starts(in, "model.") || starts(in, "module.")) /* NeMo's wrapper, Float16Module */
        in = strchr(in, '.') + 1;
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

typedef pl_mg_rank mg_rank;

pl_status pl_mg_rank_tensor(pl_mg_rank *r, const pl_pt *f, const char *key, const pl_pk *t)
{
    char name[600];
    const char *shown = key + r->hide;
    r->f = f;
    if (!pl_mg_plait_name(key, r->l0, r->nl, name, sizeof name))
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s%s: a layer outside this stage's %lld "
                         "layers", f->what, r->label, shown, (long long)r->nl);
    const pl_param *p = pl_registry_find(&r->reg, name);
    if (!p || p->offset < 0)
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s%s (plait's %s) has no place in the "
                         "model args describe", f->what, r->label, shown, name);
    const int64_t rows = p->local_shape[0], cols = p->local_shape[1];
    if (t->ndim != p->ndim || t->shape[0] != rows || (p->ndim == 2 && t->shape[1] != cols))
        return pl_errorf(PL_ERR_FORMAT, "%s: tensor %s%s is [%lld, %lld]: plait's %s slice "
                         "is [%lld, %lld]", f->what, r->label, shown, (long long)t->shape[0],
                         (long long)(t->ndim > 1 ? t->shape[1] : 0), name, (long long)rows,
                         (long long)(p->ndim == 2 ? cols : 0));
    r->seen[p - r->reg.params] = 1;
    if (p->tied_copy)
        return PL_OK; /* the last stage's copy of the word embeddings */
    pl_status st = pl_pt_tensor_floats(r->f, t, r->tmp, rows * cols);
    if (st)
        return st;
    const pl_param *gp = pl_registry_find(r->g, name);
    const char *last = strstr(name, ".linear_qkv.");
    const int blocks = r->qkv_blocks && last && (!strcmp(last, ".linear_qkv.weight") ||
                                                 !strcmp(last, ".linear_qkv.bias"));
    const int64_t hn = r->cfg->hidden / r->cfg->heads, nh = rows / (3 * hn);
    for (int64_t i = 0; i < rows; i++) {
        /* Megatron's row i (head i / 3hn's part (i / hn) % 3) from [Q; K; V] thirds */
        const int64_t src = blocks ? (i / hn) % 3 * nh * hn + i / (3 * hn) * hn + i % hn : i;
        for (int64_t j = 0; j < cols; j++)
            r->global[gp->offset + pl_param_global_index(p, i, j)] = r->tmp[src * cols + j];
    }
    return PL_OK;
}

/* The tensors of a (nested) dict, keys joined by '.'. */
static pl_status walk(mg_rank *r, const pl_pk *d, char *prefix, size_t len, int depth,
                      uint64_t stamp)
{
    if (depth > 16)
        return pl_errorf(PL_ERR_FORMAT, "%s: the model dict nests deeper than 16", r->f->what);
    if (pl_pk_enter(d, stamp) != 1) /* shared with another key: its tensors are placed once */
        return pl_errorf(PL_ERR_FORMAT, "%s: model.%s is a dict seen under another key (a "
                         "shared or cyclic structure)", r->f->what, prefix);
    for (int64_t k = 0; k + 1 < d->n; k += 2) {
        const pl_pk *key = d->v[k], *val = d->v[k + 1];
        if (key->kind != PL_PK_STR)
            return pl_errorf(PL_ERR_FORMAT, "%s: a model key that is not a string", r->f->what);
        const int w = snprintf(prefix + len, 512 - len, "%s%s", len ? "." : "", key->s);
        if (w < 0 || (size_t)w >= 512 - len)
            return pl_errorf(PL_ERR_FORMAT, "%s: a model key longer than 512", r->f->what);
        pl_status st = PL_OK;
        const size_t end = len + (size_t)w;
        if (val->kind == PL_PK_NONE || (end >= 12 && !strcmp(prefix + end - 12, "_extra_state")))
            st = PL_OK; /* Transformer Engine's _extra_state (None, a tensor or opaque bytes) */
        else if (val->kind == PL_PK_DICT)
            st = walk(r, val, prefix, end, depth + 1, stamp);
        else if (val->kind == PL_PK_TENSOR)
            st = pl_mg_rank_tensor(r, r->f, prefix, val);
        else
            st = pl_errorf(PL_ERR_FORMAT, "%s: model.%s is neither a tensor nor a dict", r->f->what,
                           prefix);
        if (st)
            return st;
        prefix[len] = 0;
    }
    pl_pk_leave(d, stamp);
    return PL_OK;
}

pl_status pl_mg_rank_begin(pl_mg_rank *r, const pl_model_config *cfg, int tp, int pp, int t,
                           int p, const pl_registry *g, float *global)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->g = g;
    r->global = global;
    r->label = "model.";
    r->t = t;
    r->p = p;
    pl_registry_init(&r->reg, tp, t, p);
    pl_status st = pl_model_register(&r->reg, cfg, pp);
    if (!st)
        st = pl_model_stage_layers(cfg, pp, p, &r->l0, &r->nl);
    int64_t most = 1;
    for (int i = 0; !st && i < r->reg.n; i++)
        if (r->reg.params[i].numel > most)
            most = r->reg.params[i].numel;
    if (!st && (!(r->tmp = pl_malloc((size_t)most * sizeof(float))) ||
                !(r->seen = pl_calloc((size_t)r->reg.n, 1))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for TP rank %d, stage %d's tensors", t, p);
    if (st)
        pl_mg_rank_end(r, NULL, st);
    return st;
}

pl_status pl_mg_rank_end(pl_mg_rank *r, const char *what, pl_status st)
{
    for (int i = 0; !st && i < r->reg.n; i++)
        if (r->reg.params[i].offset >= 0 && !r->seen[i])
            st = pl_errorf(PL_ERR_FORMAT, "%s: no tensor for plait's %s (TP rank %d, stage %d)",
                           what, r->reg.params[i].name, r->t, r->p);
    pl_free(r->tmp);
    pl_free(r->seen);
    r->tmp = NULL;
    r->seen = NULL;
    pl_registry_free(&r->reg);
    return st;
}

pl_status pl_mg_take_rank(const pl_pt *f, const pl_pk *model, const pl_model_config *cfg, int tp,
                          int pp, int t, int p, const pl_registry *g, float *global, int qkv_blocks)
{
    pl_mg_rank r;
    pl_status st = pl_mg_rank_begin(&r, cfg, tp, pp, t, p, g, global);
    if (st)
        return st;
    r.qkv_blocks = qkv_blocks;
    char prefix[512] = "";
    r.f = f;
    st = walk(&r, model, prefix, 0, 0, pl_pickle_stamp(f->pk));
    return pl_mg_rank_end(&r, f->what, st);
}
