/* --use-checkpoint-args: the model's flags from the checkpoint of --load, as
 * Megatron's load_args_from_checkpoint (megatron/training/checkpointing.py)
 * applies a checkpoint's saved args before validating the command line's:
 *
 *   sizes, filled only when the flag was not given (Megatron's _set_arg):
 *     --num-layers, --hidden-size, --ffn-hidden-size, --seq-length,
 *     --num-attention-heads, --max-position-embeddings, and plait's
 *     --make-vocab-size-divisible-by and --norm-epsilon (Megatron saves the
 *     padded vocabulary instead); the tokenizer (--tokenizer-type and its files,
 *     the checkpoint's copies) when --tokenizer-type was not given, else
 *     --vocab-size when neither names a vocabulary;
 *   the architecture, the checkpoint's whatever the command line says
 *     (Megatron's force=True): --model (plait's family; Megatron has one script
 *     per family), --normalization, --position-embedding-type, --swiglu,
 *     --group-query-attention / --num-query-groups, --disable-bias-linear,
 *     --untie-embeddings-and-output-weights, --rotary-base, --rotary-percent,
 *     --use-rope-scaling / --rope-scaling-factor, --bert-no-binary-head,
 *     --apply-residual-connection-post-layernorm; transformers' T5 layer's
 *     --ffn-activation, --relative-attention-num-buckets / -max-distance,
 *     --softmax-scale and --output-layer-input-scale.
 *
 * Each value set is a note (rank 0 prints the notes at start), as Megatron's
 * "Setting num_layers to 2 from checkpoint". Unlike Megatron, the layout
 * (--tensor-model-parallel-size, --pipeline-model-parallel-size) is not taken:
 * any plait checkpoint loads into any layout, so the command line's stands.
 * As Megatron: no --load, or a --load without a checkpoint, leaves the command
 * line's arguments (a note says so). */
#include "train/args.h"

#include "base/alloc.h"
#include "ckpt/tools.h"
#include "model/spec.h"

#include <stdio.h>
#include <string.h>

static pl_status set_value(pl_train_args *a, const char *flag, const char *v)
{
    const char *vals[1] = {v};
    return pl_options_set(&pl_train_cmd, a, flag, vals, 1, a->given);
}

/* A size: the checkpoint's when the flag was not given. */
static pl_status fill_int(pl_train_args *a, const char *flag, int64_t v)
{
    if (pl_train_args_given(a, flag))
        return PL_OK;
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    pl_status st = set_value(a, flag, buf);
    return st ? st : pl_train_args_note(a, "--use-checkpoint-args: %s %s from the checkpoint", flag, buf);
}

/* An architecture value: the checkpoint's, noting when it replaces another. */
static pl_status force_str(pl_train_args *a, const char *flag, const char *cur, const char *v)
{
    if (cur && strcmp(cur, v) == 0)
        return PL_OK;
    pl_status st = set_value(a, flag, v);
    if (!st && cur)
        st = pl_train_args_note(a, "--use-checkpoint-args: %s %s (the checkpoint's) instead of %s",
                                flag, v, cur);
    return st;
}

static pl_status force_num(pl_train_args *a, const char *flag, double cur, double v)
{
    if (cur == v)
        return PL_OK;
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    pl_status st = set_value(a, flag, buf);
    if (!st && pl_train_args_given(a, flag))
        st = pl_train_args_note(a, "--use-checkpoint-args: %s %s (the checkpoint's) instead of "
                                "%.17g", flag, buf, cur);
    return st;
}

/* A feature flag: on when the checkpoint has the feature and its family does not
 * (fam), off otherwise; the flags only add features to a family's defaults. */
static pl_status force_bool(pl_train_args *a, const char *flag, int *field, int v, int fam)
{
    if (!v && fam)
        return pl_errorf(PL_ERR_FORMAT, "--use-checkpoint-args: the checkpoint's model has no %s "
                         "but its --model has it by default, which no flag undoes", flag + 2);
    const int want = v && !fam;
    if (!*field == !want)
        return PL_OK;
    pl_status st = PL_OK;
    if (want) {
        st = pl_options_set(&pl_train_cmd, a, flag, NULL, 0, a->given);
    } else {
        *field = 0;
        a->given[pl_options_index(&pl_train_cmd, flag)] = 0;
    }
    if (!st && want)
        st = pl_train_args_note(a, "--use-checkpoint-args: %s (the checkpoint's)", flag);
    else if (!st)
        st = pl_train_args_note(a, "--use-checkpoint-args: %s dropped (the checkpoint's model %s)",
                                flag, v ? "has it by default" : "does not have it");
    return st;
}

