/* The Hugging Face name maps of the families (model/hf_names.h). */
#include "model/hf_names.h"

#include <stdio.h>
#include <string.h>

/* A row: the plait name (layer parameters: the suffix after "decoder.layers.N."),
 * up to three Hugging Face names ("%d": the layer) and their transforms. */
typedef struct hf_row {
    const char *plait;
    int layer;
    struct {
        const char *hf;
        pl_hf_transform tf;
    } to[PL_HF_MAX_PER_PARAM];
} hf_row;

/* transformers' GPT2LMHeadModel (models/gpt2/modeling_gpt2.py) */
static const hf_row gpt2[] = {
    {"embedding.word_embeddings.weight", 0, {{"transformer.wte.weight", PL_HF_COPY}}},
    {"embedding.position_embeddings.weight", 0, {{"transformer.wpe.weight", PL_HF_COPY}}},
    {"input_layernorm.weight", 1, {{"transformer.h.%d.ln_1.weight", PL_HF_COPY}}},
    {"input_layernorm.bias", 1, {{"transformer.h.%d.ln_1.bias", PL_HF_COPY}}},
    {"self_attention.linear_qkv.weight", 1, {{"transformer.h.%d.attn.c_attn.weight", PL_HF_QKV_CONV1D}}},
    {"self_attention.linear_qkv.bias", 1, {{"transformer.h.%d.attn.c_attn.bias", PL_HF_QKV_CONV1D}}},
    {"self_attention.linear_proj.weight", 1, {{"transformer.h.%d.attn.c_proj.weight", PL_HF_CONV1D}}},
    {"self_attention.linear_proj.bias", 1, {{"transformer.h.%d.attn.c_proj.bias", PL_HF_COPY}}},
    {"pre_mlp_layernorm.weight", 1, {{"transformer.h.%d.ln_2.weight", PL_HF_COPY}}},
    {"pre_mlp_layernorm.bias", 1, {{"transformer.h.%d.ln_2.bias", PL_HF_COPY}}},
    {"mlp.linear_fc1.weight", 1, {{"transformer.h.%d.mlp.c_fc.weight", PL_HF_CONV1D}}},
    {"mlp.linear_fc1.bias", 1, {{"transformer.h.%d.mlp.c_fc.bias", PL_HF_COPY}}},
    {"mlp.linear_fc2.weight", 1, {{"transformer.h.%d.mlp.c_proj.weight", PL_HF_CONV1D}}},
    {"mlp.linear_fc2.bias", 1, {{"transformer.h.%d.mlp.c_proj.bias", PL_HF_COPY}}},
    {"decoder.final_layernorm.weight", 0, {{"transformer.ln_f.weight", PL_HF_COPY}}},
    {"decoder.final_layernorm.bias", 0, {{"transformer.ln_f.bias", PL_HF_COPY}}},
    {"output_layer.weight", 0, {{"lm_head.weight", PL_HF_COPY}}}, /* untied only (tie_word_embeddings false) */
    {NULL, 0, {{NULL, PL_HF_COPY}}},
};

/* transformers' LlamaForCausalLM (models/llama/modeling_llama.py) */
static const hf_row llama[] = {
    {"embedding.word_embeddings.weight", 0, {{"model.embed_tokens.weight", PL_HF_COPY}}},
    {"input_layernorm.weight", 1, {{"model.layers.%d.input_layernorm.weight", PL_HF_COPY}}},
    {"self_attention.linear_qkv.weight", 1,
     {{"model.layers.%d.self_attn.q_proj.weight", PL_HF_Q},
      {"model.layers.%d.self_attn.k_proj.weight", PL_HF_K},
      {"model.layers.%d.self_attn.v_proj.weight", PL_HF_V}}},
    {"self_attention.linear_proj.weight", 1, {{"model.layers.%d.self_attn.o_proj.weight", PL_HF_COPY}}},
    {"pre_mlp_layernorm.weight", 1, {{"model.layers.%d.post_attention_layernorm.weight", PL_HF_COPY}}},
    {"mlp.linear_fc1.weight", 1,
     {{"model.layers.%d.mlp.gate_proj.weight", PL_HF_GATE},
      {"model.layers.%d.mlp.up_proj.weight", PL_HF_UP}}},
    {"mlp.linear_fc2.weight", 1, {{"model.layers.%d.mlp.down_proj.weight", PL_HF_COPY}}},
    {"decoder.final_layernorm.weight", 0, {{"model.norm.weight", PL_HF_COPY}}},
    {"output_layer.weight", 0, {{"lm_head.weight", PL_HF_COPY}}},
    {NULL, 0, {{NULL, PL_HF_COPY}}},
};

/* Llama's names for --model llama, and for a GPT given Llama's layer (SwiGLU:
 * how Megatron writes a Llama with a tied output layer); GPT-2's otherwise. */
static const hf_row *family_rows(const pl_model_config *c)
{
    return c->family == PL_FAMILY_LLAMA || c->block.act == PL_ACT_SWIGLU ? llama : gpt2;
}

