/* The family table. */
#include "model/spec.h"

#include <string.h>

static const pl_family_spec families[] = {
    /* Megatron's GPTModel (GPT-2): LayerNorm with bias, GELU, learned absolute
     * positions, causal, biases, pre-norm, tied output layer. */
    {"gpt", PL_FAMILY_GPT,
     {PL_NORM_LAYERNORM, PL_ACT_GELU, PL_POS_LEARNED, PL_MASK_CAUSAL, 0, 1, 1, 0, 0},
     {1, PL_TASK_NONE, 0, 0, 0, 0, 0},
     "decoder", 0, 0.1f, 0.1f, "GPT2LMHeadModel"},
    /* Llama 2/3 as Megatron trains them (docs/training.md, "The model"): RMSNorm without bias,
     * SwiGLU, rotary positions, causal, no biases (--disable-bias-linear),
     * pre-norm, untied output layer, no dropout (Megatron's Llama recipes set
     * --attention-dropout 0 --hidden-dropout 0). */
    {"llama", PL_FAMILY_LLAMA,
     {PL_NORM_RMSNORM, PL_ACT_SWIGLU, PL_POS_ROPE, PL_MASK_CAUSAL, 0, 0, 0, 0, 0},
     {1, PL_TASK_NONE, 0, 0, 0, 0, 0},
     "decoder", 1, 0.0f, 0.0f, "LlamaForCausalLM"},
    /* Megatron core's BertModel as pretrain_bert.py builds it (bert_layer_local_spec):
     * GPT's layer, bidirectional with the padding masked; token types, lm_head
     * transform, output bias, pooler and binary head (--bert-no-binary-head drops the
     * last and the token types, as Megatron's num_tokentypes = 0); tied output layer. */
    {"bert", PL_FAMILY_BERT,
     {PL_NORM_LAYERNORM, PL_ACT_GELU, PL_POS_LEARNED, PL_MASK_PADDING, 0, 1, 1, 0, 0},
     {1, PL_TASK_NONE, 0, 2, 1, 1, 1},
     "encoder", 0, 0.1f, 0.1f, "BertForPreTraining"},
    /* Megatron core's T5Model as pretrain_t5.py builds it (local spec): the encoder's
     * layer is BERT's (bidirectional, padding masked), the decoder's causal with
     * cross-attention; shared embeddings, tied output layer with a bias. The row's
     * block is the encoder's (pl_model_encdec_parts derives the decoder's). */
    {"t5", PL_FAMILY_T5,
     {PL_NORM_LAYERNORM, PL_ACT_GELU, PL_POS_LEARNED, PL_MASK_PADDING, 0, 1, 1, 0, 0},
     {1, PL_TASK_NONE, 0, 0, 0, 1, 0},
     "encoder", 0, 0.1f, 0.1f, "T5ForConditionalGeneration"},
    /* NeMo's MegatronBARTModel (megatron_bart_config.yaml; MegaMolBART v0.2 is one):
     * NeMo's token-level encoder-decoder with its defaults, which is the T5 row's
     * model: pre-LN (transformer_block_type pre_ln), GELU, learned positions, biases,
     * one embedding module for both stacks at PP 1 (share_token_embeddings), the
     * tokens head tied to the word embeddings with a bias. What differs from t5 is
     * the data: NeMo's BART denoising or MegaMolBART's SMILES (train/encdec_data.c).
     * --transformer-block-type post_ln gives Hugging Face's BART's post-LN layers,
     * layernorm_embedding and a position table per stack (model/config.h
     * pl_model_post_ln, pl_model_position_name). */
    {"bart", PL_FAMILY_BART,
     {PL_NORM_LAYERNORM, PL_ACT_GELU, PL_POS_LEARNED, PL_MASK_PADDING, 0, 1, 1, 0, 0},
     {1, PL_TASK_NONE, 0, 0, 0, 1, 0},
     "encoder", 0, 0.1f, 0.1f, "BartForConditionalGeneration"},
};

const char pl_family_names[] = "gpt|llama|bert|t5|bart";

const pl_family_spec *pl_family_find(const char *name)
{
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

const pl_family_spec *pl_family_get(pl_family f)
{
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (families[i].family == f)
            return &families[i];
    return &families[0];
}

void pl_family_apply(pl_model_config *cfg, pl_family f)
{
    const pl_family_spec *s = pl_family_get(f);
    cfg->family = f;
    cfg->block = s->block;
    cfg->head = s->head;
    cfg->untie = s->untie;
    cfg->hidden_dropout = s->hidden_dropout;
    cfg->attention_dropout = s->attention_dropout;
}