/* Takes the checkpoint's tokenizer; its paths point into a->ckpt_args_strings. */
static pl_status fill_tokenizer(pl_train_args *a, const pl_ckpt_meta *m, const pl_model_config *c)
{
    if (pl_train_args_given(a, "--tokenizer-type"))
        return PL_OK;
    if (!m->tokenizer_type)
        return pl_train_args_given(a, "--vocab-size") ? PL_OK
                                                      : fill_int(a, "--vocab-size", c->vocab_size);
    pl_status st = set_value(a, "--tokenizer-type", m->tokenizer_type);
    const struct {
        const char *flag, *v;
    } files[] = {{"--vocab-file", m->vocab_file}, {"--merge-file", m->merge_file},
                 {"--tokenizer-model", m->tokenizer_model}};
    for (size_t k = 0; k < sizeof files / sizeof *files && !st; k++)
        if (files[k].v && !pl_train_args_given(a, files[k].flag))
            st = set_value(a, files[k].flag, files[k].v);
    if (!st && m->vocab_extra_ids && !pl_train_args_given(a, "--vocab-extra-ids"))
        st = fill_int(a, "--vocab-extra-ids", m->vocab_extra_ids);
    if (!st && m->legacy_tokenizer)
        st = pl_options_set(&pl_train_cmd, a, "--legacy-tokenizer", NULL, 0, a->given);
    if (!st)
        st = pl_train_args_note(a, "--use-checkpoint-args: --tokenizer-type %s from the checkpoint "
                                "(its copy of the files)", m->tokenizer_type);
    return st;
}

