/* GPT-2-style model configuration and its parameter table.
 *
 * Architecture (Megatron's GPTModel with learned absolute positions):
 * word + position embeddings; L pre-LayerNorm blocks
 *   x += proj(attn(qkv(ln1(x))));  x += fc2(gelu(fc1(ln2(x))));
 * final LayerNorm; logits = ln_f(x) . word_embeddings^T (tied output layer).
 * Parameter names are Megatron core's (decoder.layers.N....), whose layouts
 * plait uses exactly (QKV rows interleaved per head as [q, k, v]). */
#ifndef PL_MODEL_CONFIG_H
#define PL_MODEL_CONFIG_H

#include "model/registry.h"

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

typedef struct pl_model_config {
    int64_t num_layers;   /* L */
    int64_t hidden;       /* C */
    int64_t heads;        /* NH */
    int64_t ffn_hidden;   /* F (4C by default) */
    int64_t seq_length;   /* T */
    int64_t max_positions;
    int64_t vocab_size;   /* the tokenizer's (unpadded) */
    int64_t padded_vocab; /* Megatron's padding: multiple of divisible_by * tp */
    int64_t divisible_by;
    double init_std;
    float ln_eps;
    /* How to run it (not saved in checkpoints): keep the LM head's logits
     * (N x V floats) from forward to backward instead of recomputing them. */
    int keep_logits;
    pl_recompute recompute; /* zero: keep every activation backward needs */
} pl_model_config;

/* Megatron's vocab padding (megatron/training/tokenizer vocab_utils): the
 * smallest multiple of divisible_by * tp that is >= vocab_size. */
int64_t pl_model_padded_vocab(int64_t vocab_size, int64_t divisible_by, int64_t tp);

/* Registers every parameter of cfg for a rank of the TP/PP layout already set
 * in r (stage of layer l: l / (L / pp)). Errors name the flag that makes a
 * split impossible (heads or F not divisible by TP, layers by PP). */
pl_status pl_model_register(pl_registry *r, const pl_model_config *cfg, int pp_size);

/* Parameter count of the unpadded global model (what papers report). */
int64_t pl_model_num_params(const pl_model_config *cfg);
/* Training FLOPs per token: 6 N + 12 L C T (attention), with the LM head in N
 * (counted with the padded vocabulary rows that are actually multiplied). */
double pl_model_flops_per_token(const pl_model_config *cfg);

#endif
