/* transformers' T5ForConditionalGeneration names of plait's T5 with
 * transformers' layer (model/hf_names.h; models/t5/modeling_t5.py): each
 * stack's blocks are layer.0 (self-attention), decoder layer.1 the cross-
 * attention (EncDecAttention), then the MLP (DenseReluDense); the relative
 * position bias table lives in block 0's self-attention of each stack. */
#include "model/hf_names.h"

#include <stdio.h>
#include <string.h>

typedef struct t5_row {
    const char *plait; /* the suffix after "<stack>.layers.N." (layer rows) or the name */
    int layer;         /* 1: a layer parameter; 2: the decoder's only */
    const char *hf[3]; /* "%s": the stack, "%d": the layer; up to three tensors */
    pl_hf_transform tf[3];
} t5_row;

static const t5_row rows[] = {
    {"embedding.word_embeddings.weight", 0, {"shared.weight"}, {PL_HF_COPY}},
    {"encoder_relative_pos_emb.relative_attention_bias.weight", 0,
     {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}, {PL_HF_COPY}},
    {"decoder_relative_pos_emb.relative_attention_bias.weight", 0,
     {"decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}, {PL_HF_COPY}},
    {"encoder.final_layernorm.weight", 0, {"encoder.final_layer_norm.weight"}, {PL_HF_COPY}},
    {"decoder.final_layernorm.weight", 0, {"decoder.final_layer_norm.weight"}, {PL_HF_COPY}},
    {"output_layer.weight", 0, {"lm_head.weight"}, {PL_HF_COPY}}, /* untied only */
    {"input_layernorm.weight", 1, {"%s.block.%d.layer.0.layer_norm.weight"}, {PL_HF_COPY}},
    {"self_attention.linear_qkv.weight", 1,
     {"%s.block.%d.layer.0.SelfAttention.q.weight", "%s.block.%d.layer.0.SelfAttention.k.weight",
      "%s.block.%d.layer.0.SelfAttention.v.weight"},
     {PL_HF_Q, PL_HF_K, PL_HF_V}},
    {"self_attention.linear_proj.weight", 1, {"%s.block.%d.layer.0.SelfAttention.o.weight"},
     {PL_HF_COPY}},
    {"pre_cross_attn_layernorm.weight", 2, {"%s.block.%d.layer.1.layer_norm.weight"}, {PL_HF_COPY}},
    {"cross_attention.linear_q.weight", 2, {"%s.block.%d.layer.1.EncDecAttention.q.weight"},
     {PL_HF_COPY}},
    {"cross_attention.linear_kv.weight", 2,
     {"%s.block.%d.layer.1.EncDecAttention.k.weight", "%s.block.%d.layer.1.EncDecAttention.v.weight"},
     {PL_HF_XK, PL_HF_XV}},
    {"cross_attention.linear_proj.weight", 2, {"%s.block.%d.layer.1.EncDecAttention.o.weight"},
     {PL_HF_COPY}},
    /* the MLP: layer.1 of the encoder, layer.2 of the decoder ("%s" then "%d" then the index) */
    {"pre_mlp_layernorm.weight", 1, {"%s.block.%d.layer.%d.layer_norm.weight"}, {PL_HF_COPY}},
    {"mlp.linear_fc2.weight", 1, {"%s.block.%d.layer.%d.DenseReluDense.wo.weight"}, {PL_HF_COPY}},
    {NULL, 0, {NULL}, {PL_HF_COPY}},
};

/* fc1: wi (ReLU), or wi_0 and wi_1 (GEGLU's gate and up halves) */
static int fc1_map(const pl_model_config *c, const char *stack, int layer, int mlp,
                   pl_hf_tensor out[PL_HF_MAX_PER_PARAM])
{
    const int gated = pl_block_act_gated(c->block.act);
    for (int k = 0; k < (gated ? 2 : 1); k++) {
        snprintf(out[k].name, sizeof out[k].name, "%s.block.%d.layer.%d.DenseReluDense.%s.weight",
                 stack, layer, mlp, gated ? (k ? "wi_1" : "wi_0") : "wi");
        out[k].tf = gated ? (k ? PL_HF_UP : PL_HF_GATE) : PL_HF_COPY;
    }
    return gated ? 2 : 1;
}

int pl_hf_t5_map(const pl_model_config *c, const pl_param *p, pl_hf_tensor out[PL_HF_MAX_PER_PARAM])
{
    int layer = -1, used = 0, n = 0;
    char stack[8] = "";
    const char *suffix = p->name;
    if (sscanf(p->name, "%7[a-z].layers.%d.%n", stack, &layer, &used) == 2 && used > 0)
        suffix = p->name + used;
    const int dec = strcmp(stack, "decoder") == 0, mlp = dec ? 2 : 1;
    if (layer >= 0 && strcmp(suffix, "mlp.linear_fc1.weight") == 0)
        n = fc1_map(c, stack, layer, mlp, out);
    for (const t5_row *r = rows; !n && r->plait; r++) {
        if ((r->layer != 0) != (layer >= 0) || (r->layer == 2 && !dec) ||
            strcmp(r->plait, suffix) != 0)
            continue;
        if (!c->untie && strcmp(suffix, "output_layer.weight") == 0)
            return 0;
        for (; n < PL_HF_MAX_PER_PARAM && r->hf[n]; n++) {
            if (layer >= 0)
                snprintf(out[n].name, sizeof out[n].name, r->hf[n], stack, layer, mlp);
            else
                snprintf(out[n].name, sizeof out[n].name, "%s", r->hf[n]);
            out[n].tf = r->tf[n];
        }
    }
    if (n == 0)
        return -1;
    if (c->t5_sentinels > 0 && p->split == PL_TP_VOCAB)
        out[0].tf = PL_HF_T5_VOCAB;
    /* shapes: the vocabulary without Megatron's padding rows, a part of a fused tensor */
    for (int k = 0; k < n; k++) {
        pl_hf_tensor *t = &out[k];
        t->ndim = p->ndim;
        t->shape[0] = p->shape[0];
        t->shape[1] = p->ndim == 2 ? p->shape[1] : 0;
        if (t->tf == PL_HF_COPY && p->split == PL_TP_VOCAB)
            t->shape[0] = c->vocab_size;
        else if (t->tf == PL_HF_T5_VOCAB) /* with the padding rows, as T5's 32128 of 32100 */
            t->shape[0] = p->shape[0];
        else if (t->tf == PL_HF_Q || t->tf == PL_HF_K || t->tf == PL_HF_V)
            t->shape[0] = p->shape[0] / 3;
        else if (t->tf != PL_HF_COPY)
            t->shape[0] = p->shape[0] / 2;
    }
    return n;
}

/* T5Tokenizer's row r of the vocabulary as plait's (the legacy SentencePieceTokenizer's):
 * pieces [0, P) and the padding rows alike; hf [P, P + N) are <extra_id_{N-1}> .. <extra_id_0>,
 * plait's [P + K, P + K + N) <extra_id_0> .. <extra_id_{N-1}>; hf [P + N, P + N + K) plait's
 * K added tokens [P, P + K) in order. */
static int64_t vocab_row(const pl_model_config *c, int64_t r)
{
    const int64_t N = c->t5_sentinels, K = c->t5_specials, P = c->vocab_size - N - K;
    if (r < P || r >= P + N + K)
        return r;
    if (r < P + N)
        return P + K + (P + N - 1 - r);
    return P + (r - P - N);
}

int64_t pl_hf_t5_source_index(const pl_model_config *c, const pl_param *p, const pl_hf_tensor *t,
                              int64_t i)
{
    (void)t; /* PL_HF_T5_VOCAB: the rows reordered */
    const int64_t cols = p->ndim == 2 ? p->shape[1] : 1;
    return vocab_row(c, i / cols) * cols + i % cols;
}