/* The tensor's shape in Hugging Face's layout. */
void pl_hf_shape(const pl_model_config *c, const pl_param *p, pl_hf_tensor *t)
{
    const pl_block_dims d = pl_model_block_dims(c);
    t->ndim = p->ndim;
    t->shape[0] = p->shape[0];
    t->shape[1] = p->ndim == 2 ? p->shape[1] : 0;
    switch (t->tf) {
    case PL_HF_COPY:
        if (p->split == PL_TP_VOCAB)
            t->shape[0] = c->vocab_size;
        break;
    case PL_HF_CONV1D:
    case PL_HF_QKV_CONV1D:
        if (p->ndim == 2)
            t->shape[0] = p->shape[1], t->shape[1] = p->shape[0];
        break;
    case PL_HF_Q:
        t->shape[0] = d.NH * d.HS;
        break;
    case PL_HF_K:
    case PL_HF_V:
        t->shape[0] = d.G * d.HS;
        break;
    case PL_HF_GATE:
    case PL_HF_UP:
    case PL_HF_XK:
    case PL_HF_XV:
        t->shape[0] = p->shape[0] / 2;
        break;
    case PL_HF_TYPES0:
        t->shape[0] = 2;
        break;
    case PL_HF_POS2:
        t->shape[0] = p->shape[0] + 2;
        break;
    case PL_HF_ROW:
        t->ndim = 2;
        t->shape[0] = 1;
        t->shape[1] = p->split == PL_TP_VOCAB ? c->vocab_size : p->shape[0];
        break;
    case PL_HF_T5_VOCAB: /* hf_t5_names.c sets its own shapes */
        break;
    }
}

int pl_hf_put(const pl_model_config *c, const pl_param *p, pl_hf_tensor *t, const char *name,
              pl_hf_transform tf)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    t->tf = tf;
    pl_hf_shape(c, p, t);
    return 1;
}

int pl_hf_map(const pl_model_config *c, const pl_param *p, pl_hf_tensor out[PL_HF_MAX_PER_PARAM])
{
    if (c->family == PL_FAMILY_BERT)
        return pl_hf_bert_map(c, p, out);
    if (c->family == PL_FAMILY_BART)
        return pl_hf_bart_map(c, p, out);
    int layer = -1, used = 0;
    const char *suffix = p->name;
    if (c->family == PL_FAMILY_T5)
        return pl_hf_t5_map(c, p, out);
    if (sscanf(p->name, "decoder.layers.%d.%n", &layer, &used) == 1 && used > 0)
        suffix = p->name + used;
    for (const hf_row *r = family_rows(c); r->plait; r++) {
        if (r->layer != (layer >= 0) || strcmp(r->plait, suffix) != 0)
            continue;
        if (p->tied_copy || (!c->untie && strcmp(suffix, "output_layer.weight") == 0))
            return 0;
        int n = 0;
        for (; n < PL_HF_MAX_PER_PARAM && r->to[n].hf; n++) {
            snprintf(out[n].name, sizeof out[n].name, r->to[n].hf, layer);
            out[n].tf = r->to[n].tf;
            pl_hf_shape(c, p, &out[n]);
        }
        return n;
    }
    return -1;
}

int64_t pl_hf_source_index(const pl_model_config *c, const pl_param *p, const pl_hf_tensor *t,
                           int64_t i)
{
    const pl_block_dims d = pl_model_block_dims(c);
    const int64_t cols = t->ndim == 2 ? t->shape[1] : 1, row = i / cols, col = i % cols;
    const int64_t pcols = p->ndim == 2 ? p->shape[1] : 1, QG = d.NH / d.G, HS = d.HS;
    switch (t->tf) {
    case PL_HF_COPY:
        return i;
    case PL_HF_CONV1D: /* hf (in, out) = plait (out, in) transposed */
        return p->ndim == 2 ? col * pcols + row : i;
    case PL_HF_QKV_CONV1D: { /* hf output column j = part C + h HS + e; plait row (3h + part) HS + e */
        const int64_t j = p->ndim == 2 ? col : i, C = d.NH * HS;
        const int64_t part = j / C, h = j % C / HS, e = j % HS;
        const int64_t prow = (3 * h + part) * HS + e;
        return p->ndim == 2 ? prow * pcols + row : prow;
    }
    case PL_HF_Q:
    case PL_HF_K:
    case PL_HF_V: { /* rows of head h (Q) or group g (K, V); plait group g: QG q heads, k, v */
        const int64_t unit = row / HS, e = row % HS;
        const int64_t prow = t->tf == PL_HF_Q ? (unit / QG * (QG + 2) + unit % QG) * HS + e
                           : (unit * (QG + 2) + QG + (t->tf == PL_HF_V)) * HS + e;
        return prow * pcols + col;
    }
    case PL_HF_GATE:
        return i;
    case PL_HF_UP:
        return (p->shape[0] / 2 + row) * pcols + col;
    case PL_HF_TYPES0:
        return -1;
    case PL_HF_POS2:
        return row < 2 ? -1 : i - 2 * cols;
    case PL_HF_XK:
    case PL_HF_XV: { /* head h's rows: plait's (2h + part) HS + e */
        const int64_t h = row / HS, e = row % HS;
        return ((2 * h + (t->tf == PL_HF_XV)) * HS + e) * pcols + col;
    }
    case PL_HF_ROW:
        return i;
    case PL_HF_T5_VOCAB:
        return pl_hf_t5_source_index(c, p, t, i);
    }
    return -1;
}
