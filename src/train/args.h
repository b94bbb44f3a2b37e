/* The flags of `plait train` (and `plait bench`), with Megatron-LM's names,
 * defaults and meanings (megatron/training/arguments.py), declared once in a
 * table from which parsing, validation and --help come.
 *
 * A preset file (--config FILE.json: {"num-layers": 12, "lr": 6e-4, ...}, keys
 * with '-' or '_') supplies values for flags not given on the command line. */
#ifndef PL_TRAIN_ARGS_H
#define PL_TRAIN_ARGS_H

#include "base/options.h"

#include <stddef.h>
#include <stdint.h>

/* Megatron v1's and the DeepSpeed-era (Megatron-DeepSpeed, DeepSpeedExamples)
 * flags, kept apart: train/args_legacy.c maps each onto plait's flags or notes
 * in one line what plait does instead (docs/flags.md). */
typedef struct pl_train_legacy_args {
    int64_t batch_size, gas, checkpoint_num_layers, pipe_parallel_size, local_rank;
    int64_t zero_reduce_bucket_size, zero_allgather_bucket_size, num_workers;
    double warmup, min_scale;
    int checkpoint_activations, distribute_checkpointed_activations;
    int deepspeed, deepspeed_mpi, deepspeed_activation_checkpointing;
    int partition_activations, checkpoint_in_cpu, contiguous_checkpointing;
    int contigious_checkpointing, synchronize_each_layer, profile_backward;
    int zero_reduce_scatter, zero_contigious_gradients;
    int use_flash_attn, use_flash_attn_v2, use_flash_attn_triton;
    int fp32_allreduce, attention_softmax_in_fp32, apply_query_key_layer_scaling;
    int scaled_upper_triang_masked_softmax_fusion, scaled_masked_softmax_fusion;
    int bias_gelu_fusion, bias_dropout_fusion, mmap_warmup, cpu_optimizer;
    int no_pipeline_parallel, no_async_tp_allreduce, no_query_key_layer_scaling;
    int log_timers_tb, log_batch_size_tb, log_validation_ppl_tb, log_optimizer_states_tb;
    int64_t tensorboard_queue_size, num_key_value_heads;
    const char *data_impl, *distributed_backend, *ddp_impl, *tensorboard_dir;
    const char *wandb_project, *wandb_exp_name, *wandb_save_dir;
} pl_train_legacy_args;

