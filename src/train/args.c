/* The `plait train` option table and validation (--config presets: args_preset.c). */
#include "train/args.h"

#include "base/alloc.h"
#include "base/fileio.h"

#include "base/json.h"
#include "base/log.h"
#include "data/tokenizer/tokenizer.h"
#include "train/ds_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#define F(field) offsetof(pl_train_args, field)

static const pl_option train_options[] = {
    /* model */
    {"--model", PL_OPT_CHOICE, "gpt", F(model),
     "model family: its architecture flags as defaults (llama: RMSNorm, rope, SwiGLU, no biases, "
     "untied output layer, no dropout; bert: Megatron's BertModel on --split-sentences data); "
     "flags given explicitly win", "gpt|llama|bert|t5|bart", 0},
    {"--bert-no-binary-head", PL_OPT_BOOL, NULL, F(bert_no_binary_head),
     "BERT without the pooler and binary (sentence-order) head, and without token types", NULL, 0},
    {"--mask-prob", PL_OPT_FLOAT, "0.15", F(mask_prob),
     "BERT: probability of masking a token (80% [MASK], 10% random, 10% kept)", NULL, 0},
    {"--short-seq-prob", PL_OPT_FLOAT, "0.1", F(short_seq_prob),
     "BERT: probability of a sample shorter than --seq-length", NULL, 0},
    {"--num-layers", PL_OPT_INT, NULL, F(num_layers), "number of transformer layers", NULL, 0},
    {"--hidden-size", PL_OPT_INT, NULL, F(hidden_size), "transformer hidden size", NULL, 0},
    {"--num-attention-heads", PL_OPT_INT, NULL, F(num_attention_heads), "attention heads", NULL, 0},
    {"--ffn-hidden-size", PL_OPT_INT, NULL, F(ffn_hidden_size), "MLP hidden size (default 4 x hidden)", NULL, 0},
    {"--seq-length", PL_OPT_INT, NULL, F(seq_length), "tokens per sample", NULL, 0},
    PL_TRAIN_ENCDEC_OPTIONS /* --encoder-num-layers, --decoder-seq-length, ... (encdec_args.c) */
    PL_TRAIN_MMB_OPTIONS    /* --encoder-augment, ..., --span-lambda (mmb_args.c) */
    PL_TRAIN_T5_OPTIONS     /* --relative-attention-num-buckets, --softmax-scale, ... (t5_args.c) */
    {"--max-position-embeddings", PL_OPT_INT, NULL, F(max_position_embeddings),
     "position embedding rows (default --seq-length)", NULL, 0},
    {"--make-vocab-size-divisible-by", PL_OPT_INT, "128", F(make_vocab_size_divisible_by),
     "pad the vocabulary to a multiple of this times the TP size", NULL, 0},
    {"--vocab-size", PL_OPT_INT, NULL, F(vocab_size),
     "vocabulary size when no tokenizer is given (with --mock-data)", NULL, 0},
    {"--init-method-std", PL_OPT_FLOAT, "0.02", F(init_method_std),
     "std of the normal initialisation (output projections: std / sqrt(2 layers))", NULL, 0},
    {"--hidden-dropout", PL_OPT_FLOAT, "0.1", F(hidden_dropout),
     "dropout on the embeddings and after attention and MLP (--model llama: 0)", NULL, 0},
    {"--attention-dropout", PL_OPT_FLOAT, "0.1", F(attention_dropout),
     "dropout on the attention probabilities (--model llama: 0)", NULL, 0},
    {"--layernorm-epsilon", PL_OPT_FLOAT, "1e-5", F(layernorm_epsilon),
     "norm epsilon (Megatron's older name of --norm-epsilon)", NULL, 0},
    {"--norm-epsilon", PL_OPT_FLOAT, "1e-5", F(layernorm_epsilon), "LayerNorm / RMSNorm epsilon",
     NULL, 0},
    {"--normalization", PL_OPT_CHOICE, NULL, F(normalization),
     "norm of every layer and the final norm (gpt: LayerNorm, llama: RMSNorm)", "LayerNorm|RMSNorm", 0},
    {"--position-embedding-type", PL_OPT_CHOICE, NULL, F(position_embedding_type),
     "learned absolute positions, rotary embeddings or none (gpt: learned_absolute, llama: rope)",
     "learned_absolute|rope|none|relative", 0},
    {"--use-rotary-position-embeddings", PL_OPT_BOOL, NULL, F(use_rotary_position_embeddings),
     "= --position-embedding-type rope (Megatron's older flag)", NULL, 0},
    {"--rotary-base", PL_OPT_FLOAT, "10000", F(rotary_base), "RoPE base (Llama 3: 500000)", NULL, 0},
    {"--rotary-percent", PL_OPT_FLOAT, "1.0", F(rotary_percent),
     "fraction of each head's dimensions that RoPE rotates", NULL, 0},
    {"--use-rope-scaling", PL_OPT_BOOL, NULL, F(use_rope_scaling),
     "Llama 3.1's RoPE frequency scaling (low 1, high 4, original 8192 positions)", NULL, 0},
    {"--rope-scaling-factor", PL_OPT_FLOAT, "8.0", F(rope_scaling_factor),
     "Llama 3.1's RoPE scaling factor (with --use-rope-scaling)", NULL, 0},
    {"--swiglu", PL_OPT_BOOL, NULL, F(swiglu),
     "SwiGLU MLP: fc1 has 2 x --ffn-hidden-size rows [gate; up] (llama: on)", NULL, 0},
    {"--group-query-attention", PL_OPT_BOOL, NULL, F(group_query_attention),
     "grouped-query attention with --num-query-groups key/value heads", NULL, 0},
    {"--num-query-groups", PL_OPT_INT, "1", F(num_query_groups),
     "key/value heads under --group-query-attention", NULL, 0},
    {"--untie-embeddings-and-output-weights", PL_OPT_BOOL, NULL, F(untie),
     "a separate output layer instead of the word embeddings (llama: on)", NULL, 0},
    {"--disable-bias-linear", PL_OPT_BOOL, NULL, F(disable_bias_linear),
     "no biases in the linear layers (llama: on)", NULL, 0},
    {"--apply-residual-connection-post-layernorm", PL_OPT_BOOL, NULL, F(res_post_norm),
     "each residual is its norm's output, not the layer's input (the original BERT's)", NULL, 0},
    {"--scale-embedding", PL_OPT_BOOL, NULL, F(scale_embedding),
     "post_ln --model bart: token embeddings times sqrt(hidden) (transformers' scale_embedding)",
     NULL, 0},
    {"--transformer-block-type", PL_OPT_CHOICE, NULL, F(transformer_block_type),
     "NeMo's: pre_ln, or post_ln (--model bert: transformers' BERT, exact GELU; "
     "docs/training.md)", "pre_ln|post_ln", 0},
    {"--lm-head-logits", PL_OPT_CHOICE, "fused", F(lm_head_logits),
     "LM head logits: fused (the gradient formed in forward, blocks of rows), recompute them "
     "in backward chunk by chunk, or keep all (micro-batch x seq x vocab floats) from forward "
     "(plait's own flag)", "fused|recompute|keep", 0},
    /* parallelism */
    {"--tensor-model-parallel-size", PL_OPT_INT, "1", F(tensor_model_parallel_size),
     "tensor-parallel group size", NULL, 0},
    {"--model-parallel-size", PL_OPT_INT, NULL, F(model_parallel_size),
     "the tensor-parallel size under Megatron v1's and DeepSpeed's older name", NULL, 0},
    {"--tensor_model_parallel_size", PL_OPT_INT, NULL, F(tensor_model_parallel_size_a4s),
     "the tensor-parallel size under A4SFramework's name", NULL, 0},
    {"--sequence-parallel", PL_OPT_BOOL, NULL, F(sequence_parallel),
     "Megatron's sequence parallelism: norms, dropout and residuals on micro-batch x sequence / "
     "TP rows per rank (ignored, with a warning, at TP 1)", NULL, 0},
    {"--tp-comm-overlap", PL_OPT_BOOL, NULL, F(tp_comm_overlap),
     "run each column-parallel layer's input-gradient reduction on a communication thread while "
     "its weight-gradient GEMM computes", NULL, 0},
    {"--pipeline_model_parallel_size", PL_OPT_INT, NULL, F(pipeline_model_parallel_size_a4s),
     "the pipeline-parallel size under A4SFramework's name", NULL, 0},
    {"--decoder-first-pipeline-num-layers", PL_OPT_INT, "0",
     F(decoder_first_pipeline_num_layers),
     "layers of the first pipeline stage (0: an even share; the middle stages share the rest)",
     NULL, 0},
    {"--decoder-last-pipeline-num-layers", PL_OPT_INT, "0", F(decoder_last_pipeline_num_layers),
     "layers of the last pipeline stage, which also holds the LM head (0: an even share)", NULL,
     0},
    {"--pipeline-schedule", PL_OPT_CHOICE, NULL, F(pipeline_schedule),
     "pipeline schedule (plait's flag; default Megatron's: 1f1b with pipelining)",
     "1f1b|gpipe|none|interleaved|zb-h1", 0},
    {"--pipeline-model-parallel-size", PL_OPT_INT, "1", F(pipeline_model_parallel_size),
     "pipeline-parallel group size", NULL, 0},
    {"--num-layers-per-virtual-pipeline-stage", PL_OPT_INT, "0",
     F(num_layers_per_virtual_pipeline_stage),
     "interleaved pipelining: layers per model chunk (each rank holds L / P / this chunks)",
     NULL, 0},
    {"--num-virtual-stages-per-pipeline-rank", PL_OPT_INT, "0",
     F(num_virtual_stages_per_pipeline_rank),
     "interleaved pipelining: model chunks per pipeline rank", NULL, 0},
    {"--virtual-pipeline-model-parallel-size", PL_OPT_INT, "0",
     F(virtual_pipeline_model_parallel_size),
     "the same, under older Megatron's name", NULL, 0},
    {"--zero-stage", PL_OPT_INT, "0", F(zero_stage),
     "ZeRO stage: 0 DDP, 1 optimizer state, 2 + gradients, 3 + parameters sharded over DP", NULL, 0},
    {"--use-distributed-optimizer", PL_OPT_BOOL, NULL, F(use_distributed_optimizer),
     "shard the optimizer state over DP (Megatron's distributed optimizer = ZeRO stage 1)", NULL, 0},
    {"--strategy", PL_OPT_CHOICE, NULL, F(strategy),
     "A4SFramework's strategy: DDP, Single, Zero0 = ZeRO stage 0; Zero1..Zero3; Pipeline and ThreeD "
     "= stage 1 (A4S runs them on DeepSpeed ZeRO-1), with the TP and PP sizes of their own flags",
     "DDP|Single|Zero0|Zero1|Zero2|Zero3|Pipeline|ThreeD", 0},
    {"--ddp-bucket-size", PL_OPT_INT, "10000000", F(ddp_bucket_size),
     "elements per data-parallel gradient bucket, all-reduced as backward completes it "
     "(0: one bucket, reduced after backward)", NULL, 0},
    {"--zero3-prefetch", PL_OPT_INT, "1", F(zero3_prefetch),
     "ZeRO-3: gather the next layer's parameters while this layer computes (1) or not (0)",
     NULL, 0},
    {"--deepspeed_config", PL_OPT_STRING, NULL, F(deepspeed_config),
     "DeepSpeed JSON: batch sizes, zero_optimization.stage, gradient_clipping, optimizer, "
     "scheduler, bf16/fp16", NULL, 0},
    /* mixed precision */
    {"--bf16", PL_OPT_BOOL, NULL, F(bf16),
     "matrix products in bf16 with fp32 accumulation; fp32 master weights, gradients, all-reduce",
     NULL, 0},
    {"--fp16", PL_OPT_BOOL, NULL, F(fp16),
     "matrix products on fp16-rounded inputs (fp32 accumulation) with loss scaling", NULL, 0},
    {"--loss-scale", PL_OPT_FLOAT, NULL, F(loss_scale),
     "static loss scale for --fp16 (default: dynamic scaling)", NULL, 0},
    {"--initial-loss-scale", PL_OPT_FLOAT, "4294967296", F(initial_loss_scale),
     "initial dynamic loss scale (--fp16)", NULL, 0},
    {"--min-loss-scale", PL_OPT_FLOAT, "1", F(min_loss_scale), "minimum dynamic loss scale (--fp16)",
     NULL, 0},
    {"--loss-scale-window", PL_OPT_INT, "1000", F(loss_scale_window),
     "iterations without overflow before the dynamic loss scale doubles (--fp16)", NULL, 0},
    {"--hysteresis", PL_OPT_INT, "2", F(hysteresis),
     "overflows tolerated before the dynamic loss scale halves (--fp16)", NULL, 0},
    /* activation recomputation (Megatron's names and meanings) */
    {"--recompute-activations", PL_OPT_BOOL, NULL, F(recompute_activations),
     "recompute the core attention in backward (= --recompute-granularity selective)", NULL, 0},
    {"--recompute-granularity", PL_OPT_CHOICE, NULL, F(recompute_granularity),
     "full: recompute whole layers from checkpointed inputs; selective: the core attention",
     "full|selective", 0},
    {"--recompute-method", PL_OPT_CHOICE, NULL, F(recompute_method),
     "with full: uniform checkpoints every group of --recompute-num-layers layers; block "
     "recomputes the first --recompute-num-layers layers of the stage", "uniform|block", 0},
    {"--recompute-num-layers", PL_OPT_INT, NULL, F(recompute_num_layers),
     "with full: layers per group (uniform) or layers recomputed (block)", NULL, 0},
    /* batch and iterations */
    {"--micro-batch-size", PL_OPT_INT, "1", F(micro_batch_size), "samples per micro-batch per rank", NULL, 0},
    {"--global-batch-size", PL_OPT_INT, NULL, F(global_batch_size),
     "samples per iteration over all ranks (default micro-batch x data-parallel size)", NULL, 0},
    {"--train-iters", PL_OPT_INT, NULL, F(train_iters), "iterations to train", NULL, 0},
    {"--train-samples", PL_OPT_INT, NULL, F(train_samples), "samples to train (instead of --train-iters)", NULL, 0},
    {"--eval-interval", PL_OPT_INT, "1000", F(eval_interval), "iterations between evaluations", NULL, 0},
    {"--eval-iters", PL_OPT_INT, "100", F(eval_iters), "iterations per evaluation (0: none)", NULL, 0},
    {"--skip-train", PL_OPT_BOOL, NULL, F(skip_train),
     "no training: evaluate the loaded model on the validation and test splits", NULL, 0},
    {"--log-interval", PL_OPT_INT, "100", F(log_interval), "iterations between progress lines", NULL, 0},
    {"--exit-interval", PL_OPT_INT, NULL, F(exit_interval),
     "save and stop when the iteration is a multiple of this", NULL, 0},
    {"--exit-duration-in-mins", PL_OPT_FLOAT, NULL, F(exit_duration_in_mins),
     "save and stop after this many minutes of training", NULL, 0},
    {"--exit-signal-handler", PL_OPT_BOOL, NULL, F(exit_signal_handler),
     "on SIGTERM or SIGUSR1, finish the iteration, save and exit 0", NULL, 0},
    {"--max-skipped-steps", PL_OPT_INT, "10", F(max_skipped_steps),
     "stop after this many consecutive iterations with a non-finite loss or gradient", NULL, 0},
    {"--distributed-timeout-minutes", PL_OPT_FLOAT, "10", F(distributed_timeout_minutes),
     "end the job when a collective or transfer waits longer than this (fractions allowed)",
     NULL, 0},
    /* optimizer and schedule */
    {"--optimizer", PL_OPT_CHOICE, "adam", F(optimizer), "optimizer (Adam with decoupled weight decay)", "adam", 0},
    {"--lr", PL_OPT_FLOAT, NULL, F(lr), "peak learning rate", NULL, 0},
    {"--min-lr", PL_OPT_FLOAT, "0", F(min_lr), "learning rate at the end of the decay", NULL, 0},
    {"--lr-decay-style", PL_OPT_CHOICE, "linear", F(lr_decay_style), "decay shape",
     "constant|linear|cosine|inverse-square-root", 0},
    {"--lr-decay-iters", PL_OPT_INT, NULL, F(lr_decay_iters), "iterations to decay over (default --train-iters)", NULL, 0},
    {"--lr-decay-samples", PL_OPT_INT, NULL, F(lr_decay_samples), "samples to decay over (sample-based training)", NULL, 0},
    {"--lr-warmup-iters", PL_OPT_INT, "0", F(lr_warmup_iters), "iterations of linear warmup", NULL, 0},
    {"--lr-warmup-samples", PL_OPT_INT, "0", F(lr_warmup_samples), "samples of linear warmup", NULL, 0},
    {"--lr-warmup-fraction", PL_OPT_FLOAT, NULL, F(lr_warmup_fraction), "warmup as a fraction of the decay", NULL, 0},
    {"--lr-warmup-init", PL_OPT_FLOAT, "0", F(lr_warmup_init), "learning rate at the start of warmup", NULL, 0},
    {"--weight-decay", PL_OPT_FLOAT, "0.01", F(weight_decay), "decoupled weight decay (not on biases and norms)", NULL, 0},
    {"--adam-beta1", PL_OPT_FLOAT, "0.9", F(adam_beta1), "Adam beta1", NULL, 0},
    {"--adam-beta2", PL_OPT_FLOAT, "0.999", F(adam_beta2), "Adam beta2", NULL, 0},
    {"--adam-eps", PL_OPT_FLOAT, "1e-8", F(adam_eps), "Adam epsilon", NULL, 0},
    {"--clip-grad", PL_OPT_FLOAT, "1.0", F(clip_grad), "global gradient-norm clip (0: off)", NULL, 0},
    /* data */
    {"--data-path", PL_OPT_LIST, NULL, F(data_path), "dataset prefixes, optionally weighted: [W1] P1 [W2] P2 ...", NULL, 0},
    {"--split", PL_OPT_STRING, "969, 30, 1", F(split), "train, valid, test proportions", NULL, 0},
    {"--data-cache-path", PL_OPT_STRING, NULL, F(data_cache_path), "where to cache sample indices", NULL, 0},
    {"--mock-data", PL_OPT_BOOL, NULL, F(mock_data), "train on synthetic tokens (needs --vocab-size)", NULL, 0},
    {"--tokenizer-type", PL_OPT_CHOICE, NULL, F(tokenizer_type), "tokenizer", pl_tokenizer_types, 0},
    {"--vocab-file", PL_OPT_STRING, NULL, F(vocab_file), "tokenizer vocabulary file", NULL, 0},
    {"--merge-file", PL_OPT_STRING, NULL, F(merge_file), "BPE merges file", NULL, 0},
    {"--tokenizer-model", PL_OPT_STRING, NULL, F(tokenizer_model),
     "HuggingFaceTokenizer: directory with tokenizer.json; SentencePiece types: tokenizer.model", NULL, 0},
    {"--vocab-extra-ids", PL_OPT_INT, "0", F(vocab_extra_ids),
     "<extra_id_N> sentinels (BERT, legacy SentencePieceTokenizer)", NULL, 0},
    {"--legacy-tokenizer", PL_OPT_BOOL, NULL, F(legacy_tokenizer),
     "Megatron's legacy tokenizer classes (SentencePiece types differ)", NULL, 0},
    {"--eod-mask-loss", PL_OPT_BOOL, NULL, F(eod_mask_loss), "no loss on end-of-document targets", NULL, 0},
    {"--seed", PL_OPT_INT, "1234", F(seed), "random seed (initialisation, data order)", NULL, 0},
    /* checkpoints and logging */
    {"--save", PL_OPT_STRING, NULL, F(save), "checkpoint directory to write", NULL, 0},
    {"--load", PL_OPT_STRING, NULL, F(load), "checkpoint directory to resume from", NULL, 0},
    {"--save-interval", PL_OPT_INT, NULL, F(save_interval), "iterations between checkpoints", NULL, 0},
    {"--keep-last-n", PL_OPT_INT, "0", F(keep_last_n),
     "keep only the newest N checkpoints of --save (0: all)", NULL, 0},
    {"--async-save", PL_OPT_BOOL, NULL, F(async_save),
     "write checkpoints from a background thread while training goes on", NULL, 0},
    {"--no-load-optim", PL_OPT_BOOL, NULL, F(no_load_optim), "do not load optimizer state", NULL, 0},
    {"--no-load-rng", PL_OPT_BOOL, NULL, F(no_load_rng), "do not load RNG state", NULL, 0},
    {"--finetune", PL_OPT_BOOL, NULL, F(finetune), "load weights only and start at iteration 0", NULL, 0},
    {"--ckpt-step", PL_OPT_INT, NULL, F(ckpt_step), "iteration of --load to load (not the latest)", NULL, 0},
    {"--override-opt_param-scheduler", PL_OPT_BOOL, NULL, F(override_sched),
     "resume with this run's LR schedule flags, not the checkpoint's", NULL, 0},
    {"--use-checkpoint-opt_param-scheduler", PL_OPT_BOOL, NULL, F(use_ckpt_sched),
     "resume with the checkpoint's LR schedule, not this run's flags", NULL, 0},
    {"--override-lr-scheduler", PL_OPT_BOOL, NULL, F(override_sched),
     "Megatron's older name of --override-opt_param-scheduler", NULL, 0},
    {"--use-checkpoint-lr-scheduler", PL_OPT_BOOL, NULL, F(use_ckpt_sched),
     "Megatron's older name of --use-checkpoint-opt_param-scheduler", NULL, 0},
    {"--use-checkpoint-args", PL_OPT_BOOL, NULL, F(use_checkpoint_args),
     "the model's shape and architecture from --load's checkpoint (Megatron's rules)", NULL, 0},
    {"--metrics-file", PL_OPT_STRING, NULL, F(metrics_file),
     "JSON-lines metrics (default SAVE/metrics.jsonl)", NULL, 0},
    {"--config", PL_OPT_STRING, NULL, F(config), "JSON preset of flags (command-line flags win)", NULL, 0},
    {"--config-file", PL_OPT_STRING, NULL, F(config_file),
     "NeMo-style YAML config (trainer.*, model.*; key=value overrides after it; command-line "
     "flags win)", NULL, 0},
    {"--config-path", PL_OPT_STRING, NULL, F(config_path), "Hydra: directory of --config-name", NULL, 0},
    {"--config-name", PL_OPT_STRING, NULL, F(config_name),
     "Hydra: the YAML config --config-path/NAME(.yaml)", NULL, 0},
    /* Megatron v1's and the DeepSpeed era's flags (train/args_legacy.c, docs/flags.md) */
#define L(field) F(legacy.field)
    {"--batch-size", PL_OPT_INT, NULL, L(batch_size), "= --micro-batch-size (Megatron v1)", NULL, 0},
    {"--gas", PL_OPT_INT, NULL, L(gas),
     "gradient accumulation steps (DeepSpeedExamples' Megatron v1.1.5): global batch = "
     "micro-batch x dp x gas", NULL, 0},
    {"--warmup", PL_OPT_FLOAT, NULL, L(warmup),
     "= --lr-warmup-fraction: warmup as a fraction of --lr-decay-iters (Megatron v1)", NULL, 0},
    {"--checkpoint-activations", PL_OPT_BOOL, NULL, L(checkpoint_activations),
     "= --recompute-granularity full --recompute-method uniform --recompute-num-layers "
     "--checkpoint-num-layers (Megatron v1)", NULL, 0},
    {"--checkpoint-num-layers", PL_OPT_INT, "1", L(checkpoint_num_layers),
     "layers per recompute group with --checkpoint-activations (Megatron v1)", NULL, 0},
    {"--distribute-checkpointed-activations", PL_OPT_BOOL, NULL,
     L(distribute_checkpointed_activations), "accepted; see docs/flags.md", NULL, 0},
    {"--pipe-parallel-size", PL_OPT_INT, NULL, L(pipe_parallel_size),
     "= --pipeline-model-parallel-size, 0 = no pipelining (DeepSpeedExamples' Megatron v1.1.5)",
     NULL, 0},
    {"--min-scale", PL_OPT_FLOAT, NULL, L(min_scale), "= --min-loss-scale (Megatron v1)", NULL, 0},
    {"--data-impl", PL_OPT_CHOICE, NULL, L(data_impl),
     "indexed dataset format: plait reads mmap (MMIDIDX) files; infer finds them", 
     "lazy|cached|mmap|infer", 0},
    {"--distributed-backend", PL_OPT_CHOICE, NULL, L(distributed_backend),
     "accepted; plait communicates over MPI", "nccl|gloo|mpi|ccl|hccl", 0},
    {"--DDP-impl", PL_OPT_CHOICE, NULL, L(ddp_impl),
     "accepted; plait's data parallelism is its own (bucketed MPI all-reduce)", "local|torch", 0},
    {"--local_rank", PL_OPT_INT, NULL, L(local_rank),
     "accepted (torch and DeepSpeed launchers pass it); plait takes ranks from MPI", NULL, 0},
    {"--num-workers", PL_OPT_INT, NULL, L(num_workers),
     "accepted; plait reads the memory-mapped data in the training thread", NULL, 0},
    {"--tensorboard-dir", PL_OPT_STRING, NULL, L(tensorboard_dir),
     "write TensorBoard event files with Megatron's scalars here (the last rank writes them)",
     NULL, 0},
    {"--tensorboard-log-interval", PL_OPT_INT, "1", F(tensorboard_log_interval),
     "iterations between TensorBoard scalars", NULL, 0},
    {"--no-log-loss-scale-to-tensorboard", PL_OPT_BOOL, NULL, F(no_log_loss_scale_tb),
     "leave loss-scale out of the TensorBoard scalars", NULL, 0},
    {"--log-memory-to-tensorboard", PL_OPT_BOOL, NULL, F(log_memory_tb),
     "TensorBoard: the writing rank's memory (docs/training.md says what each tag holds)", NULL, 0},
    {"--log-world-size-to-tensorboard", PL_OPT_BOOL, NULL, F(log_world_size_tb),
     "TensorBoard: world-size", NULL, 0},
    {"--log-params-norm", PL_OPT_BOOL, NULL, F(log_params_norm),
     "TensorBoard: params-norm, the L2 norm of all parameters after the step", NULL, 0},
    {"--log-num-zeros-in-grad", PL_OPT_BOOL, NULL, F(log_num_zeros_in_grad),
     "TensorBoard: num-zeros, the gradients equal to zero", NULL, 0},
    {"--deepspeed", PL_OPT_BOOL, NULL, L(deepspeed),
     "DeepSpeed's engine semantics: the --deepspeed_config's zero_optimization.stage wins over "
     "--zero-stage, as the engine reads only the JSON", NULL, 0},
    {"--deepspeed-config", PL_OPT_STRING, NULL, F(deepspeed_config), "= --deepspeed_config", NULL, 0},
    {"--deepscale", PL_OPT_BOOL, NULL, L(deepspeed), "= --deepspeed (DeepSpeed's old name)", NULL, 0},
    {"--deepscale_config", PL_OPT_STRING, NULL, F(deepspeed_config),
     "= --deepspeed_config (DeepSpeed's old name)", NULL, 0},
    {"--deepspeed_mpi", PL_OPT_BOOL, NULL, L(deepspeed_mpi), "accepted; plait always uses MPI", NULL, 0},
    {"--deepspeed-activation-checkpointing", PL_OPT_BOOL, NULL,
     L(deepspeed_activation_checkpointing), "accepted; see docs/flags.md", NULL, 0},
    {"--partition-activations", PL_OPT_BOOL, NULL, L(partition_activations),
     "accepted; see docs/flags.md", NULL, 0},
    {"--checkpoint-in-cpu", PL_OPT_BOOL, NULL, L(checkpoint_in_cpu), "accepted; see docs/flags.md",
     NULL, 0},
    {"--contigious-checkpointing", PL_OPT_BOOL, NULL, L(contigious_checkpointing),
     "accepted; see docs/flags.md", NULL, 0},
    {"--contiguous-checkpointing", PL_OPT_BOOL, NULL, L(contiguous_checkpointing),
     "accepted; see docs/flags.md", NULL, 0},
    {"--synchronize-each-layer", PL_OPT_BOOL, NULL, L(synchronize_each_layer),
     "accepted; see docs/flags.md", NULL, 0},
    {"--profile-backward", PL_OPT_BOOL, NULL, L(profile_backward), "accepted; see docs/flags.md",
     NULL, 0},
    {"--zero-reduce-scatter", PL_OPT_BOOL, NULL, L(zero_reduce_scatter),
     "accepted; see docs/flags.md", NULL, 0},
    {"--zero-contigious-gradients", PL_OPT_BOOL, NULL, L(zero_contigious_gradients),
     "accepted; see docs/flags.md", NULL, 0},
    {"--zero-reduce-bucket-size", PL_OPT_INT, NULL, L(zero_reduce_bucket_size),
     "accepted; see docs/flags.md", NULL, 0},
    {"--zero-allgather-bucket-size", PL_OPT_INT, NULL, L(zero_allgather_bucket_size),
     "accepted; see docs/flags.md", NULL, 0},
    {"--use-flash-attn", PL_OPT_BOOL, NULL, L(use_flash_attn),
     "accepted; plait's attention is always fused (FlashAttention's tiling)", NULL, 0},
    {"--use-flash-attn-v1", PL_OPT_BOOL, NULL, L(use_flash_attn), "= --use-flash-attn", NULL, 0},
    {"--use-flash-attn-v2", PL_OPT_BOOL, NULL, L(use_flash_attn_v2), "= --use-flash-attn", NULL, 0},
    {"--use-flash-attn-triton", PL_OPT_BOOL, NULL, L(use_flash_attn_triton), "= --use-flash-attn",
     NULL, 0},
    {"--fp32-allreduce", PL_OPT_BOOL, NULL, L(fp32_allreduce),
     "accepted; plait's all-reduce is always fp32", NULL, 0},
    {"--attention-softmax-in-fp32", PL_OPT_BOOL, NULL, L(attention_softmax_in_fp32),
     "accepted; plait's softmax is always fp32", NULL, 0},
    {"--apply-query-key-layer-scaling", PL_OPT_BOOL, NULL, L(apply_query_key_layer_scaling),
     "accepted; an identity with plait's fp32 softmax", NULL, 0},
    {"--scaled-upper-triang-masked-softmax-fusion", PL_OPT_BOOL, NULL,
     L(scaled_upper_triang_masked_softmax_fusion), "accepted; CUDA kernel fusion", NULL, 0},
    {"--scaled-masked-softmax-fusion", PL_OPT_BOOL, NULL, L(scaled_masked_softmax_fusion),
     "accepted; CUDA kernel fusion", NULL, 0},
    {"--bias-gelu-fusion", PL_OPT_BOOL, NULL, L(bias_gelu_fusion), "accepted; CUDA kernel fusion",
     NULL, 0},
    {"--bias-dropout-fusion", PL_OPT_BOOL, NULL, L(bias_dropout_fusion),
     "accepted; CUDA kernel fusion", NULL, 0},
    {"--mmap-warmup", PL_OPT_BOOL, NULL, L(mmap_warmup), "accepted; see docs/flags.md", NULL, 0},
    {"--cpu-optimizer", PL_OPT_BOOL, NULL, L(cpu_optimizer),
     "accepted; plait's optimizer always runs on the CPU", NULL, 0},
    {"--no-pipeline-parallel", PL_OPT_BOOL, NULL, L(no_pipeline_parallel),
     "accepted (Megatron-DeepSpeed: no DeepSpeed pipeline engine); pipelining is "
     "--pipeline-model-parallel-size", NULL, 0},
    {"--num-key-value-heads", PL_OPT_INT, NULL, L(num_key_value_heads),
     "= --group-query-attention --num-query-groups N (Megatron-DeepSpeed)", NULL, 0},
    {"--no-async-tensor-model-parallel-allreduce", PL_OPT_BOOL, NULL, L(no_async_tp_allreduce),
     "accepted; TP all-reduces overlap only with --tp-comm-overlap", NULL, 0},
    {"--no-query-key-layer-scaling", PL_OPT_BOOL, NULL, L(no_query_key_layer_scaling),
     "accepted; plait never scales by layer number", NULL, 0},
    {"--log-timers-to-tensorboard", PL_OPT_BOOL, NULL, L(log_timers_tb),
     "TensorBoard: iteration-time (seconds per iteration of each --log-interval window)", NULL, 0},
    {"--log-batch-size-to-tensorboard", PL_OPT_BOOL, NULL, L(log_batch_size_tb),
     "accepted; batch-size is always written (as current Megatron)", NULL, 0},
    {"--log-validation-ppl-to-tensorboard", PL_OPT_BOOL, NULL, L(log_validation_ppl_tb),
     "TensorBoard: lm loss validation ppl", NULL, 0},
    {"--log-optimizer-states-to-tensorboard", PL_OPT_BOOL, NULL, L(log_optimizer_states_tb),
     "accepted; optimizer states are not written to TensorBoard", NULL, 0},
    {"--tensorboard-queue-size", PL_OPT_INT, NULL, L(tensorboard_queue_size),
     "accepted; events are flushed every --log-interval", NULL, 0},
    {"--wandb-project", PL_OPT_STRING, NULL, L(wandb_project),
     "accepted; nothing is sent to Weights & Biases", NULL, 0},
    {"--wandb-exp-name", PL_OPT_STRING, NULL, L(wandb_exp_name),
     "accepted; nothing is sent to Weights & Biases", NULL, 0},
    {"--wandb-save-dir", PL_OPT_STRING, NULL, L(wandb_save_dir),
     "accepted; nothing is sent to Weights & Biases", NULL, 0},
#undef L
};