static pl_status apply(pl_train_args *a, const pl_model_config *c, const pl_ckpt_meta *m)
{
    static const char *const norms[] = {"LayerNorm", "RMSNorm"};
    static const char *const pos[] = {"learned_absolute", "rope", "none", "relative"};
    static const char *const acts[] = {"gelu", "swiglu", "relu", "geglu"};
    const int gqa = c->query_groups != c->heads;
    const char *family = pl_family_get(c->family)->name;
    pl_status st = PL_OK;
    if (pl_train_args_given(a, "--model"))
        st = force_str(a, "--model", a->model, family);
    else if (!(st = set_value(a, "--model", family)))
        st = pl_train_args_note(a, "--use-checkpoint-args: --model %s from the checkpoint", family);
    const struct {
        const char *flag;
        int64_t v;
    } sizes[] = {{"--num-layers", c->num_layers},
                 {"--hidden-size", c->hidden},
                 {"--ffn-hidden-size", c->ffn_hidden},
                 {"--seq-length", c->seq_length},
                 {"--num-attention-heads", c->heads},
                 {"--max-position-embeddings", c->max_positions},
                 {"--make-vocab-size-divisible-by", c->divisible_by}};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes && !st; k++)
        st = fill_int(a, sizes[k].flag, sizes[k].v);
    if (!st && !pl_train_args_given(a, "--norm-epsilon") &&
        !pl_train_args_given(a, "--layernorm-epsilon") && (float)a->layernorm_epsilon != c->ln_eps) {
        char buf[40];
        snprintf(buf, sizeof buf, "%.9g", (double)c->ln_eps);
        st = set_value(a, "--norm-epsilon", buf);
    }
    if (!st)
        st = force_str(a, "--normalization", a->normalization, norms[c->block.norm]);
    if (!st)
        st = force_str(a, "--position-embedding-type", a->position_embedding_type,
                       pos[c->block.pos]);
    const pl_family_spec *f = pl_family_get(c->family);
    if (!st)
        st = force_bool(a, "--use-rotary-position-embeddings", &a->use_rotary_position_embeddings,
                        0, 0);
    if (!st)
        st = force_bool(a, "--swiglu", &a->swiglu, c->block.act == PL_ACT_SWIGLU,
                        f->block.act == PL_ACT_SWIGLU);
    if (!st)
        st = force_bool(a, "--disable-bias-linear", &a->disable_bias_linear, !c->block.bias,
                        !f->block.bias);
    if (!st)
        st = force_bool(a, "--untie-embeddings-and-output-weights", &a->untie, c->untie, f->untie);
    if (!st)
        st = force_bool(a, "--apply-residual-connection-post-layernorm", &a->res_post_norm,
                        c->block.res_post_norm, 0);
    if (!st)
        st = force_bool(a, "--scale-embedding", &a->scale_embedding, c->scale_embedding, 0);
    if (!st && (c->block.post_norm || a->transformer_block_type))
        st = force_str(a, "--transformer-block-type", a->transformer_block_type,
                       c->block.post_norm ? "post_ln" : "pre_ln");
    if (!st)
        st = force_bool(a, "--group-query-attention", &a->group_query_attention, gqa, 0);
    if (!st && gqa)
        st = force_num(a, "--num-query-groups", (double)a->num_query_groups, (double)c->query_groups);
    if (!st && !gqa && pl_train_args_given(a, "--num-query-groups"))
        a->given[pl_options_index(&pl_train_cmd, "--num-query-groups")] = 0;
    if (!st && c->block.pos == PL_POS_ROPE) {
        st = force_num(a, "--rotary-base", a->rotary_base, c->rope.base);
        if (!st)
            st = force_num(a, "--rotary-percent", a->rotary_percent, c->rope.percent);
        if (!st)
            st = force_bool(a, "--use-rope-scaling", &a->use_rope_scaling, c->rope.scaling, 0);
        if (!st && c->rope.scaling)
            st = force_num(a, "--rope-scaling-factor", a->rope_scaling_factor, c->rope.factor);
    }
    /* transformers' T5 layer (train/t5_args.c) */
    if (!st && (c->block.act == PL_ACT_RELU || c->block.act == PL_ACT_GEGLU))
        st = force_str(a, "--ffn-activation", a->ffn_activation, acts[c->block.act]);
    if (!st && c->block.pos == PL_POS_RELATIVE) {
        st = force_num(a, "--relative-attention-num-buckets", (double)a->rel_buckets,
                       (double)c->rel_buckets);
        if (!st)
            st = force_num(a, "--relative-attention-max-distance", (double)a->rel_max_distance,
                           (double)c->rel_max_distance);
    }
    if (!st && (float)a->softmax_scale != c->softmax_scale)
        st = force_num(a, "--softmax-scale", a->softmax_scale, c->softmax_scale);
    if (!st && c->kv_channels > 0)
        st = force_num(a, "--kv-channels", (double)a->kv_channels, (double)c->kv_channels);
    if (!st && (float)a->output_scale != c->output_scale)
        st = force_num(a, "--output-layer-input-scale", a->output_scale, c->output_scale);
    if (!st && c->family == PL_FAMILY_BERT)
        st = force_bool(a, "--bert-no-binary-head", &a->bert_no_binary_head, !c->head.binary_head,
                        0);
    if (!st)
        st = fill_tokenizer(a, m, c);
    if (!st) /* MegaMolBART's data switches (train/mmb_args.c) */
        st = pl_train_mmb_args_from_meta(a, m);
    return st;
}

pl_status pl_train_args_from_checkpoint(pl_train_args *a)
{
    if (!a->use_checkpoint_args)
        return PL_OK;
    if (!a->load)
        return pl_train_args_note(a, "--use-checkpoint-args without --load: the command line's "
                                  "arguments are used");
    char dir[4096];
    int64_t it;
    const int64_t step = pl_train_args_given(a, "--ckpt-step") ? a->ckpt_step : -1;
    pl_status st = pl_ckpt_resolve(a->load, step, dir, sizeof dir, &it);
    if (st)
        return pl_error_wrap(st, "--use-checkpoint-args");
    if (it == -1)
        return pl_train_args_note(a, "--use-checkpoint-args: no checkpoint in --load %s: the "
                                  "command line's arguments are used", a->load);
    pl_model_config c;
    pl_ckpt_meta m;
    char *strings = NULL;
    st = pl_ckpt_read_config(dir, it, &c, &m, &strings);
    if (st)
        return pl_error_wrap(st, "--use-checkpoint-args");
    pl_free(a->ckpt_args_strings);
    a->ckpt_args_strings = strings; /* the tokenizer paths the flags take point into it */
    return apply(a, &c, &m);
}