typedef struct pl_train_args {
    /* model */
    const char *model;
    int64_t num_layers, hidden_size, num_attention_heads, ffn_hidden_size;
    int64_t seq_length, max_position_embeddings, make_vocab_size_divisible_by, vocab_size;
    int64_t decoder_num_layers, decoder_seq_length; /* t5: 0 when not given (train/encdec_args.c) */
    int64_t pipeline_model_parallel_split_rank;      /* t5, bart pipelined: the decoder's first
                                                      * stage (encdec_args.c) */
    int64_t encoder_pipeline_model_parallel_size;    /* Megatron core's: the encoder's stages,
                                                      * beside the decoder's */
    double init_method_std, hidden_dropout, attention_dropout, layernorm_epsilon;
    const char *lm_head_logits; /* recompute|keep */
    /* architecture flags (NULL / 0 when not given: the --model family's default) */
    const char *normalization, *position_embedding_type;
    int use_rotary_position_embeddings, use_rope_scaling, swiglu, group_query_attention;
    int untie, disable_bias_linear, bert_no_binary_head;
    int res_post_norm; /* --apply-residual-connection-post-layernorm */
    /* transformers' T5 layer (train/t5_args.c) */
    int64_t rel_buckets, rel_max_distance;
    double softmax_scale, output_scale;
    const char *ffn_activation;
    int64_t kv_channels;
    const char *transformer_block_type; /* pre_ln | post_ln (NeMo's; NULL: pre_ln) */
    int scale_embedding; /* --scale-embedding: a post-LN BART's token embeddings x sqrt(hidden) */
    double mask_prob, short_seq_prob; /* BERT's dataset */
    /* MegaMolBART's model.data switches (train/mmb_args.c): "true", "false" or
     * NULL (v0.2's default); --span-lambda 0 when not given */
    const char *mmb_switch[5];
    double span_lambda;
    double rotary_base, rotary_percent, rope_scaling_factor;
    int64_t num_query_groups;
    /* parallelism */
    int64_t tensor_model_parallel_size, pipeline_model_parallel_size;
    int64_t model_parallel_size, tensor_model_parallel_size_a4s; /* aliases of the TP size */
    int64_t pipeline_model_parallel_size_a4s;                   /* alias of the PP size */
    const char *pipeline_schedule; /* NULL: Megatron's choice (parallel/pp/schedule.h) */
    int64_t decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers; /* 0: even */
    /* interleaving: layers per model chunk, or chunks per rank (current Megatron's, and the
     * older --virtual-pipeline-model-parallel-size); resolved into pp_chunks (1: none) */
    int64_t num_layers_per_virtual_pipeline_stage, num_virtual_stages_per_pipeline_rank;
    int64_t virtual_pipeline_model_parallel_size, pp_chunks;
    int sequence_parallel;         /* Megatron's --sequence-parallel (needs TP > 1) */
    int tp_comm_overlap;           /* input-gradient TP reductions beside the weight GEMMs */
    /* activation recomputation: --recompute-activations sets granularity "selective" */
    int recompute_activations;
    const char *recompute_granularity, *recompute_method; /* NULL: none */
    int64_t recompute_num_layers;
    int64_t zero_stage;            /* resolved from every source below (0..3) */
    int use_distributed_optimizer; /* Megatron's name for stage 1 */
    const char *strategy;          /* DDP|Zero1|Zero2|Zero3 */
    const char *deepspeed_config;  /* DeepSpeed JSON (see train/ds_config.h) */
    int64_t ddp_bucket_size;       /* elements per DP gradient bucket (0: one bucket) */
    int64_t zero3_prefetch;        /* ZeRO-3: gather the next layer ahead (1) or not (0) */
    /* DeepSpeed batch keys (-1 when absent), resolved against the DP size at start */
    int64_t ds_train_batch, ds_micro_batch, ds_grad_accum;
    void *ds_json;                 /* the parsed DeepSpeed config; owns its strings */
    struct {                       /* its scheduler, as DeepSpeed runs it (optim/schedule.h) */
        int style;                 /* a PL_LR_DS_* style; 0: none */
        int64_t warmup, total;     /* optimizer steps: max(2, warmup_num_steps), total_num_steps;
                                      OneCycle: the first half, the whole cycle */
        double init_lr, max_lr, min_lr;
        double decay_lr_rate, decay_mom_rate, min_mom, max_mom; /* OneCycle */
        int64_t decay_step_size;
        int cycle_momentum;
        double step_rate;          /* LRRangeTest (warmup: its step_size) */
        int staircase;
    } ds_sched;
    int64_t ds_steps_per_print;    /* DeepSpeed's throughput line every N steps (0: none) */
    char ds_values[24][40];        /* values the DeepSpeed config set, as flag text */
    /* mixed precision (Megatron's flags; docs/precision.md) */
    int bf16, fp16;
    double loss_scale, initial_loss_scale, min_loss_scale;
    int64_t loss_scale_window, hysteresis;
    /* batch and iterations */
    int64_t micro_batch_size, global_batch_size, train_iters, train_samples;
    int64_t eval_interval, eval_iters, log_interval, exit_interval, max_skipped_steps;
    int skip_train; /* evaluate the loaded model only (Megatron's --skip-train) */
    double exit_duration_in_mins;
    int exit_signal_handler;
    double distributed_timeout_minutes; /* the collective watchdog (parallel/watchdog.h) */
    /* optimizer and schedule */
    const char *optimizer;
    struct {                       /* a DeepSpeed config's "type": "Lamb" (optim/lamb.h) */
        int on, eps_inside_sqrt, bias_correction;
        double max_coeff, min_coeff;
    } lamb;
    double lr, min_lr, lr_warmup_init, lr_warmup_fraction, weight_decay;
    double adam_beta1, adam_beta2, adam_eps, clip_grad;
    const char *lr_decay_style;
    int64_t lr_decay_iters, lr_decay_samples, lr_warmup_iters, lr_warmup_samples;
    /* data */
    pl_strlist data_path;
    const char *split, *data_cache_path, *tokenizer_type, *vocab_file, *merge_file;
    const char *tokenizer_model;
    int64_t vocab_extra_ids;
    int legacy_tokenizer;
    int eod_mask_loss, mock_data;
    int64_t seed;
    /* checkpoints and logging */
    const char *save, *load, *metrics_file, *config;
    int64_t save_interval;
    int64_t keep_last_n;           /* --keep-last-n (0: keep every checkpoint) */
    /* TensorBoard (the directory is legacy.tensorboard_dir; train/tensorboard.c) */
    int64_t tensorboard_log_interval;
    int no_log_loss_scale_tb, log_memory_tb, log_world_size_tb, log_params_norm;
    int log_num_zeros_in_grad;
    int no_load_optim, no_load_rng, finetune, async_save;
    int64_t ckpt_step;             /* --ckpt-step (given: pl_train_args_given) */
    int override_sched, use_ckpt_sched; /* Megatron's --override-opt_param-scheduler and
                                         * --use-checkpoint-opt_param-scheduler */
    int use_checkpoint_args;  /* Megatron's --use-checkpoint-args (train/ckpt_args.c) */
    char *ckpt_args_strings;  /* the checkpoint's strings the flags point into (pl_free) */
    void *preset; /* the parsed --config file (cJSON); owns the preset's strings */
    /* NeMo-style YAML (train/args_yaml.c): --config-file, or --config-path + --config-name */
    const char *config_file, *config_path, *config_name;
    void *yaml;   /* the flattened YAML document; owns the strings it gave the flags */
    int bench;    /* set by `plait bench`: report the step breakdown and a JSON summary */
    pl_train_legacy_args legacy;
    /* one line per accepted flag or DeepSpeed key that plait maps differently or
     * does not apply, printed by rank 0 at start (pl_train_args_notes) */
    char *notes;
    size_t notes_len;
    /* what the user actually gave (index by pl_options_index), config included */
    unsigned char given[256];
} pl_train_args;

