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
 *         biases; final RMSNorm; a separate output_layer.weight.
 *   BERT  (Megatron core's BertModel, pretrain_bert.py): word, position and
 *         token-type embeddings; L pre-LayerNorm blocks with GELU, bidirectional
 *         with the padding masked; final LayerNorm; lm_head (dense, GELU,
 *         LayerNorm), then logits = . word_embeddings^T + output_layer.bias;
 *         pooler and binary (sentence-order) head on position 0. Its layers are
 *         named encoder.layers.N..., its final norm encoder.final_layernorm.
 *   T5    (Megatron core's T5Model, pretrain_t5.py): word and learned position
 *         embeddings shared by both stacks; an encoder of L pre-LayerNorm GELU
 *         blocks attending both ways over the source (its padding masked) and
 *         encoder.final_layernorm; a decoder of dec_layers such blocks, causal,
 *         with cross-attention to the encoder output, and decoder.final_layernorm;
 *         logits = . word_embeddings^T + lm_head.output_layer.bias. */
#ifndef PL_MODEL_CONFIG_H
#define PL_MODEL_CONFIG_H

#include "model/registry.h"
#include "nn/block.h"
#include "nn/head.h"

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

typedef enum pl_family {
    PL_FAMILY_GPT = 0,
    PL_FAMILY_LLAMA = 1,
    PL_FAMILY_BERT = 2,
    PL_FAMILY_T5 = 3,
    PL_FAMILY_BART = 4 /* NeMo's Megatron BART: T5's model (model/spec.c) */
} pl_family;

/* Which stack of an encoder-decoder model a configuration describes: the
 * whole model (registration, checkpoints) or the one a pl_model runs. */
typedef enum pl_part { PL_PART_WHOLE = 0, PL_PART_ENCODER, PL_PART_DECODER } pl_part;

/* What a family has around its layers besides the word (and position)
 * embeddings, the final norm and the output layer: Megatron core's BertModel
 * has all four (nn/head.h). */
/* A fine-tuning task's head (nn/head.h), replacing the pretraining heads. */
typedef enum pl_task {
    PL_TASK_NONE = 0,
    PL_TASK_SEQUENCE, /* text classification: pooler + classification_head (Megatron's) */
    PL_TASK_TOKEN,    /* token classification: classifier.mlp.layer0 (NeMo's TokenClassifier) */
    PL_TASK_SPAN,     /* extractive QA: start and end logits, classifier.mlp.layer0 (2 rows) */
    PL_TASK_REGRESSION /* one value: pooler + classification_head with 1 row, mean squared
                        * error (Megatron's Classification with num_classes 1; NeMo's STS-B) */
} pl_task;

/* The tasks whose head is the pooler and classification_head. */
#define PL_TASK_POOLED(t) ((t) == PL_TASK_SEQUENCE || (t) == PL_TASK_REGRESSION)

typedef struct pl_head_spec {
    int lm_head;      /* the output layer over the vocabulary and its cross-entropy */
    pl_task task;     /* a fine-tuning head instead (lm_head, binary_head, lm_transform 0) */
    int64_t classes;  /* the task's classes (sequence, token) */
    int tokentypes;   /* rows of embedding.tokentype_embeddings (Megatron's num_tokentypes:
                       * 2 with the binary head, else 0: none) */
    int lm_transform; /* lm_head: dense (C x C) + GELU (erf) + LayerNorm before the output layer */
    int output_bias;  /* output_layer.bias (vocab-parallel) */
    int binary_head;  /* pooler (dense + tanh at position 0) and binary_head (2 logits) */
} pl_head_spec;

/* The LM head's logits between forward and backward: recomputed chunk by
 * chunk (four GEMMs), kept whole (N x V floats), or fused (the gradient formed
 * in the forward, block of rows by block: three GEMMs, rows x V floats). */
typedef enum pl_lm_logits {
    PL_LM_LOGITS_RECOMPUTE = 0,
    PL_LM_LOGITS_KEEP,
    PL_LM_LOGITS_FUSED
} pl_lm_logits;

typedef struct pl_model_config {
    pl_family family;
    int64_t num_layers;   /* L (an encoder-decoder: the encoder's) */
    int64_t dec_layers;   /* an encoder-decoder's decoder layers */
    int64_t dec_seq_length; /* an encoder-decoder's decoder positions (seq_length: the encoder's) */
    pl_part part;         /* an encoder-decoder's stack this describes (pl_model_encdec_parts) */
    int64_t cross_length; /* a decoder part: its cross-attention's keys per sample (seq_length
                           * of the encoder) */
    int64_t hidden;       /* C */
    int64_t heads;        /* NH */
    int64_t ffn_hidden;   /* F (4C by default; SwiGLU: each half) */
    int64_t seq_length;   /* T */
    int64_t max_positions;
    int64_t vocab_size;   /* the tokenizer's (unpadded) */
    int64_t padded_vocab; /* Megatron's padding: multiple of divisible_by * tp */
    int64_t divisible_by;
    /* Hugging Face T5 export/import only (ckpt/hf_t5.c, not in the manifest): the legacy
     * SentencePieceTokenizer's vocabulary is the pieces, t5_specials added tokens (<CLS> ...),
     * then t5_sentinels <extra_id_i>; T5Tokenizer numbers the sentinels right after the pieces,
     * in reverse (model/hf_t5_names.c permutes the vocabulary rows). 0: no permutation. */
    int64_t t5_sentinels, t5_specials;
    int64_t query_groups; /* G: key/value heads (heads for multi-head attention) */
    double init_std;
    float ln_eps;         /* --norm-epsilon (--layernorm-epsilon) */
    pl_block_spec block;  /* the layer's kinds (from the family's row, then flags) */
    pl_head_spec head;    /* around the layers (from the family's row, then flags) */
    pl_rope_config rope;  /* block.pos == PL_POS_ROPE */
    /* block.pos == PL_POS_RELATIVE (Megatron's --relative-attention-num-buckets and
     * --relative-attention-max-distance): a table per stack, nn/relbias.h */
    int64_t rel_buckets, rel_max_distance;
    float softmax_scale;  /* --softmax-scale: the attention scores' scale; 0: 1/sqrt(head size) */
    int64_t kv_channels;  /* --kv-channels: the head size; 0: hidden / heads (T5 v1.1 small:
                           * 64 for 6 heads of a 512 model) */
    float output_scale;   /* the output layer's input times this; 0: 1 (transformers' T5 with
                           * tied embeddings: hidden^-0.5) */
    int untie;            /* a separate output layer (Megatron's output_layer.weight) */
    int scale_embedding;  /* a post-LN BART's token embeddings times sqrt(hidden) before the
                           * positions are added (transformers' BART scale_embedding) */
    float hidden_dropout, attention_dropout;
    /* How to run it (not saved in checkpoints): a fine-tuning task head's input
     * dropout (plait finetune's --fc-dropout; nn/head.h), the LM head's logits
     * (--lm-head-logits, docs/training.md). */
    float head_dropout;
    pl_lm_logits lm_logits;
    int64_t lm_rows;        /* rows per block of the fused LM head; 0: about 32 MiB of logits */
    int sequence_parallel;  /* Megatron's --sequence-parallel (with TP > 1) */
    /* Pipeline stages' layers (Megatron's --decoder-first-pipeline-num-layers and
     * --decoder-last-pipeline-num-layers): 0 = an even share */
    int64_t pp_first_layers, pp_last_layers;
    /* Model chunks per pipeline rank (Megatron's --virtual-pipeline-model-parallel-size;
     * 0 or 1: one): chunk k of rank r is virtual stage k P + r of P v */
    int64_t pp_chunks;
    /* An encoder-decoder's pipeline split (Megatron's --pipeline-model-parallel-split-rank
     * S; 0: not pipelined): stages 0..S-1 hold the encoder, S..P-1 the decoder */
    int64_t pp_split;
    pl_recompute recompute; /* zero: keep every activation backward needs */
} pl_model_config;

/* Makes c a fine-tuning model for task with `classes` classes (2 for a span):
 * its pretraining heads (the output layer, lm transform and bias, binary head)
 * replaced by the task's head. */
void pl_model_set_task(pl_model_config *c, pl_task task, int64_t classes);
/* The heads c has, for nn/head.h. */
pl_head_set pl_model_head_set(const pl_model_config *c);

/* 1 when c is a post-LN model or stack (transformers' BERT, or a stack of its
 * BART; NeMo's transformer_block_type post_ln): post-norm layers, a LayerNorm on
 * the embeddings' output (<stack>.initial_layernorm, NeMo's name) and no final
 * norm. A whole encoder-decoder's registry holds both stacks' norms of the
 * embeddings right after the embeddings (their region). */
int pl_model_post_ln(const pl_model_config *c);

/* "decoder" or "encoder" (BERT, an encoder-decoder's encoder part): the name of
 * the stack of layers, as Megatron core names it ("decoder.layers.0....",
 * "encoder.final_layernorm.weight"). */
const char *pl_model_stack(const pl_model_config *c);
/* The position table a stack reads: embedding.position_embeddings.weight, or a
 * post-LN BART's decoder's own, decoder_embedding.position_embeddings.weight
 * (NeMo's decoder_embedding; registered with the embeddings). */
const char *pl_model_position_name(const pl_model_config *c);
/* The output layer's bias (BERT: output_layer.bias, T5: lm_head.output_layer.bias). */
const char *pl_model_output_bias_name(const pl_model_config *c);
/* An encoder-decoder's two stacks as the configurations two pl_models run:
 * enc (num_layers, seq_length, the family's block, no head: its final norm's
 * output is the decoder's cross-attention input) and dec (dec_layers,
 * dec_seq_length, causal with cross-attention to seq_length positions, the LM
 * head with the output bias). Both are laid out in the whole model's registry.
 * Both take c's recompute, its layer count capped at the stack's layers. */
void pl_model_encdec_parts(const pl_model_config *c, pl_model_config *enc, pl_model_config *dec);
/* An encoder-decoder's output bias as Megatron core's T5LMHead has it: only with
 * the output layer tied to the word embeddings (bias=share_embeddings_and_output_
 * weights), and never with transformers' tied T5 (output_scale set). */
void pl_model_encdec_output_bias(pl_model_config *c);
/* 1 when c is an encoder-decoder family (T5). */
int pl_model_is_encdec(const pl_model_config *c);
/* A pipelined encoder-decoder (c->pp_split = S, P = pp_size stages): the stack
 * stage `stage` holds, 0 the encoder (stages 0..S-1), 1 the decoder (S..P-1).
 * Its stages: [*s0, *s0 + *ns). */
int pl_model_encdec_stage_stack(const pl_model_config *c, int pp_size, int stage, int *s0,
                                int *ns);
/* The tensor a tied copy (pl_param.tied_copy) of the registry is a copy of: the
 * word embeddings for the last stage's output layer and the decoder's first
 * stage's word embeddings, the position embeddings for its position embeddings;
 * NULL for a name that is no copy's. */
const char *pl_model_tied_original(const char *copy);
/* The relative position bias table of c's stack ("encoder_relative_pos_emb.
 * relative_attention_bias.weight", Megatron core's T5Model names) into name. */
void pl_model_relpos_name(const pl_model_config *c, char *name, size_t n);

/* The final norm's weight in r: the first parameter of the last stage's tail
 * (the final norm, the output layer, the heads), which follows the layers; a
 * post-LN model (no final norm): the tail's first parameter. An
 * encoder-decoder's whole model: the decoder's (the encoder's is registered
 * right after the embeddings, before the encoder's layers). */
const pl_param *pl_model_final_norm(const pl_registry *r, const pl_model_config *c);

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
 * be empty. A pipelined encoder-decoder's part (cfg->pp_split): its stack's layers
 * shared evenly by its stages, none (*nl = 0) on the other stack's. */
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
/* Training FLOPs of one global batch of `batch` samples as Megatron counts them for
 * its "throughput per GPU (TFLOP/s/GPU)" (megatron/training/training.py
 * num_floating_point_operations, dense standard attention): per token
 * 6 C (F x (3 with SwiGLU, else 2) + Q + K + V + Q) L + 6 C V_padded, and per sample
 * 6 Q T^2 L for QK^T and PV with the causal mask's half. */
double pl_model_megatron_flops(const pl_model_config *cfg, int64_t batch);

#endif
