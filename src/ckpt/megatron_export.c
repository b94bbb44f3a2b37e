/* plait checkpoint -> Megatron-LM torch-format checkpoint (plait ckpt export
 * --format megatron; ckpt/megatron.h says what is written and what is not).
 *
 * For each TP rank t and stage p of the layout written, the rank's registry is
 * filled from the checkpoint's global slices (ckpt/source.h: any saved layout)
 * and its tensors are pickled under Megatron core's names, layers numbered from
 * the stage's first (what Megatron's GPTModel state dict holds on that rank),
 * with Megatron's args. The args are checked before anything is written: read
 * back by the import's own reader (pl_mg_config), they must describe the same
 * model, so a setting Megatron's args cannot carry is refused, not dropped. */
#include "ckpt/megatron.h"

#include "ckpt/megatron_internal.h"

#include "base/alloc.h"
#include "base/fileio.h"
#include "base/log.h"
#include "ckpt/files.h"
#include "ckpt/pickle_write.h"
#include "ckpt/source.h"
#include "ckpt/torch_write.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MX_PATH = 4096, MX_MAX_ARGS = 48 };

/* One of Megatron's args: its pickled type (i int, f float, b bool, s str) and value. */
typedef struct mx_arg {
    const char *key;
    char type;
    int64_t i;
    double f;
    const char *s;
} mx_arg;

typedef struct mx_args {
    mx_arg a[MX_MAX_ARGS];
    int n;
} mx_args;

static void add(mx_args *t, const char *key, char type, int64_t i, double f, const char *s)
{
    if (t->n < MX_MAX_ARGS)
        t->a[t->n++] = (mx_arg){key, type, i, f, s};
}

/* Megatron's args for c at tp x pp (arguments.py's names; the import's list in
 * ckpt/megatron.h, plus what check_checkpoint_args compares). */