extern const pl_command_spec pl_train_cmd;

/* args_preset.c: --config FILE's entries into a for the flags whose cli_given[option
 * index] is 0 (the command line wins); a keeps the parsed JSON (a->preset). */
pl_status pl_train_args_apply_preset(pl_train_args *a, unsigned char *cli_given);

/* Parses argv (and --config), then validates. Errors name the flag and say
 * what was expected. pl_train_args_free releases lists and the preset. */
pl_status pl_train_args_parse(pl_train_args *a, int argc, char **argv);
void pl_train_args_free(pl_train_args *a);

/* DeepSpeed's batch rule with dp = the data-parallel size: fills *mbs and *gbs
 * from --micro-batch-size/--global-batch-size and the config's
 * train_batch_size == train_micro_batch_size_per_gpu * gradient_accumulation_steps * dp,
 * deriving the missing one; an error names the keys that disagree. */
pl_status pl_train_args_batch(const pl_train_args *a, int64_t dp, int64_t *mbs, int64_t *gbs);

/* Was flag `name` ("--lr") given on the command line or in the preset? */
int pl_train_args_given(const pl_train_args *a, const char *name);

/* Appends one line to the notes (what plait does instead of a flag or key). */
pl_status pl_train_args_note(pl_train_args *a, const char *fmt, ...) PL_PRINTF(2, 3);

