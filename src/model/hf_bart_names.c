/* transformers' BartForConditionalGeneration names (models/bart/modeling_bart.py) of a
 * post-LN plait BART (model/hf_names.h): model.shared (the word embeddings, tied to
 * lm_head), per stack model.{encoder,decoder}.embed_positions (plait's table below
 * BART's 2 offset rows) and layernorm_embedding, the layers' self_attn.{q,k,v,out}_proj
 * (Megatron's per-head [q; k; v] rows), self_attn_layer_norm, the decoder's
 * encoder_attn.{q,k,v,out}_proj (linear_q, per-head [k; v] of linear_kv, linear_proj)
 * and encoder_attn_layer_norm, fc1, fc2, final_layer_norm; final_logits_bias. */
#include "model/hf_names.h"

#include <stdio.h>
#include <string.h>

typedef struct bart_row {
    const char *plait, *hf[3];
    pl_hf_transform tf[3];
} bart_row;

/* layer parameters: the suffix after "<stack>.layers.N." (weight and bias alike) */
static const bart_row layer_rows[] = {
    {"self_attention.linear_qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
     {PL_HF_Q, PL_HF_K, PL_HF_V}},
    {"self_attention.linear_proj", {"self_attn.out_proj"}, {PL_HF_COPY}},
    {"post_self_attn_layernorm", {"self_attn_layer_norm"}, {PL_HF_COPY}},
    {"cross_attention.linear_q", {"encoder_attn.q_proj"}, {PL_HF_COPY}},
    {"cross_attention.linear_kv", {"encoder_attn.k_proj", "encoder_attn.v_proj"},
     {PL_HF_XK, PL_HF_XV}},
    {"cross_attention.linear_proj", {"encoder_attn.out_proj"}, {PL_HF_COPY}},
    {"post_cross_attn_layernorm", {"encoder_attn_layer_norm"}, {PL_HF_COPY}},
    {"mlp.linear_fc1", {"fc1"}, {PL_HF_COPY}},
    {"mlp.linear_fc2", {"fc2"}, {PL_HF_COPY}},
    {"post_mlp_layernorm", {"final_layer_norm"}, {PL_HF_COPY}},
};

static const struct {
    const char *plait, *hf;
    pl_hf_transform tf;
} top_rows[] = {
    {"embedding.word_embeddings.weight", "model.shared.weight", PL_HF_COPY},
    {"embedding.position_embeddings.weight", "model.encoder.embed_positions.weight", PL_HF_POS2},
    {"decoder_embedding.position_embeddings.weight", "model.decoder.embed_positions.weight",
     PL_HF_POS2},
    {"encoder.initial_layernorm.weight", "model.encoder.layernorm_embedding.weight", PL_HF_COPY},
    {"encoder.initial_layernorm.bias", "model.encoder.layernorm_embedding.bias", PL_HF_COPY},
    {"decoder.initial_layernorm.weight", "model.decoder.layernorm_embedding.weight", PL_HF_COPY},
    {"decoder.initial_layernorm.bias", "model.decoder.layernorm_embedding.bias", PL_HF_COPY},
    {"lm_head.output_layer.bias", "final_logits_bias", PL_HF_ROW},
};

int pl_hf_bart_map(const pl_model_config *c, const pl_param *p,
                   pl_hf_tensor out[PL_HF_MAX_PER_PARAM])
{
    int layer = -1, used = 0;
    char stack[16] = "";
    if (sscanf(p->name, "%15[a-z].layers.%d.%n", stack, &layer, &used) == 2 && used > 0 &&
        (strcmp(stack, "encoder") == 0 || strcmp(stack, "decoder") == 0)) {
        const char *suffix = p->name + used, *dot = strrchr(suffix, '.');
        for (size_t k = 0; dot && k < sizeof layer_rows / sizeof *layer_rows; k++) {
            const bart_row *r = &layer_rows[k];
            if (strlen(r->plait) != (size_t)(dot - suffix) ||
                strncmp(r->plait, suffix, (size_t)(dot - suffix)) != 0)
                continue;
            int n = 0;
            for (; n < 3 && r->hf[n]; n++) {
                char name[PL_PARAM_NAME_MAX];
                snprintf(name, sizeof name, "model.%s.layers.%d.%s%s", stack, layer, r->hf[n], dot);
                pl_hf_put(c, p, &out[n], name, r->tf[n]);
            }
            return n;
        }
        return -1;
    }
    if (strcmp(p->name, "output_layer.weight") == 0) /* tied (config build refuses untied) */
        return p->tied_copy || !c->untie ? 0 : -1;
    for (size_t k = 0; k < sizeof top_rows / sizeof *top_rows; k++)
        if (strcmp(top_rows[k].plait, p->name) == 0)
            return pl_hf_put(c, p, &out[0], top_rows[k].hf, top_rows[k].tf);
    return -1;
}
