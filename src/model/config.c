/* The parameter table of a model, from its configuration. */
#include "model/config.h"

#include "base/rng.h"
#include "model/spec.h"
#include "base/status.h"

#include <math.h>
#include <string.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int64_t pl_model_padded_vocab(int64_t vocab_size, int64_t divisible_by, int64_t tp)
{
    int64_t m = divisible_by * tp;
    return (vocab_size + m - 1) / m * m;
}

void pl_model_set_task(pl_model_config *c, pl_task task, int64_t classes)
{
    pl_head_spec *h = &c->head;
    h->task = task;
    h->classes = task == PL_TASK_SPAN ? 2 : task == PL_TASK_REGRESSION ? 1 : classes;
    if (task != PL_TASK_NONE)
        h->lm_head = h->lm_transform = h->output_bias = h->binary_head = 0;
}

pl_head_set pl_model_head_set(const pl_model_config *c)
{
    const pl_head_spec *h = &c->head;
    pl_head_set s = {h->lm_transform, 0, 0, h->task == PL_TASK_SPAN, 0, 0};
    s.pooled = h->binary_head ? 2 : PL_TASK_POOLED(h->task) ? h->classes : 0;
    s.regression = h->task == PL_TASK_REGRESSION;
    s.token = h->task == PL_TASK_TOKEN || h->task == PL_TASK_SPAN ? h->classes : 0;
    s.drop = h->task != PL_TASK_NONE && c->head_dropout > 0;
    return s;
}

const char *pl_model_stack(const pl_model_config *c)
{
    if (c->part != PL_PART_WHOLE)
        return c->part == PL_PART_ENCODER ? "encoder" : "decoder";
    return pl_family_get(c->family)->stack;
}

const char *pl_model_output_bias_name(const pl_model_config *c)
{
    return pl_model_is_encdec(c) ? "lm_head.output_layer.bias" : "output_layer.bias";
}

void pl_model_encdec_output_bias(pl_model_config *c)
{
    if (pl_model_is_encdec(c) && c->head.lm_head && (c->untie || c->output_scale > 0))
        c->head.output_bias = 0;
}

int pl_model_post_ln(const pl_model_config *c)
{
    return c->block.post_norm && (!pl_model_is_encdec(c) || c->part != PL_PART_WHOLE);
}

const char *pl_model_position_name(const pl_model_config *c)
{
    return c->part == PL_PART_DECODER && c->block.post_norm
               ? "decoder_embedding.position_embeddings.weight"
               : "embedding.position_embeddings.weight";
}

int pl_model_is_encdec(const pl_model_config *c)
{
    return c->family == PL_FAMILY_T5 || c->family == PL_FAMILY_BART;
}

void pl_model_encdec_parts(const pl_model_config *c, pl_model_config *enc, pl_model_config *dec)
{
    *enc = *c;
    enc->part = PL_PART_ENCODER;
    enc->head = (pl_head_spec){0};
    *dec = *c;
    dec->part = PL_PART_DECODER;
    dec->num_layers = c->dec_layers;
    dec->seq_length = c->dec_seq_length;
    dec->block.mask = PL_MASK_CAUSAL;
    dec->block.cross_attention = 1;
    dec->cross_length = c->seq_length;
    /* Each stack checkpoints its own layers with the one --recompute-num-layers, as
     * Megatron's T5 gives both TransformerBlocks one config: a stack with fewer
     * layers recomputes all of them (block) or as one group (uniform). */
    pl_model_config *part[2] = {enc, dec};
    for (int k = 0; k < 2; k++)
        if (part[k]->recompute.num_layers > part[k]->num_layers)
            part[k]->recompute.num_layers = part[k]->num_layers;
}

int pl_model_encdec_stage_stack(const pl_model_config *c, int pp_size, int stage, int *s0,
                                int *ns)
{
    const int S = (int)c->pp_split;
    const int dec = stage >= S;
    *s0 = dec ? S : 0;
    *ns = dec ? pp_size - S : S;
    return dec;
}

/* The decoder's first stage's copies of the embeddings (a pipelined encoder-decoder),
 * and the last stage's output layer, each tied to its original. */
static const char *const tied_names[][2] = {
    {"output_layer.weight", "embedding.word_embeddings.weight"},
    {"decoder_embedding.word_embeddings.weight", "embedding.word_embeddings.weight"},
    {"decoder_embedding.position_embeddings.weight", "embedding.position_embeddings.weight"},
};

/* A pipelined encoder-decoder's later stages of a stack hold copies of its relative
 * position bias table: "<stack>_relative_pos_emb.stage<N>.relative_attention_bias.weight". */
static const char *const relpos_names[] = {"encoder_relative_pos_emb.relative_attention_bias.weight",
                                           "decoder_relative_pos_emb.relative_attention_bias.weight"};
enum { RELPOS_STACK = 24 /* strlen("encoder_relative_pos_emb") */ };

static void relpos_copy_name(int dec, int stage, char *name, size_t n)
{
    snprintf(name, n, "%s_relative_pos_emb.stage%d.relative_attention_bias.weight",
             dec ? "decoder" : "encoder", stage);
}

