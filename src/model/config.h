/* A model's configuration: which family (a row of model/spec.c), its sizes,
 * and how it is run. Megatron core's parameter names and layouts are used
 * exactly (decoder.layers.N...., QKV rows grouped per KV group as
 * [q heads, k, v], fc1 of SwiGLU as [gate; up], weights [out, in]).
 *
 *   GPT   (Megatron's GPTModel, learned absolute positions): word + position
 *         embeddings; L pre-LayerNorm blocks with GELU; final LayerNorm;
 *         logits = final(x) . word_embeddings^T (tied output layer).
 *   Llama (Megatron's flags --normalization RMSNorm --position-embedding-type
 *         rope --swiglu --group-query-attention --disable-bias-linear
 *         --untie-embeddings-and-output-weights): word embeddings only; L
 *         pre-RMSNorm blocks with RoPE, grouped-query attention, SwiGLU, no
 *         biases; final RMSNorm; a separate output_layer.weight. */
#ifndef PL_MODEL_CONFIG_H
#define PL_MODEL_CONFIG_H

#include "model/registry.h"
#include "nn/block.h"

/* Activation recomputation (Megatron's --recompute-granularity, --recompute-method,
 * --recompute-num-layers). Not part of the architecture: it changes what is kept
 * for backward, never a value, and is not saved in checkpoints. */
typedef enum {
    PL_RECOMPUTE_NONE = 0,
    PL_RECOMPUTE_SELECTIVE, /* core attention rerun in backward; its output not kept */
    PL_RECOMPUTE_FULL       /* whole layers rerun in backward from checkpointed inputs */
} pl_recompute_granularity;
typedef enum {
    PL_RECOMPUTE_UNIFORM = 0, /* every group of num_layers consecutive layers */
    PL_RECOMPUTE_BLOCK        /* each of the first num_layers layers; the rest keep theirs */
} pl_recompute_method;
typedef struct pl_recompute {
    pl_recompute_granularity granularity;
    pl_recompute_method method; /* full only */
    int64_t num_layers;         /* full only: 1..L */
} pl_recompute;

typedef enum pl_family { PL_FAMILY_GPT = 0, PL_FAMILY_LLAMA = 1 } pl_family;

typedef struct pl_model_config {
    pl_family family;
    int64_t num_layers;   /* L */
    int64_t hidden;       /* C */
    int64_t heads;        /* NH */
    int64_t ffn_hidden;   /* F (4C by default; SwiGLU: each half) */
    int64_t seq_length;   /* T */
    int64_t max_positions;
    int64_t vocab_size;   /* the tokenizer's (unpadded) */
    int64_t padded_vocab; /* Megatron's padding: multiple of divisible_by * tp */
    int64_t divisible_by;
    int64_t query_groups; /* G: key/value heads (heads for multi-head attention) */
    double init_std;
    float ln_eps;         /* --norm-epsilon (--layernorm-epsilon) */
    pl_block_spec block;  /* the layer's kinds (from the family's row, then flags) */
    pl_rope_config rope;  /* block.pos == PL_POS_ROPE */
    int untie;            /* a separate output layer (Megatron's output_layer.weight) */
    float hidden_dropout, attention_dropout;
    /* How to run it (not saved in checkpoints): keep the LM head's logits
     * (N x V floats) from forward to backward instead of recomputing them. */
    int keep_logits;
    int sequence_parallel;  /* Megatron's --sequence-parallel (with TP > 1) */
    /* Pipeline stages' layers (Megatron's --decoder-first-pipeline-num-layers and
     * --decoder-last-pipeline-num-layers): 0 = an even share */
    int64_t pp_first_layers, pp_last_layers;
    /* Model chunks per pipeline rank (Megatron's --virtual-pipeline-model-parallel-size;
     * 0 or 1: one): chunk k of rank r is virtual stage k P + r of P v */
    int64_t pp_chunks;
    pl_recompute recompute; /* zero: keep every activation backward needs */
} pl_model_config;

/* Megatron's vocab padding (megatron/training/tokenizer vocab_utils): the
 * smallest multiple of divisible_by * tp that is >= vocab_size. */
int64_t pl_model_padded_vocab(int64_t vocab_size, int64_t divisible_by, int64_t tp);

/* The split, weight decay, initialisation and global shape of the layer
 * parameter at `field` (offsetof in pl_block_weights) of layer `layer`, named
 * name, owned by pipeline stage `stage`, at TP size tp. */
pl_param_spec pl_model_layer_param(const pl_model_config *c, size_t field, const char *name,
                                   int stage, int layer, int tp);

/* Refuses, before anything is built, a model whose size cannot be counted in int64, whose
 * parameter table would exceed PL_REGISTRY_MAX entries, or whose table plus the state of
 * this rank's share of the parameters (the model over tp x pp, bytes_per_param bytes each:
 * 16 for fp32 parameters, gradients and Adam moments; less where ZeRO shards them; 0 to
 * check the table alone) exceeds the machine's physical memory. A lower bound
 * (activations are not counted), so a model it passes may still not fit. The error names
 * the flags and the figures. */
pl_status pl_model_check_size(const pl_model_config *cfg, int tp, int pp, double bytes_per_param);

/* Registers every parameter of cfg for a rank of the TP/PP layout already set
 * in r (stage of layer l: l / (L / pp)). Checks the size first
 * (pl_model_check_size, the table alone). Errors name the flag that makes a
 * split impossible (heads, groups or F not divisible by TP, layers by PP). */
pl_status pl_model_register(pl_registry *r, const pl_model_config *cfg, int pp_size);

/* The layers [*l0, *l0 + *nl) of pipeline stage `stage` of pp_size: the first and last
 * stages' counts as cfg says (0: an even share), the stages between share the rest
 * evenly. Errors name the flags when the layers cannot be split so, or a stage would
 * be empty. */
pl_status pl_model_stage_layers(const pl_model_config *cfg, int pp_size, int stage, int64_t *l0,
                                int64_t *nl);

/* With model chunks (cfg->pp_chunks = v > 1, Megatron's interleaving): the layers
 * [*l0, *l0 + *nl) of chunk k of pipeline rank `stage`, virtual stage s = k P + stage,
 * which holds layers [s L/(P v), (s+1) L/(P v)). With v <= 1, chunk 0 is the stage's
 * layers. Errors name the flags when L does not divide by P v, or with uneven stages. */
pl_status pl_model_chunk_layers(const pl_model_config *cfg, int pp_size, int stage, int chunk,
                                int64_t *l0, int64_t *nl);

/* The pipeline rank that holds layer l. */
int pl_model_layer_stage(const pl_model_config *cfg, int pp_size, int64_t l);

/* The layer sizes of cfg. */
pl_block_dims pl_model_block_dims(const pl_model_config *cfg);

/* Parameter count of the unpadded global model (what papers report). */
int64_t pl_model_num_params(const pl_model_config *cfg);
/* Training FLOPs per token: 6 N + 12 L C T (attention), with the LM head in N
 * (counted with the padded vocabulary rows that are actually multiplied). */
double pl_model_flops_per_token(const pl_model_config *cfg);

#endif