const pl_command_spec pl_train_cmd = {
    "train", "Train a GPT, Llama or BERT with Megatron-LM's flags (pretrain_gpt.py, "
             "pretrain_bert.py).", train_options,
    (int)(sizeof train_options / sizeof *train_options),
    0 /* pretrain_gpt.py: argparse with allow_abbrev=False */};

int pl_train_args_given(const pl_train_args *a, const char *name)
{
    int i = pl_options_index(&pl_train_cmd, name);
    return i >= 0 && a->given[i];
}

pl_status pl_train_args_note(pl_train_args *a, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return pl_errorf(PL_ERR_INTERNAL, "note: bad format");
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    char *grown = pl_realloc(a->notes, a->notes_len + len + 2);
    if (!grown)
        return pl_errorf(PL_ERR_NOMEM, "out of memory");
    memcpy(grown + a->notes_len, line, len);
    grown[a->notes_len + len] = '\n';
    grown[a->notes_len + len + 1] = 0;
    a->notes = grown;
    a->notes_len += len + 1;
    return PL_OK;
}

static pl_status require_positive(const pl_train_args *a, const char *flag, int64_t v)
{
    if (!pl_train_args_given(a, flag))
        return pl_errorf(PL_ERR_ARG, "plait train: %s is required", flag);
    if (v <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: %s must be positive, got %lld", flag,
                         (long long)v);
    return PL_OK;
}