const char *pl_model_tied_original(const char *copy)
{
    for (size_t i = 0; i < sizeof tied_names / sizeof *tied_names; i++)
        if (strcmp(copy, tied_names[i][0]) == 0)
            return tied_names[i][1];
    for (int k = 0; k < 2; k++) {
        int stage, used = 0;
        const char *o = relpos_names[k];
        if (strncmp(copy, o, RELPOS_STACK) == 0 &&
            sscanf(copy + RELPOS_STACK, ".stage%d%n", &stage, &used) == 1 && used > 0 &&
            stage > 0 && strcmp(copy + RELPOS_STACK + used, o + RELPOS_STACK) == 0)
            return o;
    }
    return NULL;
}

void pl_model_relpos_name(const pl_model_config *c, char *name, size_t n)
{
    snprintf(name, n, "%s_relative_pos_emb.relative_attention_bias.weight", pl_model_stack(c));
}

/* The relative position bias tables (buckets, NH), whole on every TP rank as
 * Megatron core's RelativePositionEmbedding (an nn.Embedding) holds them, with
 * the embeddings: their gradients are final when the backward ends. Pipelined
 * (t5, bart with a split rank S), each stack's table is on its first stage (0,
 * S) and tied copies on the stack's later stages, drawn alike, their gradients
 * summed over the stack's stages (train/encdec_pipe.c). */
static pl_status register_relpos(pl_registry *r, const pl_model_config *c, int pp_size)
{
    pl_status st = PL_OK;
    if (c->block.pos != PL_POS_RELATIVE)
        return PL_OK;
    const int whole_encdec = pl_model_is_encdec(c) && c->part == PL_PART_WHOLE;
    if (pp_size > 1 && !whole_encdec)
        return pl_errorf(PL_ERR_UNSUPPORTED, "--position-embedding-type relative with "
                         "--pipeline-model-parallel-size %d: pipelined only in an "
                         "encoder-decoder (--model t5 with --pipeline-model-parallel-split-rank)",
                         pp_size);
    if (c->rel_buckets < 2 || c->rel_max_distance <= c->rel_buckets / 4)
        return pl_errorf(PL_ERR_ARG, "--relative-attention-num-buckets %lld must be at least 2 "
                         "and --relative-attention-max-distance %lld above a quarter of it (the "
                         "bucket rule's exact range)", (long long)c->rel_buckets,
                         (long long)c->rel_max_distance);
    pl_model_config part[2] = {*c, *c};
    int n = 1;
    if (whole_encdec)
        pl_model_encdec_parts(c, &part[0], &part[1]), n = 2;
    for (int k = 0; k < n; k++) {
        char name[PL_PARAM_NAME_MAX], copy[PL_PARAM_NAME_MAX];
        pl_model_relpos_name(&part[k], name, sizeof name);
        int s0 = 0, ns = 1; /* the stack's stages */
        if (pp_size > 1 && c->pp_split >= 1 && c->pp_split < pp_size) /* else refused below */
            pl_model_encdec_stage_stack(c, pp_size, k ? (int)c->pp_split : 0, &s0, &ns);
        for (int s = s0; s < s0 + ns; s++) {
            if (s > s0)
                relpos_copy_name(k, s, copy, sizeof copy);
            pl_param_spec t = {s > s0 ? copy : name, 2, {c->rel_buckets, c->heads},
                               PL_TP_REPLICATED, s, -1, 1, PL_INIT_NORMAL, (float)c->init_std, 0,
                               0};
            PL_TRY(pl_registry_add(r, &t));
            if (s > s0) {
                pl_param *p = &r->params[r->n - 1];
                p->init_stream = pl_hash_str(name);
                p->tied_copy = 1;
            }
        }
    }
fail:
    return st;
}

const pl_param *pl_model_final_norm(const pl_registry *r, const pl_model_config *c)
{
    char name[PL_PARAM_NAME_MAX];
    const int whole_encdec = pl_model_is_encdec(c) && c->part == PL_PART_WHOLE;
    if (c->block.post_norm) { /* no final norm: the first parameter after the layers */
        int last = -1;
        snprintf(name, sizeof name, "%s.layers.", whole_encdec ? "decoder" : pl_model_stack(c));
        for (int i = 0; i < r->n; i++)
            if (strncmp(r->params[i].name, name, strlen(name)) == 0)
                last = i;
        return last >= 0 && last + 1 < r->n ? &r->params[last + 1] : NULL;
    }
    snprintf(name, sizeof name, "%s.final_layernorm.weight",
             whole_encdec ? "decoder" : pl_model_stack(c));
    return pl_registry_find(r, name);
}

pl_block_dims pl_model_block_dims(const pl_model_config *c)
{
    pl_block_dims d = {c->hidden, c->heads, c->query_groups > 0 ? c->query_groups : c->heads,
                       c->kv_channels > 0 ? c->kv_channels : c->heads > 0 ? c->hidden / c->heads : 0,
                       c->ffn_hidden};
    return d;
}

