/* Hugging Face names and layouts of a family's parameters: the map an export
 * to, or import from, a Hugging Face checkpoint walks (transformers'
 * GPT2LMHeadModel and LlamaForCausalLM state dicts). One plait parameter (a
 * Megatron core tensor) becomes one or more Hugging Face tensors, each with a
 * transform saying where its elements come from:
 *
 *   COPY        the same tensor; the word embeddings without Megatron's vocab
 *               padding rows (the first vocab_size rows)
 *   CONV1D      GPT-2's Conv1D stores the transpose: (in, out)
 *   QKV_CONV1D  GPT-2's c_attn: columns [q of every head | k | v], transposed,
 *               from Megatron's rows per head [q; k; v] (weight (C, 3C), bias (3C))
 *   Q, K, V     Llama's q_proj, k_proj, v_proj: the query, key and value rows of
 *               Megatron's grouped QKV (per group: its query heads, then k, then v)
 *   GATE, UP    SwiGLU's gate_proj and up_proj: the halves of linear_fc1
 *   POS2        BART's embed_positions: plait's table below 2 rows that Hugging
 *               Face's offset skips (zeros on export; dropped on import)
 *   XK, XV      BART's encoder_attn.k_proj / v_proj: the key and value rows of
 *               Megatron's cross-attention linear_kv (per head [k; v])
 *   ROW         a vector as a (1, n) matrix (BART's final_logits_bias), without
 *               Megatron's vocabulary padding
 *   TYPES0      BERT's token_type_embeddings (2, C) of a model without token types
 *               (a BertForMaskedLM): zeros on export (no element of its own:
 *               pl_hf_source_index gives -1); on import its row 0, which every
 *               token without a type adds, is folded into the position embeddings
 *               (pl_hf_bert_fold_types)
 *
 * The rotary embedding needs no permutation: Megatron core and transformers'
 * Llama both rotate the two halves of each head (rotate_half). A tied output
 * layer (GPT-2's lm_head, or the last pipeline stage's copy) has no tensor of
 * its own. */
#ifndef PL_MODEL_HF_NAMES_H
#define PL_MODEL_HF_NAMES_H

#include "model/config.h"
#include "model/registry.h"

typedef enum pl_hf_transform {
    PL_HF_COPY,
    PL_HF_CONV1D,
    PL_HF_QKV_CONV1D,
    PL_HF_Q,
    PL_HF_K,
    PL_HF_V,
    PL_HF_GATE,
    PL_HF_UP,
    PL_HF_TYPES0,
    PL_HF_POS2,
    PL_HF_XK, /* the halves of each head's rows of linear_kv: T5's EncDecAttention k and v,
               * BART's encoder_attn k_proj and v_proj */
    PL_HF_XV,
    PL_HF_ROW,
    PL_HF_T5_VOCAB, /* T5's shared / lm_head rows: the sentinels reordered (hf_t5_names.c) */
} pl_hf_transform;

enum { PL_HF_MAX_PER_PARAM = 3 };

/* One Hugging Face tensor made from a plait parameter. */
typedef struct pl_hf_tensor {
    char name[PL_PARAM_NAME_MAX];
    pl_hf_transform tf;
    int ndim;
    int64_t shape[2];
} pl_hf_tensor;

/* The Hugging Face tensors of parameter p (its global name and shape) of a
 * model of configuration c, into out: returns how many (0: none of its own, a
 * tied copy), or -1 when the family has no map for p's name. Llama's names
 * serve --model llama and a GPT with SwiGLU (a Llama whose output layer is
 * tied), GPT-2's the other GPTs. */
int pl_hf_map(const pl_model_config *c, const pl_param *p, pl_hf_tensor out[PL_HF_MAX_PER_PARAM]);

/* transformers' T5ForConditionalGeneration (model/hf_t5_names.c): pl_hf_map
 * and pl_hf_source_index of --model t5 (its T5_VOCAB transform). */
int pl_hf_t5_map(const pl_model_config *c, const pl_param *p, pl_hf_tensor out[PL_HF_MAX_PER_PARAM]);
int64_t pl_hf_t5_source_index(const pl_model_config *c, const pl_param *p, const pl_hf_tensor *t,
                              int64_t i);
/* transformers' BERT classes (model/hf_bert_names.c): BertForPreTraining,
 * BertForMaskedLM and, of a fine-tuned model, BertForSequenceClassification,
 * BertForTokenClassification, BertForQuestionAnswering, as pl_hf_map. */
int pl_hf_bert_map(const pl_model_config *c, const pl_param *p,
                   pl_hf_tensor out[PL_HF_MAX_PER_PARAM]);
/* transformers' BartForConditionalGeneration (model/hf_bart_names.c) of a post-LN
 * BART, as pl_hf_map. */
int pl_hf_bart_map(const pl_model_config *c, const pl_param *p,
                   pl_hf_tensor out[PL_HF_MAX_PER_PARAM]);
/* t's shape (t->tf set) in Hugging Face's layout, from p's. */
void pl_hf_shape(const pl_model_config *c, const pl_param *p, pl_hf_tensor *t);
/* t named name with transform tf and its shape from p (pl_hf_shape); returns 1, one
 * tensor, for the family maps' returns. */
int pl_hf_put(const pl_model_config *c, const pl_param *p, pl_hf_tensor *t, const char *name,
              pl_hf_transform tf);
/* Import of element i (value v) of a TYPES0 tensor into the position embeddings
 * pos (max_positions x C): row 0 added to every position; returns 1 when v is a
 * nonzero element of another row (a token type plait's model cannot take). */
int pl_hf_bert_fold_types(const pl_model_config *c, int64_t i, float v, float *pos);

/* Where element i (row-major) of Hugging Face tensor t comes from: its
 * row-major index in the global plait tensor p (-1: none, a TYPES0 or POS2 zero). */
int64_t pl_hf_source_index(const pl_model_config *c, const pl_param *p, const pl_hf_tensor *t,
                           int64_t i);

#endif