/* Applies the NeMo-style YAML config of --config-file or --config-path/--config-name
 * (train/args_yaml.c; nothing without one) and Hydra's overrides ("model.num_layers=4")
 * to the flags not in cli (the command line's); a->yaml owns what it read (freed by
 * pl_train_yaml_free). Unknown keys become notes. */
pl_status pl_train_args_yaml(pl_train_args *a, char **overrides, int n_overrides,
                             const unsigned char *cli);
/* Splits argv into *args (for the option parser) and *overrides (Hydra's key=value,
 * only when --config-file/--config-name is among them); both pl_malloc'd arrays of
 * argv's strings, *overrides freed by the caller. */
pl_status pl_train_yaml_split(int argc, char **argv, char ***args, int *n_args,
                              char ***overrides, int *n_overrides);
void pl_train_yaml_free(void *yaml);

/* --use-checkpoint-args (train/ckpt_args.c): the model-shape flags read from the
 * manifest of --load (its latest iteration, or --ckpt-step), applied as Megatron's
 * load_args_from_checkpoint applies them; called by pl_train_args_parse before
 * validation. Nothing without --use-checkpoint-args. */
pl_status pl_train_args_from_checkpoint(pl_train_args *a);

/* Maps the legacy flags onto plait's (train/args_legacy.c); called by
 * pl_train_args_parse after the preset and before the DeepSpeed config. */
pl_status pl_train_args_legacy(pl_train_args *a);

/* Megatron's encoder-decoder flags (pretrain_t5.py), rows of the option table:
 * --encoder-num-layers and --encoder-seq-length are --num-layers and
 * --seq-length under their T5 names (Megatron takes one or the other). */
#define PL_TRAIN_ENCDEC_OPTIONS                                                                    \
    {"--encoder-num-layers", PL_OPT_INT, NULL, offsetof(pl_train_args, num_layers),                \
     "t5, bart: the encoder's layers (= --num-layers)", NULL, 0},                                  \
    {"--decoder-num-layers", PL_OPT_INT, NULL, offsetof(pl_train_args, decoder_num_layers),        \
     "t5, bart: the decoder's layers (default: the encoder's)", NULL, 0},                          \
    {"--encoder-seq-length", PL_OPT_INT, NULL, offsetof(pl_train_args, seq_length),                \
     "t5, bart: the encoder's tokens per sample (= --seq-length)", NULL, 0},                       \
    {"--decoder-seq-length", PL_OPT_INT, NULL, offsetof(pl_train_args, decoder_seq_length),        \
     "t5: the decoder's tokens per sample (bart: set by its dataset)", NULL, 0},                   \
    {"--pipeline-model-parallel-split-rank", PL_OPT_INT, NULL,                                     \
     offsetof(pl_train_args, pipeline_model_parallel_split_rank),                                  \
     "t5, bart pipelined: the decoder's first stage (stages before it hold the encoder)", NULL, 0}, \
    {"--encoder-pipeline-model-parallel-size", PL_OPT_INT, NULL,                                   \
     offsetof(pl_train_args, encoder_pipeline_model_parallel_size),                                \
     "t5, bart: the encoder's pipeline stages, before --pipeline-model-parallel-size decoder "      \
     "stages (Megatron core 0.9)", NULL, 0},
/* MegaMolBART's model.data switches (megamolbart_pretrain_base.yaml's keys),
 * for --model bart with --tokenizer-type SmilesTokenizer (train/mmb_args.c). */
#define PL_MMB_SWITCH_OPTION(flag, i, help)                                                        \
    {flag, PL_OPT_CHOICE, NULL, offsetof(pl_train_args, mmb_switch) + (i) * sizeof(const char *), \
     help, "true|false", 0},