pl_param_spec pl_model_layer_param(const pl_model_config *c, size_t field, const char *name,
                                 int stage, int layer, int tp)
{
    const pl_block_dims d = pl_model_block_dims(c);
    const int64_t C = d.C, QKV = (d.NH + 2 * d.G) * d.HS, A = d.NH * d.HS;
    const int64_t F1 = pl_block_act_gated(c->block.act) ? 2 * d.F : d.F;
    const pl_tp_split fc1_split = pl_block_act_gated(c->block.act) ? PL_TP_ROWS_HALVES : PL_TP_ROWS;
    const pl_tp_split qkv_split = d.G % tp ? PL_TP_QKV_SHARED_KV : PL_TP_ROWS;
    const float std = (float)c->init_std;
    const float out_std = (float)(c->init_std / sqrt(2.0 * (double)c->num_layers));
    struct {
        size_t field;
        int ndim;
        int64_t rows, cols;
        pl_tp_split split;
        int wd;
        pl_init_kind init;
        float std;
    } t[] = {
        {offsetof(pl_block_weights, norm1_w), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ONES, 0},
        {offsetof(pl_block_weights, norm1_b), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, qkv_w), 2, QKV, C, qkv_split, 1, PL_INIT_NORMAL, std},
        {offsetof(pl_block_weights, qkv_b), 1, QKV, 1, qkv_split, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, proj_w), 2, C, A, PL_TP_COLS, 1, PL_INIT_NORMAL, out_std},
        {offsetof(pl_block_weights, proj_b), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, normx_w), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ONES, 0},
        {offsetof(pl_block_weights, normx_b), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, xq_w), 2, A, C, PL_TP_ROWS, 1, PL_INIT_NORMAL, std},
        {offsetof(pl_block_weights, xq_b), 1, A, 1, PL_TP_ROWS, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, xkv_w), 2, 2 * A, C, PL_TP_ROWS, 1, PL_INIT_NORMAL, std},
        {offsetof(pl_block_weights, xkv_b), 1, 2 * A, 1, PL_TP_ROWS, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, xproj_w), 2, C, A, PL_TP_COLS, 1, PL_INIT_NORMAL, out_std},
        {offsetof(pl_block_weights, xproj_b), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, norm2_w), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ONES, 0},
        {offsetof(pl_block_weights, norm2_b), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, fc1_w), 2, F1, C, fc1_split, 1, PL_INIT_NORMAL, std},
        {offsetof(pl_block_weights, fc1_b), 1, F1, 1, fc1_split, 0, PL_INIT_ZEROS, 0},
        {offsetof(pl_block_weights, fc2_w), 2, C, d.F, PL_TP_COLS, 1, PL_INIT_NORMAL, out_std},
        {offsetof(pl_block_weights, fc2_b), 1, C, 1, PL_TP_REPLICATED, 0, PL_INIT_ZEROS, 0},
    };
    size_t k = 0;
    while (t[k].field != field)
        k++;
    pl_param_spec s = {name,   t[k].ndim, {t[k].rows, t[k].cols}, t[k].split, stage, layer,
                       t[k].wd, t[k].init, t[k].std, d.NH, d.G};
    return s;
}

/* A stack's final norm (on the last stage), or (initial) a post-LN model's
 * norm of the embeddings (on the first). */
static pl_status register_norm(pl_registry *r, const pl_model_config *c, int pp_size, int initial)
{
    pl_status st = PL_OK;
    const int64_t C = c->hidden;
    int s0 = 0, ns = pp_size; /* a pipelined encoder-decoder: the stages of the part's stack */
    if (c->part != PL_PART_WHOLE && c->pp_split > 0)
        pl_model_encdec_stage_stack(c, pp_size, c->part == PL_PART_DECODER ? pp_size - 1 : 0, &s0,
                                    &ns);
    const int last = initial ? s0 : s0 + ns - 1;
    const char *stack = pl_model_stack(c), *what = initial ? "initial" : "final";
    char lnf_w[PL_PARAM_NAME_MAX], lnf_b[PL_PARAM_NAME_MAX];
    snprintf(lnf_w, sizeof lnf_w, "%s.%s_layernorm.weight", stack, what);
    snprintf(lnf_b, sizeof lnf_b, "%s.%s_layernorm.bias", stack, what);
    pl_param_spec fin[] = {
        {lnf_w, 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ONES, 0, 0, 0},
        {lnf_b, 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0, 0},
    };
    PL_TRY(pl_registry_add(r, &fin[0]));
    if (c->block.norm_bias)
        PL_TRY(pl_registry_add(r, &fin[1]));
fail:
    return st;
}