/* One ZeRO stage from --zero-stage, --use-distributed-optimizer, --strategy and
 * the DeepSpeed config (already applied as --zero-stage when it had one). */
static pl_status resolve_zero_stage(pl_train_args *a)
{
    struct {
        int given;
        int64_t stage;
        char what[64];
    } src[3];
    int n = 0;
    if (pl_train_args_given(a, "--zero-stage")) {
        src[n].given = 1;
        src[n].stage = a->zero_stage;
        snprintf(src[n++].what, sizeof src[0].what, "%s",
                 a->ds_values[PL_DS_STAGE][0] ? "zero_optimization.stage in --deepspeed_config"
                                              : "--zero-stage");
    }
    if (a->use_distributed_optimizer) {
        src[n].given = 1;
        src[n].stage = 1;
        snprintf(src[n++].what, sizeof src[0].what, "--use-distributed-optimizer");
    }
    if (a->strategy) {
        src[n].given = 1;
        src[n].stage = strncmp(a->strategy, "Zero", 4) == 0 ? a->strategy[4] - '0'
                       : strcmp(a->strategy, "Pipeline") == 0 || strcmp(a->strategy, "ThreeD") == 0
                           ? 1
                           : 0;
        snprintf(src[n++].what, sizeof src[0].what, "--strategy %s", a->strategy);
    }
    for (int i = 1; i < n; i++)
        if (src[i].stage != src[0].stage)
            return pl_errorf(PL_ERR_ARG, "plait train: %s means ZeRO stage %lld but %s means stage "
                             "%lld", src[0].what, (long long)src[0].stage, src[i].what,
                             (long long)src[i].stage);
    if (n)
        a->zero_stage = src[0].stage;
    if (a->zero_stage < 0 || a->zero_stage > 3)
        return pl_errorf(PL_ERR_ARG, "plait train: --zero-stage must be 0, 1, 2 or 3, got %lld",
                         (long long)a->zero_stage);
    return PL_OK;
}

