/* Megatron-LM checkpoints in its torch format, imported without running
 * Python (plait ckpt import --format megatron):
 *
 *   DIR/latest_checkpointed_iteration.txt             N or "release"
 *   DIR/iter_000000N/mp_rank_TT[_PPP]/model_optim_rng.pt   (or DIR/release/...)
 *
 * and Megatron-DeepSpeed's, saved through DeepSpeed's engine:
 *
 *   DIR/latest                                        "global_stepN"
 *   DIR/global_stepN/mp_rank_TT_model_states.pt       "module" instead of "model"
 *
 * or through its pipeline engine (GPTModelPipe; "module" None, any PP size):
 *
 *   DIR/global_stepN/layer_NN-model_TT-model_states.pt  one layer's state dict
 *                                                       (megatron_pipe.c says which)
 *
 * and beside DeepSpeed's engine's model states, ZeRO stage 1-3 optimizer shards (unless
 * no_zero_fp32), whose fp32 weights are taken instead of the model states' bf16/fp16 copies
 * (megatron_zero.c says how); ZeRO 3's model states (placeholders) are one per DP rank:
 *
 *   DIR/global_stepN/zero_pp_rank_D_mp_rank_TT_optim_states.pt   DP rank D's partition
 *   DIR/global_stepN/zero_pp_rank_D_mp_rank_TT_model_states.pt   ZeRO 3 (D 0's read)
 *
 * Under bf16 DeepSpeed names those shards bf16_zero_pp_rank_D_mp_rank_TT_optim_states.pt; the ones
 * without zero_stage are BF16_Optimizer's, whose fp32 weights are read the same way
 * (megatron_bf16.c says how).
 *
 * Megatron-LM's --ckpt-format torch_dist (its default today): an iteration directory with
 * metadata.json, a PyTorch Distributed Checkpoint (.metadata, __R_K.distcp; megatron_dist.c
 * says what is read), whatever layout saved it.
 *
 * args with ds_sequence_parallel_fpdt (Megatron-DeepSpeed since 2024-12-04): query_key_value
 * rows in [Q; K; V] thirds per TP rank, read so (refused with key/value groups).
 *
 * Every rank file is read by the restricted torch.save reader
 * (ckpt/torch_file.h). The model comes from the first file's `args`
 * (argparse.Namespace): sizes, padded_vocab_size, make_vocab_size_divisible_by,
 * tensor/pipeline_model_parallel_size (older: model_parallel_size), swiglu,
 * normalization, position_embedding_type / use_rotary_position_embeddings,
 * apply_residual_connection_post_layernorm,
 * group_query_attention / num_query_groups, add_bias_linear /
 * disable_bias_linear, untie_embeddings_and_output_weights, norm_epsilon /
 * layernorm_epsilon, rotary_base, rotary_percent. Settings plait's GPT/Llama
 * block cannot run are refused naming the arg (virtual pipeline chunks,
 * experts, rotary_interleaved, squared_relu, BERT).
 *
 * The weights come from each file's `model`, under Megatron's legacy names
 * (language_model.embedding.word_embeddings.weight, .position_embeddings,
 * language_model.encoder|transformer.layers.N.{input_layernorm,
 * self_attention|attention.{query_key_value,dense}, post_attention_layernorm,
 * mlp.{dense_h_to_4h,dense_4h_to_h}}, .final_layernorm, language_model.output_layer,
 * word_embeddings_for_head on the last stage) or Megatron core's local names
 * (embedding..., decoder.layers.N..., decoder.final_layernorm, output_layer);
 * N is the stage's local layer. Each rank's tensors are its slices in
 * Megatron's TP layout, which is plait's: they are assembled into the whole
 * model and written as a plait release checkpoint (weights only) in the
 * layout asked for. A tensor of the wrong shape, a missing one, or one plait
 * has no place for is refused naming it and its file. The optimizer state,
 * RNG states and scheduler are not imported. */
#ifndef PL_CKPT_MEGATRON_H
#define PL_CKPT_MEGATRON_H

#include "ckpt/checkpoint.h"

typedef struct pl_megatron_import_opts {
    int tp, pp;         /* the layout to write (0: the checkpoint's) */
    int64_t vocab_size; /* the tokenizer's vocabulary (0: padded_vocab_size, every row kept) */
    int no_zero_fp32;   /* DeepSpeed: the model_states' weights even beside ZeRO shards */
} pl_megatron_import_opts;

/* path: a save directory (its latest iteration, DeepSpeed's latest tag first) or an
 * iter_NNNNNNN / release / global_stepN directory. */
pl_status pl_megatron_import(const char *path, const char *out, const pl_megatron_import_opts *o);

/* A NeMo .nemo archive of a Megatron GPT (ckpt/nemo.c): a tar (plain or gzip) of
 * model_config.yaml, whose keys are translated to Megatron's args (encoder_seq_length,
 * activation gelu / swiglu / fast-swiglu, normalization layernorm / rmsnorm, bias,
 * share_embeddings_and_output_weights, rotary_percentage, ...; transformer_block_type
 * other than pre_ln and other activations refused by name), and model_weights.ckpt or
 * mp_rank_TT[_PPP]/model_weights.ckpt (flat state dicts, "model." prefixed). The padded
 * vocabulary is the word embeddings' rows x TP. NeMo's tokenizer is not recorded. */
pl_status pl_nemo_import(const char *path, const char *out, const pl_megatron_import_opts *o);

/* plait checkpoint -> Megatron-LM torch-format checkpoint (ckpt/megatron_export.c):
 *
 *   OUT/latest_checkpointed_iteration.txt             N (or "release")
 *   OUT/iter_000000N/mp_rank_TT[_PPP]/model_optim_rng.pt   (or OUT/release/...)
 *
 * each a torch.save archive (ckpt/torch_write.h) of Megatron's dict: "args" (an
 * argparse.Namespace of the sizes and kinds the import reads, the layout, the
 * consumed samples, tokenizer_type), "checkpoint_version" 3.0, "iteration" N
 * (0 for a release), and "model": the rank's tensors under Megatron core's names
 * with the local spec (embedding.word_embeddings.weight, decoder.layers.N.
 * {input_layernorm, self_attention.linear_qkv, self_attention.linear_proj,
 * pre_mlp_layernorm, mlp.linear_fc1, mlp.linear_fc2}.{weight,bias},
 * decoder.final_layernorm, output_layer.weight; N local to the stage), in
 * Megatron's TP slices (plait's), fp32 or bf16. The optimizer, its scheduler and
 * the RNG states are NOT written: Megatron must load with --no-load-optim
 * --no-load-rng (or --finetune), except from a release, which it loads without
 * them. GPT and Llama models only; refused: a setting Megatron's args cannot
 * carry, PP not dividing the layers, TP not dividing the query groups (Megatron
 * core has no shared k/v). OUT/iter_N (or OUT/release) must not exist, nor may OUT
 * be a plait save directory: it is written as OUT/NAME.tmp and renamed; then
 * latest_checkpointed_iteration.txt is replaced. */
typedef struct pl_megatron_export_opts {
    int tp, pp;  /* the layout to write (0: the checkpoint's) */
    int bf16;    /* tensors as bf16 (nearest even), else fp32 */
    int release; /* write OUT/release (iteration 0) instead of OUT/iter_N */
} pl_megatron_export_opts;

/* Writes iteration it of the plait checkpoint dir as Megatron's checkpoint in out. */
pl_status pl_megatron_export(const char *dir, int64_t it, const char *out,
                             const pl_megatron_export_opts *o);

#endif