/* A stack's layers (c: a whole model, or an encoder-decoder's part). */
static pl_status register_layers(pl_registry *r, const pl_model_config *c, int pp_size)
{
    pl_status st = PL_OK;
    const char *stack = pl_model_stack(c);
    pl_block_param_name names[PL_BLOCK_MAX_PARAMS];
    const int np = pl_block_param_names(&c->block, names);
    int64_t l0, nl;
    for (int s = 0; s < pp_size; s++) /* every stage's (and chunk's) split is possible */
        for (int k = 0; k < (c->pp_chunks > 1 ? c->pp_chunks : 1); k++)
            PL_TRY(pl_model_chunk_layers(c, pp_size, s, k, &l0, &nl));
    for (int64_t l = 0; l < c->num_layers; l++) {
        const int stage = pl_model_layer_stage(c, pp_size, l);
        for (int k = 0; k < np; k++) {
            char name[PL_PARAM_NAME_MAX];
            snprintf(name, sizeof name, "%s.layers.%lld.%s", stack, (long long)l, names[k].suffix);
            pl_param_spec s = pl_model_layer_param(c, names[k].field, name, stage, (int)l,
                                                   r->tp_size);
            PL_TRY(pl_registry_add(r, &s));
        }
    }
fail:
    return st;
}