/* One TP size from --tensor-model-parallel-size and its aliases; they must agree. */
static pl_status resolve_tp_size(pl_train_args *a)
{
    static const char *const names[3] = {"--tensor-model-parallel-size", "--model-parallel-size",
                                         "--tensor_model_parallel_size"};
    const int64_t vals[3] = {a->tensor_model_parallel_size, a->model_parallel_size,
                             a->tensor_model_parallel_size_a4s};
    int first = -1;
    for (int i = 0; i < 3; i++) {
        if (!pl_train_args_given(a, names[i]))
            continue;
        if (first >= 0 && vals[i] != vals[first])
            return pl_errorf(PL_ERR_ARG, "plait train: %s %lld conflicts with %s %lld", names[first],
                             (long long)vals[first], names[i], (long long)vals[i]);
        if (first < 0)
            first = i;
    }
    if (first > 0)
        a->tensor_model_parallel_size = vals[first];
    if (a->tensor_model_parallel_size < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: %s must be at least 1, got %lld",
                         names[first > 0 ? first : 0], (long long)a->tensor_model_parallel_size);
    if (a->sequence_parallel && a->tensor_model_parallel_size == 1) {
        pl_log_warn("--sequence-parallel is ignored at --tensor-model-parallel-size 1 (as Megatron)");
        a->sequence_parallel = 0;
    }
    return PL_OK;
}