static void build_args(mx_args *t, const pl_model_config *c, const pl_ckpt_meta *m, int tp, int pp,
                       int64_t iteration, int bf16)
{
    const pl_block_spec *b = &c->block;
    const int rope = b->pos == PL_POS_ROPE;
    t->n = 0;
    add(t, "num_layers", 'i', c->num_layers, 0, NULL);
    add(t, "hidden_size", 'i', c->hidden, 0, NULL);
    add(t, "ffn_hidden_size", 'i', c->ffn_hidden, 0, NULL);
    add(t, "num_attention_heads", 'i', c->heads, 0, NULL);
    add(t, "kv_channels", 'i', pl_model_block_dims(c).HS, 0, NULL);
    add(t, "group_query_attention", 'b', c->query_groups != c->heads, 0, NULL);
    add(t, "num_query_groups", 'i', c->query_groups, 0, NULL);
    add(t, "seq_length", 'i', c->seq_length, 0, NULL);
    add(t, "max_position_embeddings", 'i', c->max_positions, 0, NULL);
    add(t, "padded_vocab_size", 'i', c->padded_vocab, 0, NULL);
    add(t, "make_vocab_size_divisible_by", 'i', c->divisible_by, 0, NULL);
    add(t, "tensor_model_parallel_size", 'i', tp, 0, NULL);
    add(t, "pipeline_model_parallel_size", 'i', pp, 0, NULL);
    add(t, "normalization", 's', 0, 0, b->norm == PL_NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    add(t, "norm_epsilon", 'f', 0, c->ln_eps, NULL);
    add(t, "swiglu", 'b', b->act == PL_ACT_SWIGLU, 0, NULL);
    add(t, "openai_gelu", 'b', b->act == PL_ACT_GELU, 0, NULL); /* plait's GELU is tanh's */
    add(t, "add_bias_linear", 'b', b->bias, 0, NULL);
    add(t, "add_qkv_bias", 'b', b->bias, 0, NULL);
    add(t, "position_embedding_type", 's', 0, 0,
        rope ? "rope" : b->pos == PL_POS_NONE ? "none" : "learned_absolute");
    add(t, "add_position_embedding", 'b', b->pos == PL_POS_LEARNED, 0, NULL);
    add(t, "use_rotary_position_embeddings", 'b', rope, 0, NULL);
    if (c->rope.base == floor(c->rope.base) && fabs(c->rope.base) < 1e15)
        add(t, "rotary_base", 'i', (int64_t)c->rope.base, 0, NULL);
    else
        add(t, "rotary_base", 'f', 0, c->rope.base, NULL);
    add(t, "rotary_percent", 'f', 0, c->rope.percent, NULL);
    add(t, "use_rope_scaling", 'b', c->rope.scaling, 0, NULL);
    add(t, "rope_scaling_factor", 'f', 0, c->rope.factor, NULL);
    add(t, "untie_embeddings_and_output_weights", 'b', c->untie, 0, NULL);
    add(t, "apply_residual_connection_post_layernorm", 'b', b->res_post_norm, 0, NULL);
    add(t, "init_method_std", 'f', 0, c->init_std, NULL);
    add(t, "hidden_dropout", 'f', 0, c->hidden_dropout, NULL);
    add(t, "attention_dropout", 'f', 0, c->attention_dropout, NULL);
    add(t, "bf16", 'b', bf16, 0, NULL);
    add(t, "fp16", 'b', 0, 0, NULL);
    add(t, "ckpt_format", 's', 0, 0, "torch");
    add(t, "iteration", 'i', iteration, 0, NULL);
    add(t, "consumed_train_samples", 'i', m->consumed_train_samples, 0, NULL);
    add(t, "consumed_valid_samples", 'i', m->consumed_valid_samples, 0, NULL);
    add(t, "seed", 'i', (int64_t)m->seed, 0, NULL);
    if (m->tokenizer_type)
        add(t, "tokenizer_type", 's', 0, 0, m->tokenizer_type);
}

/* The import's reading of t must give c back: else a setting is lost. */
static pl_status check_args(const mx_args *t, const pl_model_config *c)
{
    pl_mg_kv kv[MX_MAX_ARGS];
    for (int k = 0; k < t->n; k++) {
        const mx_arg *a = &t->a[k];
        snprintf(kv[k].key, sizeof kv[k].key, "%s", a->key);
        if (a->type == 'i' || a->type == 'b')
            snprintf(kv[k].val, sizeof kv[k].val, "%lld", (long long)a->i);
        else if (a->type == 'f')
            snprintf(kv[k].val, sizeof kv[k].val, "%.17g", a->f);
        else
            snprintf(kv[k].val, sizeof kv[k].val, "%s", a->s);
    }
    pl_mg_args a = {NULL, kv, t->n, "the exported args", 0};
    pl_model_config back;
    int tp, pp;
    pl_status st = pl_mg_config(&a, NULL, &back, &tp, &pp);
    if (st)
        return pl_error_wrap(st, "the checkpoint cannot be written in Megatron core's names");
    const char *lost = NULL;
    if (memcmp(&back.block, &c->block, sizeof c->block))
        lost = "the layer's kind (norm, activation, position embedding, biases, residual)";
    else if (memcmp(&back.head, &c->head, sizeof c->head))
        lost = "the head around the layers";
    else if (back.num_layers != c->num_layers || back.hidden != c->hidden ||
             back.heads != c->heads || back.ffn_hidden != c->ffn_hidden ||
             back.query_groups != c->query_groups || back.max_positions != c->max_positions ||
             back.untie != c->untie || back.ln_eps != c->ln_eps)
        lost = "a size, the norm's epsilon or the output layer's tying";
    else if (c->block.pos == PL_POS_ROPE && memcmp(&back.rope, &c->rope, sizeof c->rope))
        lost = "the rotary embedding's base, fraction or scaling";
    if (lost)
        return pl_errorf(PL_ERR_ARG, "the checkpoint's model has %s that Megatron's GPT args do "
                         "not carry: not exported", lost);
    return PL_OK;
}

static void write_namespace(pl_pkw *w, const mx_args *t)
{
    pl_pkw_namespace_begin(w);
    for (int k = 0; k < t->n; k++) {
        const mx_arg *a = &t->a[k];
        pl_pkw_str(w, a->key);
        if (a->type == 'i')
            pl_pkw_int(w, a->i);
        else if (a->type == 'b')
            pl_pkw_bool(w, (int)a->i);
        else if (a->type == 'f')
            pl_pkw_float(w, a->f);
        else
            pl_pkw_str(w, a->s);
    }
    pl_pkw_namespace_end(w);
}

/* Megatron's name of registry name on a stage whose first layer is l0. */
static void megatron_name(const char *name, int64_t l0, char *out, size_t n)
{
    int layer, used = 0;
    if (sscanf(name, "decoder.layers.%d.%n", &layer, &used) == 1 && used > 0)
        snprintf(out, n, "decoder.layers.%lld.%s", (long long)(layer - l0), name + used);
    else
        snprintf(out, n, "%s", name);
}

typedef struct mx_export {
    pl_ckpt_source *src;
    pl_model_config cfg;
    const pl_ckpt_meta *meta;
    const mx_args *args;
    int tp, pp, bf16;
    int64_t iteration;
} mx_export;

/* Rank (t, p)'s file under idir. */
static pl_status write_rank(const mx_export *e, const char *idir, int t, int p)
{
    char dir[MX_PATH + 64], path[MX_PATH + 128];
    if (e->pp > 1)
        snprintf(dir, sizeof dir, "%.4000s/mp_rank_%02d_%03d", idir, t, p);
    else
        snprintf(dir, sizeof dir, "%.4000s/mp_rank_%02d", idir, t);
    snprintf(path, sizeof path, "%s/model_optim_rng.pt", dir);
    pl_registry reg;
    pl_registry_init(&reg, e->tp, t, p);
    pl_pkw w;
    pl_pkw_init(&w);
    float *params = NULL;
    uint16_t *half = NULL;
    pl_pt_blob *blobs = NULL;
    char (*keys)[16] = NULL;
    int64_t l0 = 0, nl = 0;
    pl_status st = pl_model_register(&reg, &e->cfg, e->pp);
    if (!st)
        st = pl_model_stage_layers(&e->cfg, e->pp, p, &l0, &nl);
    const size_t count = (size_t)(reg.numel > 0 ? reg.numel : 1);
    if (!st && (!(params = pl_malloc(count * sizeof *params)) ||
                (e->bf16 && !(half = pl_malloc(count * sizeof *half))) ||
                !(blobs = pl_calloc((size_t)reg.n + 1, sizeof *blobs)) ||
                !(keys = pl_calloc((size_t)reg.n + 1, sizeof *keys))))
        st = pl_errorf(PL_ERR_NOMEM, "out of memory for %s's %lld parameters", path,
                       (long long)reg.numel);
    if (!st)
        st = pl_ckpt_source_fill(e->src, &reg, PL_CKPT_PARAMS, params, 0, reg.numel);
    if (!st)
        st = pl_mkdirs(dir);
    if (st)
        goto done;
    pl_pkw_dict_begin(&w, 0);
    pl_pkw_str(&w, "args");
    write_namespace(&w, e->args);
    pl_pkw_str(&w, "checkpoint_version");
    pl_pkw_float(&w, 3.0);
    pl_pkw_str(&w, "iteration");
    pl_pkw_int(&w, e->iteration);
    pl_pkw_str(&w, "model");
    pl_pkw_dict_begin(&w, 1);
    int nb = 0;
    for (int i = 0; i < reg.n; i++) {
        const pl_param *q = &reg.params[i];
        if (q->offset < 0)
            continue;
        char name[PL_PARAM_NAME_MAX + 32];
        megatron_name(q->name, l0, name, sizeof name);
        snprintf(keys[nb], sizeof keys[nb], "%d", nb);
        const int64_t shape[2] = {q->local_shape[0], q->local_shape[1]};
        pl_pkw_str(&w, name);
        pl_pkw_tensor(&w, e->bf16 ? "BF16" : "F32", keys[nb], q->ndim, shape);
        if (e->bf16) {
            for (int64_t k = 0; k < q->numel; k++)
                half[q->offset + k] = pl_ref_bf16_from_f32(params[q->offset + k]);
            blobs[nb] = (pl_pt_blob){keys[nb], half + q->offset, (uint64_t)q->numel * 2};
        } else {
            blobs[nb] = (pl_pt_blob){keys[nb], params + q->offset, (uint64_t)q->numel * 4};
        }
        nb++;
    }
    pl_pkw_dict_end(&w);
    pl_pkw_dict_end(&w);
    const uint8_t *pkl;
    size_t pkl_size;
    if (!(st = pl_pkw_finish(&w, &pkl, &pkl_size)))
        st = pl_pt_write(path, "model_optim_rng", pkl, pkl_size, blobs, nb);
done:
    pl_pkw_free(&w);
    pl_free(params);
    pl_free(half);
    pl_free(blobs);
    pl_free(keys);
    pl_registry_free(&reg);
    return st;
}

/* Whether OUT's latest_checkpointed_iteration.txt names a plait checkpoint (an
 * iteration directory with a manifest), which replacing the file would orphan. */
static int plait_save_dir(const char *out)
{
    char path[MX_PATH + 64], *text = NULL;
    size_t size = 0;
    snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", out);
    if (!pl_file_exists(path) || pl_file_read_all(path, &text, &size) != PL_OK)
        return 0;
    while (size > 0 && (text[size - 1] == '\n' || text[size - 1] == '\r' || text[size - 1] == ' '))
        text[--size] = 0;
    char *end = NULL;
    const long long it = strtoll(text, &end, 10);
    if (!strcmp(text, "release"))
        snprintf(path, sizeof path, "%s/release/manifest.json", out);
    else if (size > 0 && end && !*end && it >= 0)
        snprintf(path, sizeof path, "%s/iter_%07lld/manifest.json", out, it);
    else
        path[0] = 0;
    pl_free(text);
    return path[0] && pl_file_exists(path);
}

/* OUT/NAME.tmp made (a stale one removed), OUT/NAME refused if present, and so is
 * a plait save directory as OUT. */
static pl_status out_begin(const char *out, const char *name, char *tmp, size_t n)
{
    char final[MX_PATH + 32];
    struct stat sb;
    if (strlen(out) > MX_PATH - 64)
        return pl_errorf(PL_ERR_ARG, "--out %.64s...: a path longer than %d", out, MX_PATH - 64);
    if (plait_save_dir(out))
        return pl_errorf(PL_ERR_ARG, "--out %s holds a plait checkpoint (its "
                         "latest_checkpointed_iteration.txt names one): the export would point "
                         "that file at a Megatron checkpoint; give another directory", out);
    snprintf(final, sizeof final, "%s/%s", out, name);
    if (stat(final, &sb) == 0)
        return pl_errorf(PL_ERR_ARG, "%s exists: plait ckpt export never overwrites a Megatron "
                         "iteration (give another --out, or remove it)", final);
    snprintf(tmp, n, "%s/%s.tmp", out, name);
    pl_status st = pl_mkdirs(out);
    if (!st)
        st = pl_rmtree(tmp);
    return st ? st : pl_mkdirs(tmp);
}

pl_status pl_megatron_export(const char *dir, int64_t it, const char *out,
                             const pl_megatron_export_opts *o)
{
    mx_export e;
    mx_args args;
    memset(&e, 0, sizeof e);
    pl_status st = pl_ckpt_source_open(dir, it, &e.src);
    if (st)
        return st;
    e.cfg = *pl_ckpt_source_config(e.src);
    e.meta = pl_ckpt_source_meta(e.src);
    e.tp = o->tp > 0 ? o->tp : e.meta->tp;
    e.pp = o->pp > 0 ? o->pp : e.meta->pp;
    e.bf16 = o->bf16;
    const int release = o->release || it == PL_CKPT_RELEASE;
    e.iteration = release ? 0 : it;
    e.args = &args;
    char name[32], tmp[MX_PATH + 64], final[MX_PATH + 32], latest[MX_PATH + 64];
    int made = 0;
    if (e.cfg.family != PL_FAMILY_GPT && e.cfg.family != PL_FAMILY_LLAMA)
        st = pl_errorf(PL_ERR_ARG, "%s: a %s model: the Megatron export writes GPT and Llama "
                       "models", dir, e.cfg.family == PL_FAMILY_BERT ? "BERT" : "T5 / BART");
    else if (e.cfg.block.pos == PL_POS_RELATIVE || e.cfg.block.act == PL_ACT_RELU ||
             e.cfg.block.act == PL_ACT_GEGLU || e.cfg.softmax_scale > 0 || e.cfg.output_scale > 0)
        st = pl_errorf(PL_ERR_ARG, "%s: transformers' T5 layer (relative positions, ReLU or GEGLU, "
                       "--softmax-scale, --output-layer-input-scale) has no GPT args in this "
                       "export", dir);
    else if (e.tp < 1 || e.pp < 1 || e.cfg.num_layers % e.pp)
        st = pl_errorf(PL_ERR_ARG, "TP %d x PP %d: expected sizes >= 1 and PP dividing the %lld "
                       "layers (Megatron's args hold no uneven split)", e.tp, e.pp,
                       (long long)e.cfg.num_layers);
    else if (e.cfg.query_groups % e.tp)
        st = pl_errorf(PL_ERR_ARG, "TP %d does not divide the model's %lld query groups: Megatron "
                       "core splits them over TP (num_query_groups / TP per rank; plait's sharing "
                       "of a group's key and value across ranks has no Megatron layout)", e.tp,
                       (long long)e.cfg.query_groups);
    if (!st) {
        e.cfg.pp_chunks = 0;
        e.cfg.pp_first_layers = e.cfg.pp_last_layers = 0;
        e.cfg.padded_vocab = pl_model_padded_vocab(e.cfg.vocab_size, e.cfg.divisible_by, e.tp);
        build_args(&args, &e.cfg, e.meta, e.tp, e.pp, e.iteration, e.bf16);
        st = check_args(&args, &e.cfg);
    }
    pl_ckpt_iter_name(release ? PL_CKPT_RELEASE : it, name, sizeof name);
    if (!st && !(st = out_begin(out, name, tmp, sizeof tmp)))
        made = 1;
    for (int t = 0; t < e.tp && !st; t++)
        for (int p = 0; p < e.pp && !st; p++)
            st = write_rank(&e, tmp, t, p);
    snprintf(final, sizeof final, "%s/%s", out, name);
    if (!st)
        st = pl_fsync_dir(tmp);
    if (!st && rename(tmp, final) != 0)
        st = pl_errorf(PL_ERR_IO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
    if (!st) {
        made = 0;
        char text[32];
        if (release)
            snprintf(text, sizeof text, "release");
        else
            snprintf(text, sizeof text, "%lld", (long long)it);
        snprintf(latest, sizeof latest, "%s/latest_checkpointed_iteration.txt", out);
        st = pl_file_write_atomic(latest, text, strlen(text));
    }
    if (!st)
        st = pl_fsync_dir(out);
    if (!st)
        pl_log_info("wrote %s: Megatron core names, TP %d x PP %d, %s, iteration %lld; no "
                    "optimizer, RNG or scheduler state (%s)", final, e.tp, e.pp,
                    e.bf16 ? "bf16" : "fp32", (long long)e.iteration,
                    release ? "a release: Megatron loads none of them" :
                    "load with --no-load-optim --no-load-rng, or --finetune");
    if (made)
        pl_rmtree(tmp); /* a failed export leaves nothing behind */
    pl_ckpt_source_close(e.src);
    return st;
}