/* Physical memory in bytes, or 0 when unknown. */
static uint64_t phys_bytes(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static double gib(uint64_t b) { return (double)b / (double)(1ull << 30); }

/* The model's size from its configuration alone, without a registry: parameters in
 * all (*total), registry entries (*entries). Errors when a count overflows int64. */
static pl_status model_counts(const pl_model_config *c, int pp_size, int64_t *total,
                              int64_t *entries)
{
    pl_block_param_name names[PL_BLOCK_MAX_PARAMS];
    const int np = pl_block_param_names(&c->block, names);
    int64_t layer = 0, t = 0, x;
    for (int k = 0; k < np; k++) {
        const pl_param_spec s = pl_model_layer_param(c, names[k].field, "", 0, 0, 1);
        if (__builtin_mul_overflow(s.shape[0], s.ndim == 2 ? s.shape[1] : 1, &x) ||
            __builtin_add_overflow(layer, x, &layer))
            goto overflow;
    }
    const int64_t C = c->hidden, V = c->padded_vocab;
    const int64_t tables = (c->block.pos == PL_POS_LEARNED ? 1 : 0) +
                           (c->untie || pp_size > 1 ? 2 : 1);
    if (__builtin_mul_overflow(c->num_layers, layer, &t) || __builtin_mul_overflow(V, C, &x) ||
        __builtin_mul_overflow(x, tables, &x) || __builtin_add_overflow(t, x, &t) ||
        __builtin_mul_overflow(c->max_positions, C, &x) || __builtin_add_overflow(t, x, &t) ||
        __builtin_add_overflow(t, 2 * C, &t) ||
        __builtin_mul_overflow(c->num_layers, (int64_t)np, entries) || *entries > INT64_MAX - 8)
        goto overflow;
    *total = t;
    *entries += 5;
    return PL_OK;
overflow:
    return pl_errorf(PL_ERR_ARG, "the model is too large to count: --num-layers %lld, "
                     "--hidden-size %lld, --ffn-hidden-size %lld, vocabulary %lld give more "
                     "than 2^63 parameters", (long long)c->num_layers, (long long)c->hidden,
                     (long long)c->ffn_hidden, (long long)c->padded_vocab);
}

pl_status pl_model_check_size(const pl_model_config *c, int tp, int pp, double bytes_per_param)
{
    const int64_t L = c->num_layers;
    if (L < 1 || c->hidden < 1 || c->heads < 1 || c->ffn_hidden < 1 || c->padded_vocab < 1 ||
        c->max_positions < 0)
        return pl_errorf(PL_ERR_ARG, "--num-layers %lld, --hidden-size %lld, "
                         "--num-attention-heads %lld, --ffn-hidden-size %lld and the vocabulary "
                         "(%lld) must be positive", (long long)L, (long long)c->hidden,
                         (long long)c->heads, (long long)c->ffn_hidden,
                         (long long)c->padded_vocab);
    int64_t total, entries;
    pl_status st = model_counts(c, pp, &total, &entries);
    if (st != PL_OK)
        return st;
    if (entries > PL_REGISTRY_MAX)
        return pl_errorf(PL_ERR_ARG, "--num-layers %lld: the model would have %lld parameter "
                         "tensors; plait's registry holds at most %d", (long long)L,
                         (long long)entries, PL_REGISTRY_MAX);
    /* Lower bounds of what a rank must hold: the whole parameter table, and the state
     * of its share of the parameters (activations come on top). */
    const uint64_t table = (uint64_t)entries * (sizeof(pl_param) + 2 * sizeof(int32_t));
    const double state = (double)(total / ((int64_t)tp * pp)) * bytes_per_param;
    const uint64_t phys = phys_bytes();
    if (phys && (double)table + state > (double)phys)
        return pl_errorf(PL_ERR_ARG, "the model is too large for this machine: %lld layers, "
                         "%.3g parameters; each rank needs at least %.1f GiB for the parameter "
                         "table%s%.1f GiB for its parameters' state (%.3g bytes per parameter "
                         "of its TP %d x PP %d share)%s; the machine has %.1f GiB of memory",
                         (long long)L, (double)total, gib(table),
                         bytes_per_param > 0 ? " and " : "", state / (double)(1ull << 30),
                         bytes_per_param, tp, pp, bytes_per_param > 0 ? "" : " not counted",
                         gib(phys));
    return PL_OK;
}

pl_status pl_model_register(pl_registry *r, const pl_model_config *c, int pp_size)
{
    const pl_block_dims d = pl_model_block_dims(c);
    if (c->heads <= 0 || (c->kv_channels <= 0 && c->hidden % c->heads))
        return pl_errorf(PL_ERR_ARG, "--hidden-size %lld is not divisible by "
                         "--num-attention-heads %lld", (long long)c->hidden, (long long)c->heads);
    if (c->heads % r->tp_size)
        return pl_errorf(PL_ERR_ARG,
                         "--num-attention-heads %lld is not divisible by "
                         "--tensor-model-parallel-size %d",
                         (long long)c->heads, r->tp_size);
    if (d.G < 1 || d.NH % d.G)
        return pl_errorf(PL_ERR_ARG, "--num-attention-heads %lld is not divisible by "
                         "--num-query-groups %lld", (long long)d.NH, (long long)d.G);
    if (d.G % r->tp_size && r->tp_size % d.G)
        return pl_errorf(PL_ERR_ARG, "--num-query-groups %lld and --tensor-model-parallel-size %d: "
                         "one must divide the other (groups split over the TP ranks, or each "
                         "group shared by tp/groups ranks)", (long long)d.G, r->tp_size);
    if (c->ffn_hidden % r->tp_size)
        return pl_errorf(PL_ERR_ARG,
                         "--ffn-hidden-size %lld is not divisible by --tensor-model-parallel-size %d",
                         (long long)c->ffn_hidden, r->tp_size);
    const int64_t C = c->hidden, K = c->head.classes;
    const float std = (float)c->init_std;
    const int last = pp_size - 1;
    pl_status st = PL_OK;
    /* sizes first: a registry of --num-layers 100000000 would take minutes and
     * hundreds of GiB before anything else could refuse it */
    PL_TRY(pl_model_check_size(c, r->tp_size, pp_size, 0));
    pl_param_spec emb[] = {
        {"embedding.word_embeddings.weight", 2, {c->padded_vocab, C}, PL_TP_VOCAB, 0, -1, 1,
         PL_INIT_NORMAL, std, 0, 0},
        {"embedding.position_embeddings.weight", 2, {c->max_positions, C}, PL_TP_REPLICATED, 0, -1,
         1, PL_INIT_NORMAL, std, 0, 0},
    };
    for (int i = 0; i < (c->block.pos == PL_POS_LEARNED ? 2 : 1); i++)
        PL_TRY(pl_registry_add(r, &emb[i]));
    PL_TRY(register_relpos(r, c, pp_size));
    if (pl_model_is_encdec(c) && c->block.post_norm && c->block.pos == PL_POS_LEARNED) {
        /* post-LN BART: the decoder's own position table (transformers' BART has one per
         * stack; Megatron's T5 shares one), with the embeddings */
        pl_param_spec dpos = {"decoder_embedding.position_embeddings.weight", 2,
                              {c->max_positions, C}, PL_TP_REPLICATED, 0, -1, 1, PL_INIT_NORMAL,
                              std, 0, 0};
        PL_TRY(pl_registry_add(r, &dpos));
    }
    const pl_head_spec *h = &c->head;
    if (h->tokentypes > 0) {
        pl_param_spec tt = {"embedding.tokentype_embeddings.weight", 2, {h->tokentypes, C},
                            PL_TP_REPLICATED, 0, -1, 1, PL_INIT_NORMAL, std, 0, 0};
        PL_TRY(pl_registry_add(r, &tt));
    }
    if (pl_model_is_encdec(c)) {
        /* the encoder's final norm with the embeddings (what the whole model's
         * flat buffer holds before its first layer, the embeddings' region and
         * DP bucket: its gradient is final when the encoder's backward ends, as
         * theirs), the encoder's layers, then the decoder's stack */
        const int64_t S = c->pp_split;
        if (pp_size > 1 && (S < 1 || S >= pp_size))
            return pl_errorf(PL_ERR_ARG, "--model %s with --pipeline-model-parallel-size %d: "
                             "--pipeline-model-parallel-split-rank %lld must be in 1..%d (the "
                             "encoder's stages 0..S-1, the decoder's S..%d)",
                             pl_family_get(c->family)->name, pp_size, (long long)S, pp_size - 1,
                             pp_size - 1);
        if (pp_size == 1 && S > 0)
            return pl_errorf(PL_ERR_ARG, "--pipeline-model-parallel-split-rank %lld needs "
                             "--pipeline-model-parallel-size 2 or more", (long long)S);
        if (S > 0 && (c->pp_chunks > 1 || c->pp_first_layers || c->pp_last_layers))
            return pl_errorf(PL_ERR_UNSUPPORTED, "--model %s with --pipeline-model-parallel-"
                             "split-rank: model chunks (--virtual-pipeline-model-parallel-size) and "
                             "--decoder-first/last-pipeline-num-layers are not supported; each "
                             "stack's layers are shared evenly by its stages (Megatron: "
                             "\"Interleaving is not supported when xattn is required between "
                             "encoder and decoder\")", pl_family_get(c->family)->name);
        if (S > 0 && c->block.post_norm)
            return pl_errorf(PL_ERR_UNSUPPORTED, "--model %s --transformer-block-type post_ln with "
                             "--pipeline-model-parallel-size %d: the post-LN encoder-decoder "
                             "(transformers' BART: its decoder's own position table and norm of "
                             "the embeddings) is not pipelined yet; use tensor and data "
                             "parallelism", pl_family_get(c->family)->name, pp_size);
        if (S > 0) { /* the decoder's first stage embeds too: copies of the embeddings */
            const int np = c->block.pos == PL_POS_LEARNED ? 2 : 1;
            for (int i = 0; i < np; i++) {
                pl_param_spec cp = emb[i];
                cp.name = tied_names[1 + i][0];
                cp.stage = (int)S;
                PL_TRY(pl_registry_add(r, &cp));
                pl_param *copy = &r->params[r->n - 1];
                copy->init_stream = pl_hash_str(tied_names[1 + i][1]);
                copy->tied_copy = 1;
            }
        }
        pl_model_config enc, dec;
        pl_model_encdec_parts(c, &enc, &dec);
        const int post = c->block.post_norm; /* both stacks' norms of the embeddings instead */
        PL_TRY(register_norm(r, &enc, pp_size, post));
        if (post)
            PL_TRY(register_norm(r, &dec, pp_size, 1));
        PL_TRY(register_layers(r, &enc, pp_size));
        PL_TRY(register_layers(r, &dec, pp_size));
        if (!post)
            PL_TRY(register_norm(r, &dec, pp_size, 0));
    } else if (pl_model_post_ln(c)) { /* with the embeddings (their region and DP bucket) */
        PL_TRY(register_norm(r, c, pp_size, 1));
        PL_TRY(register_layers(r, c, pp_size));
    } else {
        PL_TRY(register_layers(r, c, pp_size));
        PL_TRY(register_norm(r, c, pp_size, 0));
    }
    pl_param_spec out = {"output_layer.weight", 2, {c->padded_vocab, C}, PL_TP_VOCAB, last, -1, 1,
                         PL_INIT_NORMAL, std, 0, 0};
    /* tied, the last stage's copy unless it embeds too (an encoder-decoder's decoder
     * on one stage: its word embeddings are the output layer, as Megatron's) */
    const int own_copy = pp_size > 1 && !(pl_model_is_encdec(c) && c->pp_split == last);
    if (h->lm_head && (c->untie || own_copy))
        PL_TRY(pl_registry_add(r, &out));
    if (h->lm_head && !c->untie && own_copy) {
        /* Tied across stages (Megatron): the last stage's output layer is a copy of
         * the word embeddings, drawn alike; the embedding group sums their gradients. */
        pl_param *copy = &r->params[r->n - 1];
        copy->init_stream = pl_hash_str("embedding.word_embeddings.weight");
        copy->tied_copy = 1;
    }
    /* BERT's heads, after the final norm (the last stage's region and DP bucket
     * run from the final norm to the end of the buffer). Megatron's get_linear_layer:
     * weights drawn with the init std, biases zero; every rank computes them whole. */
    pl_param_spec head[] = {
        {"lm_head.dense.weight", 2, {C, C}, PL_TP_REPLICATED, last, -1, 1, PL_INIT_NORMAL, std, 0, 0},
        {"lm_head.dense.bias", 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0, 0},
        {"lm_head.layer_norm.weight", 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ONES, 0, 0, 0},
        {"lm_head.layer_norm.bias", 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0, 0},
        {pl_model_output_bias_name(c), 1, {c->padded_vocab}, PL_TP_VOCAB, last, -1, 0,
         PL_INIT_ZEROS, 0, 0, 0},
        {"pooler.dense.weight", 2, {C, C}, PL_TP_REPLICATED, last, -1, 1, PL_INIT_NORMAL, std, 0, 0},
        {"pooler.dense.bias", 1, {C}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0, 0},
        {"binary_head.weight", 2, {2, C}, PL_TP_REPLICATED, last, -1, 1, PL_INIT_NORMAL, std, 0, 0},
        {"binary_head.bias", 1, {2}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0, 0},
        /* fine-tuning: Megatron's classification_head, NeMo's TokenClassifier */
        {"classification_head.weight", 2, {K, C}, PL_TP_REPLICATED, last, -1, 1, PL_INIT_NORMAL,
         std, 0, 0},
        {"classification_head.bias", 1, {K}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0, 0},
        {"classifier.mlp.layer0.weight", 2, {K, C}, PL_TP_REPLICATED, last, -1, 1, PL_INIT_NORMAL,
         std, 0, 0},
        {"classifier.mlp.layer0.bias", 1, {K}, PL_TP_REPLICATED, last, -1, 0, PL_INIT_ZEROS, 0, 0,
         0},
    };
    const int seq = PL_TASK_POOLED(h->task), pooler = h->binary_head || seq;
    const int tok = h->task == PL_TASK_TOKEN || h->task == PL_TASK_SPAN;
    const int have[] = {h->lm_transform, h->lm_transform, h->lm_transform, h->lm_transform,
                        h->output_bias, pooler, pooler, h->binary_head, h->binary_head,
                        seq, seq, tok, tok};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        if (have[i])
            PL_TRY(pl_registry_add(r, &head[i]));
    return PL_OK;
fail:
    return st;
}

pl_status pl_model_stage_layers(const pl_model_config *c, int pp_size, int stage, int64_t *l0,
                                int64_t *nl)
{
    const int64_t L = c->num_layers, P = pp_size;
    int64_t first = c->pp_first_layers, last = c->pp_last_layers;
    if (c->part != PL_PART_WHOLE && c->pp_split > 0 && P > 1) {
        int s0, ns;
        const int dec = pl_model_encdec_stage_stack(c, pp_size, stage, &s0, &ns);
        *l0 = 0, *nl = 0;
        if (dec != (c->part == PL_PART_DECODER))
            return PL_OK; /* the other stack's stage */
        if (L % ns)
            return pl_errorf(PL_ERR_ARG, "--%s-num-layers %lld is not divisible by its %d "
                             "pipeline stages (--pipeline-model-parallel-split-rank %lld of "
                             "--pipeline-model-parallel-size %d: the encoder's stages 0..%lld, "
                             "the decoder's %lld..%d)", pl_model_stack(c), (long long)L, ns,
                             (long long)c->pp_split, pp_size, (long long)c->pp_split - 1,
                             (long long)c->pp_split, pp_size - 1);
        *l0 = (stage - s0) * (L / ns), *nl = L / ns;
        return PL_OK;
    }
    if ((first || last) && P < 2)
        return pl_errorf(PL_ERR_ARG, "--decoder-first-pipeline-num-layers and "
                         "--decoder-last-pipeline-num-layers need --pipeline-model-parallel-size "
                         "2 or more");
    if (!first && !last && L % P)
        return pl_errorf(PL_ERR_ARG, "--num-layers %lld is not divisible by "
                         "--pipeline-model-parallel-size %d", (long long)L, pp_size);
    /* the stages without a given count share what the given ones leave */
    const int64_t given = (first > 0) + (last > 0), rest = L - first - last, others = P - given;
    if (first < 0 || last < 0 || rest < 0 || (others > 0 && (rest % others || rest == 0)) ||
        (others == 0 && rest != 0))
        return pl_errorf(PL_ERR_ARG, "--num-layers %lld cannot be split over %d pipeline stages "
                         "with --decoder-first-pipeline-num-layers %lld and "
                         "--decoder-last-pipeline-num-layers %lld (the other stages share the "
                         "rest evenly, at least one layer each)",
                         (long long)L, pp_size, (long long)first, (long long)last);
    const int64_t share = others ? rest / others : 0;
    if (!first)
        first = share;
    if (!last)
        last = share;
    if (P == 1) {
        *l0 = 0, *nl = L;
    } else if (stage == 0) {
        *l0 = 0, *nl = first;
    } else if (stage == P - 1) {
        *l0 = L - last, *nl = last;
    } else {
        *l0 = first + (stage - 1) * share, *nl = share;
    }
    return PL_OK;
}

pl_status pl_model_chunk_layers(const pl_model_config *c, int pp_size, int stage, int chunk,
                                int64_t *l0, int64_t *nl)
{
    const int64_t v = c->pp_chunks > 1 ? c->pp_chunks : 1, P = pp_size, L = c->num_layers;
    if (v == 1)
        return chunk == 0 ? pl_model_stage_layers(c, pp_size, stage, l0, nl)
                          : pl_errorf(PL_ERR_INTERNAL, "chunk %d of a stage with one", chunk);
    if (P < 2)
        return pl_errorf(PL_ERR_ARG, "--virtual-pipeline-model-parallel-size %lld needs "
                         "--pipeline-model-parallel-size 2 or more", (long long)v);
    if (c->pp_first_layers || c->pp_last_layers)
        return pl_errorf(PL_ERR_ARG, "--virtual-pipeline-model-parallel-size with "
                         "--decoder-first/last-pipeline-num-layers: uneven stages are not "
                         "split into chunks (Megatron refuses the combination too)");
    if (L % (P * v))
        return pl_errorf(PL_ERR_ARG, "--num-layers %lld is not divisible by "
                         "--pipeline-model-parallel-size %d x --virtual-pipeline-model-parallel-"
                         "size %lld (every model chunk holds the same number of layers)",
                         (long long)L, pp_size, (long long)v);
    if (stage < 0 || stage >= P || chunk < 0 || chunk >= v)
        return pl_errorf(PL_ERR_INTERNAL, "chunk %d of stage %d", chunk, stage);
    const int64_t per = L / (P * v);
    *l0 = ((int64_t)chunk * P + stage) * per;
    *nl = per;
    return PL_OK;
}

int pl_model_layer_stage(const pl_model_config *c, int pp_size, int64_t l)
{
    const int64_t v = c->pp_chunks > 1 ? c->pp_chunks : 1;
    if (v > 1)
        return (int)(l / (c->num_layers / ((int64_t)pp_size * v)) % pp_size);
    for (int s = 0; s < pp_size; s++) {
        int64_t l0, nl;
        if (pl_model_stage_layers(c, pp_size, s, &l0, &nl) == PL_OK && nl > 0 && l >= l0 &&
            l < l0 + nl)
            return s;
    }
    return pp_size - 1;
}

int64_t pl_model_num_params(const pl_model_config *c)
{
    const pl_block_dims d = pl_model_block_dims(c);
    const int64_t C = c->hidden, F = c->ffn_hidden, QKV = (d.NH + 2 * d.G) * d.HS, A = d.NH * d.HS;
    const int64_t F1 = pl_block_act_gated(c->block.act) ? 2 * F : F;
    const int nb = c->block.norm_bias, b = c->block.bias;
    int64_t per_layer = 2 * C * (1 + nb) + QKV * C + A * C + F1 * C + C * F;
    if (b)
        per_layer += QKV + C + F1 + C;
    int64_t n = c->vocab_size * C + c->num_layers * per_layer + C * (1 + nb);
    if (c->block.pos == PL_POS_LEARNED)
        n += c->max_positions * C;
    if (c->block.pos == PL_POS_RELATIVE) /* a table per stack */
        n += c->rel_buckets * c->heads * (pl_model_is_encdec(c) && c->part == PL_PART_WHOLE ? 2 : 1);
    if (c->untie)
        n += c->vocab_size * C;
    const pl_head_spec *h = &c->head;
    n += h->tokentypes * C + (h->lm_transform ? C * C + 3 * C : 0) +
         (h->output_bias ? c->vocab_size : 0) + (h->binary_head ? C * C + C + 2 * C + 2 : 0) +
         (PL_TASK_POOLED(h->task) ? C * C + C : 0) + (h->task ? h->classes * (C + 1) : 0);
    if (!h->lm_head && c->untie)
        n -= c->vocab_size * C; /* no output layer at all */
    if (pl_model_is_encdec(c) && c->part == PL_PART_WHOLE && c->block.post_norm &&
        c->block.pos == PL_POS_LEARNED) /* post-LN BART: the decoder's positions */
        n += c->max_positions * C;
    if (pl_model_is_encdec(c) && c->part == PL_PART_WHOLE) /* the decoder's stack */
        n += c->dec_layers * (per_layer + C * (1 + nb) + 4 * A * C + (b ? 3 * A + C : 0)) +
             C * (1 + nb);
    return n;
}

double pl_model_flops_per_token(const pl_model_config *c)
{
    const pl_block_dims d = pl_model_block_dims(c);
    const double C = (double)c->hidden, F = (double)c->ffn_hidden, L = (double)c->num_layers;
    const double QKV = (double)((d.NH + 2 * d.G) * d.HS), A = (double)(d.NH * d.HS);
    const double F1 = pl_block_act_gated(c->block.act) ? 2 * F : F;
    double matmul_params = L * (QKV * C + A * C + F1 * C + F * C) +
                           (c->head.lm_head ? (double)c->padded_vocab * C : 0.0);
    if (c->head.lm_transform) /* lm_head.dense on every position (the pooler's: once a sample) */
        matmul_params += C * C;
    /* attention: QK^T and PV, 2 T A multiply-adds each per token, forward and
     * backward (x3): 12 L A T, Megatron's 12 L C T when A = C */
    if (pl_model_is_encdec(c) && c->part == PL_PART_WHOLE) {
        /* per encoder token: the encoder's layers and every decoder layer's cross-attention
         * keys and values; per decoder token (Td / Te of them): the decoder's layers with
         * the cross-attention's query and output projections, its attention over Td and
         * Te keys, and the LM head */
        const double Te = (double)c->seq_length, Td = (double)c->dec_seq_length;
        const double Ld = (double)c->dec_layers, layer = QKV * C + A * C + F1 * C + F * C;
        const double enc = 6.0 * (L * layer + Ld * 2 * A * C) + 12.0 * L * A * Te;
        const double dec = 6.0 * (Ld * (layer + 2 * A * C) + (double)c->padded_vocab * C) +
                           12.0 * Ld * A * (Td + Te);
        return enc + dec * Td / Te;
    }
    return 6.0 * matmul_params + 12.0 * L * A * (double)c->seq_length;
}

double pl_model_megatron_flops(const pl_model_config *c, int64_t batch)
{
    const pl_block_dims d = pl_model_block_dims(c);
    const double C = (double)c->hidden, L = (double)c->num_layers, T = (double)c->seq_length;
    const double Q = (double)(d.NH * d.HS), KV = (double)(d.G * d.HS);
    const double ffn = (double)d.F * (pl_block_act_gated(c->block.act) ? 3.0 : 2.0);
    /* forward + backward (3) x multiply-add (2) */
    const double per_token = 6.0 * C * (ffn + Q + 2 * KV + Q) * L + 6.0 * C * (double)c->padded_vocab;
    const double per_sample_sq = 6.0 * Q * L;
    return (double)batch * T * per_token + (double)batch * T * T * per_sample_sq;
}