/* The PP size from --pipeline-model-parallel-size or its alias, and what pipelining
 * supports in this version. */
static pl_status resolve_pp_size(pl_train_args *a)
{
    if (pl_train_args_given(a, "--pipeline_model_parallel_size")) {
        if (pl_train_args_given(a, "--pipeline-model-parallel-size") &&
            a->pipeline_model_parallel_size != a->pipeline_model_parallel_size_a4s)
            return pl_errorf(PL_ERR_ARG, "plait train: --pipeline-model-parallel-size %lld "
                             "conflicts with --pipeline_model_parallel_size %lld",
                             (long long)a->pipeline_model_parallel_size,
                             (long long)a->pipeline_model_parallel_size_a4s);
        a->pipeline_model_parallel_size = a->pipeline_model_parallel_size_a4s;
    }
    pl_status st = pl_train_encdec_pp_args(a);
    if (st)
        return st;
    const int64_t pp = a->pipeline_model_parallel_size;
    if (pp < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --pipeline-model-parallel-size must be at "
                         "least 1, got %lld", (long long)pp);
    const int uneven = a->decoder_first_pipeline_num_layers || a->decoder_last_pipeline_num_layers;
    /* uneven splits and encoder-decoder splits: checked with the model */
    if (pp > 1 && !uneven && !a->pipeline_model_parallel_split_rank && a->num_layers % pp)
        return pl_errorf(PL_ERR_ARG, "plait train: --num-layers %lld is not divisible by "
                         "--pipeline-model-parallel-size %lld", (long long)a->num_layers,
                         (long long)pp);
    /* interleaving (Megatron's arguments.py): at most one of the three flags */
    static const char *const vflags[] = {"--num-layers-per-virtual-pipeline-stage",
                                         "--num-virtual-stages-per-pipeline-rank",
                                         "--virtual-pipeline-model-parallel-size"};
    const int64_t vals[] = {a->num_layers_per_virtual_pipeline_stage,
                            a->num_virtual_stages_per_pipeline_rank,
                            a->virtual_pipeline_model_parallel_size};
    int given = -1;
    for (int i = 0; i < 3; i++) {
        if (!pl_train_args_given(a, vflags[i]))
            continue;
        if (given >= 0)
            return pl_errorf(PL_ERR_ARG, "plait train: %s and %s cannot be set together",
                             vflags[given], vflags[i]);
        if (vals[i] < 1)
            return pl_errorf(PL_ERR_ARG, "plait train: %s must be at least 1, got %lld",
                             vflags[i], (long long)vals[i]);
        given = i;
    }
    a->pp_chunks = 1;
    if (given == 0) {
        if (uneven)
            return pl_errorf(PL_ERR_ARG, "plait train: --num-layers-per-virtual-pipeline-stage "
                             "with --decoder-first/last-pipeline-num-layers (Megatron asks for "
                             "--num-virtual-stages-per-pipeline-rank there; plait does not "
                             "interleave uneven stages)");
        const int64_t per_stage = a->num_layers / pp;
        if (per_stage % vals[0])
            return pl_errorf(PL_ERR_ARG, "plait train: the %lld layers of a pipeline stage are "
                             "not divisible by --num-layers-per-virtual-pipeline-stage %lld",
                             (long long)per_stage, (long long)vals[0]);
        a->pp_chunks = per_stage / vals[0];
    } else if (given > 0) {
        a->pp_chunks = vals[given];
    }
    return PL_OK;
}

