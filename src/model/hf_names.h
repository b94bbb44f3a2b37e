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
    PL_HF_XK, /* T5's EncDecAttention k and v: the halves of each head's rows of linear_kv */
    PL_HF_XV,
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
 * and pl_hf_source_index of --model t5 (its XK, XV and T5_VOCAB transforms). */
int pl_hf_t5_map(const pl_model_config *c, const pl_param *p, pl_hf_tensor out[PL_HF_MAX_PER_PARAM]);
int64_t pl_hf_t5_source_index(const pl_model_config *c, const pl_param *p, const pl_hf_tensor *t,
                              int64_t i);

/* Where element i (row-major) of Hugging Face tensor t comes from: its
 * row-major index in the global plait tensor p. */
int64_t pl_hf_source_index(const pl_model_config *c, const pl_param *p, const pl_hf_tensor *t,
                           int64_t i);

#endif