#define PL_TRAIN_MMB_OPTIONS                                                                       \
    PL_MMB_SWITCH_OPTION("--encoder-augment", 0, "MegaMolBART: the encoder's SMILES in a random "  \
                         "atom order (default true)")                                              \
    PL_MMB_SWITCH_OPTION("--encoder-mask", 1, "MegaMolBART: span-mask the encoder's tokens "       \
                         "(default true)")                                                         \
    PL_MMB_SWITCH_OPTION("--decoder-augment", 2, "MegaMolBART: the decoder's SMILES in another "   \
                         "random atom order (default true; false: the encoder's SMILES)")          \
    PL_MMB_SWITCH_OPTION("--decoder-mask", 3, "MegaMolBART: span-mask the decoder's tokens "       \
                         "(default false)")                                                        \
    PL_MMB_SWITCH_OPTION("--canonicalize-input", 4, "MegaMolBART: recorded; changes no sample "    \
                         "(v0.2.0's sets only its validation target)")                             \
    {"--span-lambda", PL_OPT_FLOAT, NULL, offsetof(pl_train_args, span_lambda),                    \
     "MegaMolBART: the Poisson mean of a masked span's length (default 3)", NULL, 0},
/* transformers' T5 layer: Megatron's relative position flags, the scores' scale
 * (Megatron's TransformerConfig.softmax_scale), T5's MLP activations and the
 * tied output layer's input scale (train/t5_args.c). */
#define PL_TRAIN_T5_OPTIONS                                                                        \
    {"--relative-attention-num-buckets", PL_OPT_INT, "32", offsetof(pl_train_args, rel_buckets),   \
     "--position-embedding-type relative: rows of each stack's bias table", NULL, 0},              \
    {"--relative-attention-max-distance", PL_OPT_INT, "128",                                       \
     offsetof(pl_train_args, rel_max_distance),                                                    \
     "--position-embedding-type relative: distances from here share the last bucket", NULL, 0},    \
    {"--softmax-scale", PL_OPT_FLOAT, NULL, offsetof(pl_train_args, softmax_scale),                \
     "the attention scores' scale (default 1/sqrt(head size); transformers' T5: 1)", NULL, 0},     \
    {"--ffn-activation", PL_OPT_CHOICE, NULL, offsetof(pl_train_args, ffn_activation),             \
     "the MLP's activation: relu (T5 v1.0), geglu (T5 v1.1 / flan-t5 gated-gelu), gelu, swiglu "   \
     "(= --swiglu)", "gelu|relu|geglu|swiglu", 0},                                                 \
    {"--output-layer-input-scale", PL_OPT_FLOAT, NULL, offsetof(pl_train_args, output_scale),      \
     "multiplies the output layer's input (transformers' T5 with tied embeddings: "                \
     "hidden^-0.5)", NULL, 0},                                                                     \
    {"--kv-channels", PL_OPT_INT, NULL, offsetof(pl_train_args, kv_channels),                      \
     "the head size (default --hidden-size / --num-attention-heads; T5 v1.1 small: 64)", NULL, 0},

/* Validates and resolves those flags (train/encdec_args.c), first thing in
 * validation: the T5 names mark --num-layers / --seq-length given; one name of
 * each pair only; --decoder-seq-length required for t5, the decoder's flags
 * refused for the other families. */
pl_status pl_train_encdec_args(pl_train_args *a);

/* The MegaMolBART switches (PL_TRAIN_MMB_OPTIONS): refused unless --model bart
 * with --tokenizer-type SmilesTokenizer (train/mmb_args.c). */
pl_status pl_train_mmb_args(const pl_train_args *a);
/* --use-checkpoint-args: the checkpoint's MegaMolBART values for those of its
 * flags not given (a bart run on SMILES only). */
struct pl_ckpt_meta;
pl_status pl_train_mmb_args_from_meta(pl_train_args *a, const struct pl_ckpt_meta *m);
/* The encoder-decoder's pipeline split, once the PP size is resolved: the split
 * rank from --pipeline-model-parallel-split-rank or (Megatron core's)
 * --encoder-pipeline-model-parallel-size E, which adds E encoder stages before
 * the decoder's; refused for the other families, required for t5 and bart with
 * more than one stage, in range and dividing both stacks' layers. */
pl_status pl_train_encdec_pp_args(pl_train_args *a);

#endif