/* --bf16 / --fp16 and the loss-scaling flags (Megatron's arguments.py checks). */
static pl_status validate_precision(const pl_train_args *a)
{
    static const char *const scaler_flags[] = {"--loss-scale", "--initial-loss-scale",
                                               "--min-loss-scale", "--loss-scale-window",
                                               "--hysteresis"};
    if (a->bf16 && a->fp16)
        return pl_errorf(PL_ERR_ARG, "plait train: --bf16 and --fp16 exclude each other");
    for (size_t i = 0; i < sizeof scaler_flags / sizeof *scaler_flags; i++)
        if (!a->fp16 && pl_train_args_given(a, scaler_flags[i]))
            return pl_errorf(PL_ERR_ARG, "plait train: %s applies only with --fp16 (%s)",
                             scaler_flags[i],
                             a->bf16 ? "bf16 needs no loss scaling" : "training runs in fp32");
    if (pl_train_args_given(a, "--loss-scale") && !(a->loss_scale > 0 && isfinite(a->loss_scale)))
        return pl_errorf(PL_ERR_ARG, "plait train: --loss-scale must be positive and finite, got %g",
                         a->loss_scale);
    if (!(a->initial_loss_scale > 0 && isfinite(a->initial_loss_scale)) ||
        !(a->min_loss_scale > 0) || a->min_loss_scale > a->initial_loss_scale)
        return pl_errorf(PL_ERR_ARG, "plait train: need 0 < --min-loss-scale (%g) <= "
                         "--initial-loss-scale (%g)", a->min_loss_scale, a->initial_loss_scale);
    if (a->loss_scale_window < 1 || a->hysteresis < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --loss-scale-window (%lld) and --hysteresis "
                         "(%lld) must be at least 1", (long long)a->loss_scale_window,
                         (long long)a->hysteresis);
    return PL_OK;
}

/* Megatron's checks (training/arguments.py, TransformerConfig.__post_init__),
 * and a method or layer count without full is an error rather than ignored. */
static pl_status validate_recompute(pl_train_args *a)
{
    const int has_n = pl_train_args_given(a, "--recompute-num-layers");
    const char *g = a->recompute_granularity;
    if (a->recompute_activations) {
        if (g && strcmp(g, "selective") != 0)
            return pl_errorf(PL_ERR_ARG, "plait train: --recompute-activations means "
                             "--recompute-granularity selective, which conflicts with "
                             "--recompute-granularity %s", g);
        a->recompute_granularity = g = "selective";
    }
    if (!g) {
        if (a->recompute_method)
            return pl_errorf(PL_ERR_ARG, "plait train: --recompute-method %s needs "
                             "--recompute-granularity full", a->recompute_method);
        if (has_n)
            return pl_errorf(PL_ERR_ARG, "plait train: --recompute-num-layers %lld needs "
                             "--recompute-granularity full", (long long)a->recompute_num_layers);
        return PL_OK;
    }
    int64_t per_stage = a->num_layers / a->pipeline_model_parallel_size;
    /* an encoder-decoder: each stack recomputes up to its own layers (pl_model_encdec_parts) */
    if ((!strcmp(a->model, "t5") || !strcmp(a->model, "bart")) &&
        a->decoder_num_layers > per_stage)
        per_stage = a->decoder_num_layers;
    if (strcmp(g, "selective") == 0) {
        if (a->recompute_method)
            return pl_errorf(PL_ERR_ARG, "plait train: --recompute-method %s: recompute method is "
                             "not yet supported for selective recomputing granularity",
                             a->recompute_method);
        if (has_n)
            return pl_errorf(PL_ERR_ARG, "plait train: --recompute-num-layers %lld: when using "
                             "recompute_granularity: selective recompute_num_layers must be None",
                             (long long)a->recompute_num_layers);
        return PL_OK;
    }
    if (!a->recompute_method)
        return pl_errorf(PL_ERR_ARG, "plait train: --recompute-granularity full needs "
                         "--recompute-method: using recompute_granularity: full so "
                         "recompute_method must be \"block\" or \"uniform\"");
    if (!has_n || a->recompute_num_layers < 1 || a->recompute_num_layers > per_stage) {
        char got[48] = "not given";
        if (has_n)
            snprintf(got, sizeof got, "got %lld", (long long)a->recompute_num_layers);
        return pl_errorf(PL_ERR_ARG, "plait train: --recompute-num-layers (%s): when using "
                         "recompute_granularity: full recompute_num_layers must be between 1 and "
                         "num_layers_per_pipeline_rank: %lld", got, (long long)per_stage);
    }
    return PL_OK;
}

/* Megatron's OptimizerParamScheduler asserts, in the units the flags are given
 * in (iterations or samples; the global batch size multiplies both sides alike):
 * init_lr <= max_lr, lr_decay_steps > 0 and lr_warmup_steps < lr_decay_steps,
 * for every decay style. A DeepSpeed config's scheduler is checked by its reader. */
static pl_status validate_schedule(const pl_train_args *a, int by_iters)
{
    const char *decay_flag = by_iters ? "--lr-decay-iters" : "--lr-decay-samples";
    const char *warm_flag = by_iters ? "--lr-warmup-iters" : "--lr-warmup-samples";
    const int given = pl_train_args_given(a, decay_flag);
    const int64_t decay = given ? (by_iters ? a->lr_decay_iters : a->lr_decay_samples)
                                : (by_iters ? a->train_iters : a->train_samples);
    if (a->lr_warmup_init > a->lr)
        return pl_errorf(PL_ERR_ARG, "plait train: --lr-warmup-init %g is above --lr %g "
                         "(Megatron asserts init_lr <= max_lr)", a->lr_warmup_init, a->lr);
    if (decay <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: %s %lld: the decay must be positive "
                         "(Megatron asserts lr_decay_steps > 0; a zero decay would make the "
                         "learning rate 0/0)", decay_flag, (long long)decay);
    if (pl_train_args_given(a, "--lr-warmup-fraction")) {
        if (a->lr_warmup_fraction >= 1)
            return pl_errorf(PL_ERR_ARG, "plait train: --lr-warmup-fraction %g: the warmup must "
                             "be shorter than the decay (Megatron asserts lr_warmup_steps < "
                             "lr_decay_steps)", a->lr_warmup_fraction);
        return PL_OK;
    }
    const int64_t warm = by_iters ? a->lr_warmup_iters : a->lr_warmup_samples;
    if (warm < 0 || warm >= decay)
        return pl_errorf(PL_ERR_ARG, "plait train: %s %lld must be in [0, %lld), shorter than the "
                         "decay (%s%s %lld; Megatron asserts lr_warmup_steps < lr_decay_steps)",
                         warm_flag, (long long)warm, (long long)decay, given ? "" : "default ",
                         given ? decay_flag : (by_iters ? "--train-iters" : "--train-samples"),
                         (long long)decay);
    return PL_OK;
}

static pl_status validate(pl_train_args *a)
{
    pl_status st = PL_OK;
    PL_TRY(resolve_zero_stage(a));
    PL_TRY(pl_train_encdec_args(a));
    PL_TRY(pl_train_mmb_args(a));
    PL_TRY(require_positive(a, "--num-layers", a->num_layers));
    PL_TRY(require_positive(a, "--hidden-size", a->hidden_size));
    PL_TRY(require_positive(a, "--num-attention-heads", a->num_attention_heads));
    PL_TRY(require_positive(a, "--seq-length", a->seq_length));
    if (a->hidden_size % a->num_attention_heads && !pl_train_args_given(a, "--kv-channels"))
        return pl_errorf(PL_ERR_ARG,
                         "plait train: --hidden-size %lld is not divisible by "
                         "--num-attention-heads %lld",
                         (long long)a->hidden_size, (long long)a->num_attention_heads);
    /* Megatron: with SwiGLU the default MLP width is 2/3 of 4h (two input
     * projections keep the parameter count), rounded down to a multiple of 64 */
    if (!pl_train_args_given(a, "--ffn-hidden-size"))
        a->ffn_hidden_size = a->swiglu || strcmp(a->model, "llama") == 0
                                 ? (int64_t)(4.0 * (double)a->hidden_size * 2.0 / 3.0 / 64.0) * 64
                                 : 4 * a->hidden_size;
    if (pl_train_args_given(a, "--num-query-groups") && !a->group_query_attention)
        return pl_errorf(PL_ERR_ARG, "plait train: --num-query-groups needs "
                                     "--group-query-attention");
    if (a->group_query_attention &&
        (a->num_query_groups < 1 || a->num_attention_heads % a->num_query_groups))
        return pl_errorf(PL_ERR_ARG, "plait train: --num-query-groups %lld must divide "
                         "--num-attention-heads %lld", (long long)a->num_query_groups,
                         (long long)a->num_attention_heads);
    if (a->use_rotary_position_embeddings && a->position_embedding_type &&
        strcmp(a->position_embedding_type, "rope") != 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --use-rotary-position-embeddings contradicts "
                         "--position-embedding-type %s", a->position_embedding_type);
    if (a->rotary_percent <= 0 || a->rotary_percent > 1 || a->rotary_base <= 0 ||
        a->rope_scaling_factor < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: need 0 < --rotary-percent <= 1, --rotary-base "
                                     "> 0 and --rope-scaling-factor >= 1");
    if (a->layernorm_epsilon <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --norm-epsilon must be positive");
    if (!pl_train_args_given(a, "--max-position-embeddings")) /* t5: both lengths */
        a->max_position_embeddings = a->seq_length > a->decoder_seq_length
                                     ? a->seq_length : a->decoder_seq_length;
    if (a->max_position_embeddings < a->seq_length)
        return pl_errorf(PL_ERR_ARG,
                         "plait train: --max-position-embeddings %lld is smaller than "
                         "--seq-length %lld",
                         (long long)a->max_position_embeddings, (long long)a->seq_length);
    if (a->ffn_hidden_size <= 0 || a->make_vocab_size_divisible_by <= 0 || a->micro_batch_size <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --ffn-hidden-size, "
                                     "--make-vocab-size-divisible-by and --micro-batch-size must "
                                     "be positive");
    if (a->hidden_dropout < 0 || a->hidden_dropout >= 1 || a->attention_dropout < 0 ||
        a->attention_dropout >= 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --hidden-dropout %g and --attention-dropout %g "
                         "must be in [0, 1)", a->hidden_dropout, a->attention_dropout);
    PL_TRY(resolve_tp_size(a));
    PL_TRY(resolve_pp_size(a));
    PL_TRY(validate_recompute(a));
    int by_iters = pl_train_args_given(a, "--train-iters");
    int by_samples = pl_train_args_given(a, "--train-samples");
    if (by_iters == by_samples)
        return pl_errorf(PL_ERR_ARG, "plait train: give exactly one of --train-iters and "
                                     "--train-samples");
    if ((by_iters && a->train_iters <= 0) || (by_samples && a->train_samples <= 0))
        return pl_errorf(PL_ERR_ARG, "plait train: %s must be positive",
                         by_iters ? "--train-iters" : "--train-samples");
    if (by_samples && (pl_train_args_given(a, "--lr-decay-iters") ||
                       pl_train_args_given(a, "--lr-warmup-iters")))
        return pl_errorf(PL_ERR_ARG, "plait train: with --train-samples, use --lr-decay-samples "
                                     "and --lr-warmup-samples (not the -iters forms)");
    if (by_iters && (pl_train_args_given(a, "--lr-decay-samples") ||
                     pl_train_args_given(a, "--lr-warmup-samples")))
        return pl_errorf(PL_ERR_ARG, "plait train: with --train-iters, use --lr-decay-iters and "
                                     "--lr-warmup-iters (not the -samples forms)");
    int warm = pl_train_args_given(a, "--lr-warmup-fraction") +
               pl_train_args_given(a, "--lr-warmup-iters") +
               pl_train_args_given(a, "--lr-warmup-samples");
    if (warm > 1)
        return pl_errorf(PL_ERR_ARG, "plait train: give only one of --lr-warmup-fraction, "
                                     "--lr-warmup-iters and --lr-warmup-samples");
    if (pl_train_args_given(a, "--lr-warmup-fraction") &&
        (a->lr_warmup_fraction < 0 || a->lr_warmup_fraction > 1))
        return pl_errorf(PL_ERR_ARG, "plait train: --lr-warmup-fraction %g is not in [0, 1]",
                         a->lr_warmup_fraction);
    if (!pl_train_args_given(a, "--lr"))
        return pl_errorf(PL_ERR_ARG, "plait train: --lr is required");
    if (a->lr < 0 || a->min_lr < 0 || a->min_lr > a->lr)
        return pl_errorf(PL_ERR_ARG, "plait train: need 0 <= --min-lr (%g) <= --lr (%g)",
                         a->min_lr, a->lr);
    if (a->adam_beta1 < 0 || a->adam_beta1 >= 1 || a->adam_beta2 < 0 || a->adam_beta2 >= 1 ||
        a->adam_eps <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: need 0 <= --adam-beta1, --adam-beta2 < 1 and "
                                     "--adam-eps > 0");
    if (a->weight_decay < 0 || a->clip_grad < 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --weight-decay and --clip-grad must be >= 0");
    if (a->tensorboard_log_interval <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --tensorboard-log-interval must be positive");
    if (a->log_interval <= 0 || a->eval_interval <= 0 || a->eval_iters < 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --log-interval and --eval-interval must be "
                                     "positive, --eval-iters >= 0");
    if ((pl_train_args_given(a, "--exit-interval") && a->exit_interval <= 0) ||
        (pl_train_args_given(a, "--exit-duration-in-mins") && a->exit_duration_in_mins <= 0) ||
        a->max_skipped_steps < 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --exit-interval and --exit-duration-in-mins "
                                     "must be positive, --max-skipped-steps >= 0");
    if (!(a->distributed_timeout_minutes > 0))
        return pl_errorf(PL_ERR_ARG, "plait train: --distributed-timeout-minutes %g must be "
                         "positive", a->distributed_timeout_minutes);
    if (a->ddp_bucket_size < 0 || a->zero3_prefetch < 0 || a->zero3_prefetch > 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --ddp-bucket-size must be >= 0 (elements; 0 "
                                     "for one bucket) and --zero3-prefetch 0 or 1");
    if ((pl_train_args_given(a, "--save-interval") && a->save_interval <= 0) ||
        a->keep_last_n < 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --save-interval must be positive and "
                         "--keep-last-n >= 0 (0: every checkpoint kept)");
    if (pl_train_args_given(a, "--save-interval") && !a->save)
        return pl_errorf(PL_ERR_ARG, "plait train: --save-interval needs --save DIR");
    if (a->mock_data) {
        if (a->data_path.n)
            return pl_errorf(PL_ERR_ARG, "plait train: --mock-data and --data-path exclude each other");
        if (!pl_train_args_given(a, "--vocab-size") && !a->tokenizer_type)
            return pl_errorf(PL_ERR_ARG, "plait train: --mock-data needs --vocab-size or a tokenizer");
    } else {
        if (!a->data_path.n)
            return pl_errorf(PL_ERR_ARG, "plait train: --data-path is required (or --mock-data)");
        if (!a->tokenizer_type) /* pretrain_gpt.py, pretrain_bert.py: args_defaults={...} */
            a->tokenizer_type = strcmp(a->model, "gpt") && strcmp(a->model, "llama")
                                    ? "BertWordPieceLowerCase" : "GPT2BPETokenizer";
    }
    PL_TRY(validate_precision(a));
    if (pl_train_args_given(a, "--vocab-size") && a->vocab_size <= 0)
        return pl_errorf(PL_ERR_ARG, "plait train: --vocab-size must be positive");
    /* last, as Megatron asserts these when it builds the scheduler, after its arguments */
    if (!a->ds_sched.style)
        PL_TRY(validate_schedule(a, by_iters));
    return PL_OK;
fail:
    return st;
}

pl_status pl_train_args_parse(pl_train_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    _Static_assert(sizeof train_options / sizeof *train_options <= sizeof a->given,
                   "given[] too small");
    /* With a YAML config, Hydra's key=value overrides are taken out of argv. */
    char **args = NULL, **overrides = NULL;
    int n_args = 0, n_over = 0;
    if (pl_train_yaml_split(argc, argv, &args, &n_args, &overrides, &n_over))
        return PL_ERR_NOMEM;
    pl_status st = pl_options_parse(&pl_train_cmd, a, n_args, args, a->given);
    pl_free(args);
    if (st) {
        pl_free(overrides);
        return st;
    }
    a->ds_train_batch = a->ds_micro_batch = a->ds_grad_accum = -1;
    unsigned char cli[sizeof a->given];
    memcpy(cli, a->given, sizeof cli);
    if (a->config) {
        st = pl_train_args_apply_preset(a, cli);
        if (st)
            goto fail;
    }
    st = pl_train_args_yaml(a, overrides, n_over, cli);
    if (st)
        goto fail;
    pl_free(overrides);
    overrides = NULL;
    st = pl_train_args_legacy(a);
    if (st)
        goto fail;
    if (a->deepspeed_config) {
        st = pl_ds_config_apply(a);
        if (st)
            goto fail;
    }
    st = pl_train_args_from_checkpoint(a);
    if (st)
        goto fail;
    st = validate(a);
    if (st)
        goto fail;
    return PL_OK;
fail:
    pl_free(overrides);
    pl_train_args_free(a);
    return st;
}

void pl_train_args_free(pl_train_args *a)
{
    pl_options_free(&pl_train_cmd, a);
    cJSON_Delete(a->preset);
    a->preset = NULL;
    pl_train_yaml_free(a->yaml);
    a->yaml = NULL;
    cJSON_Delete(a->ds_json);
    a->ds_json = NULL;
    pl_free(a->notes);
    a->notes = NULL;
    a->notes_len = 0;
    pl_free(a->ckpt_args_strings);
    a->ckpt_args_strings = NULL;
}

/* micro * gas * dp without overflow, or -1. */
static int64_t batch_product(int64_t micro, int64_t gas, int64_t dp)
{
    int64_t x, y;
    if (__builtin_mul_overflow(micro, gas, &x) || __builtin_mul_overflow(x, dp, &y))
        return -1;
    return y;
}

pl_status pl_train_args_batch(const pl_train_args *a, int64_t dp, int64_t *mbs, int64_t *gbs)
{
    int64_t micro = a->micro_batch_size;
    int have_gbs = pl_train_args_given(a, "--global-batch-size");
    int64_t gas = a->ds_grad_accum;
    const char *cfg = a->deepspeed_config;
    if (pl_train_args_given(a, "--gas")) { /* DeepSpeedExamples' v1.1.5: global = micro x dp x gas */
        if (gas > 0 && gas != a->legacy.gas)
            return pl_errorf(PL_ERR_ARG, "plait train: --gas %lld conflicts with "
                             "gradient_accumulation_steps %lld in --deepspeed_config %s",
                             (long long)a->legacy.gas, (long long)gas, cfg);
        gas = a->legacy.gas;
    }
    /* the names the user wrote: DeepSpeed's keys, or the flags */
    const char *tb = cfg ? "train_batch_size" : "--global-batch-size";
    const char *mb = cfg ? "train_micro_batch_size_per_gpu" : "--micro-batch-size";
    const char *ga = a->ds_grad_accum > 0 ? "gradient_accumulation_steps" : "--gas";
    char where[600] = "plait train";
    if (cfg)
        snprintf(where, sizeof where, "--deepspeed_config %s", cfg);
    if (gas > 0) {
        /* DeepSpeed's _batch_assertion with whatever two of the three are known. */
        int have_micro = pl_train_args_given(a, "--micro-batch-size");
        int64_t prod = batch_product(micro, gas, dp);
        if (have_gbs && have_micro && a->global_batch_size != prod)
            return pl_errorf(PL_ERR_ARG, "%s: %s %lld != %s %lld * %s %lld * data-parallel size "
                             "%lld", where, tb, (long long)a->global_batch_size, mb,
                             (long long)micro, ga, (long long)gas, (long long)dp);
        if (have_gbs && !have_micro) {
            if (a->global_batch_size % (gas * dp))
                return pl_errorf(PL_ERR_ARG, "%s: %s %lld is not divisible by %s %lld * "
                                 "data-parallel size %lld", where, tb,
                                 (long long)a->global_batch_size, ga, (long long)gas,
                                 (long long)dp);
            micro = a->global_batch_size / (gas * dp);
            prod = batch_product(micro, gas, dp);
        }
        if (prod <= 0)
            return pl_errorf(PL_ERR_ARG, "%s: %s %lld * %s %lld * data-parallel size %lld "
                             "overflows", where, mb, (long long)micro, ga, (long long)gas,
                             (long long)dp);
        *mbs = micro;
        *gbs = prod;
        return PL_OK;
    }
    if (cfg && have_gbs && !pl_train_args_given(a, "--micro-batch-size")) {
        /* only train_batch_size: gas = 1, micro = tb / dp */
        if (a->global_batch_size % dp)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: train_batch_size %lld is not "
                             "divisible by the data-parallel size %lld",
                             cfg, (long long)a->global_batch_size, (long long)dp);
        micro = a->global_batch_size / dp;
    }
    *mbs = micro;
    *gbs = have_gbs ? a->global_batch_size : batch_product(micro, 1, dp);
    if (*gbs <= 0 || *gbs % (micro * dp)) {
        if (cfg)
            return pl_errorf(PL_ERR_ARG, "--deepspeed_config %s: train_batch_size %lld != "
                             "train_micro_batch_size_per_gpu %lld * gradient_accumulation_steps "
                             "* data-parallel size %lld for any whole number of steps",
                             cfg, (long long)*gbs, (long long)micro, (long long)dp);
        return pl_errorf(PL_ERR_ARG, "--global-batch-size %lld is not a multiple of "
                         "--micro-batch-size %lld x data-parallel size %lld",
                         (long long)*gbs, (long long)micro, (long long)dp);
    }
    return PL_OK;
}
