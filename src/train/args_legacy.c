/* Megatron v1's and the DeepSpeed era's flags onto plait's (docs/flags.md).
 *
 * Sources: Megatron-LM v1.0 megatron/arguments.py and training.py (--batch-size,
 * --warmup, --checkpoint-activations, --model-parallel-size); DeepSpeedExamples'
 * Megatron-LM-v1.1.5-3D_parallelism arguments.py (--gas, --pipe-parallel-size, the
 * --zero-* and activation-checkpointing flags) and examples/ds_pretrain_gpt2.sh;
 * Megatron-DeepSpeed megatron/arguments.py (--use-flash-attn*, --deepspeed*).
 *
 * A flag with a meaning is mapped onto the flag plait has for it, exactly as if
 * that flag had been given; if both are given with different values it is an
 * error naming both. A flag whose meaning is a GPU or launcher matter adds one
 * note (printed once, by rank 0) saying what plait does instead. Not here: the
 * flags plait has under the same name (--log-interval, --fp16, ...), and
 * --model-parallel-size / A4SFramework's sizes, resolved with the TP size in args.c. */
#include "train/args.h"

#include <stdio.h>
#include <string.h>

/* Sets the scalar `flag` to `text` as if given, unless it was given with another
 * value (compared after parsing text with the flag's own type). */
static pl_status map_flag(pl_train_args *a, const char *legacy, const char *flag, const char *text)
{
    if (pl_train_args_given(a, flag)) {
        pl_train_args copy = *a; /* parse text with the flag's own type, then compare */
        const char *vals[1] = {text};
        pl_status st = pl_options_set(&pl_train_cmd, &copy, flag, vals, 1, NULL);
        if (st)
            return pl_error_wrap(st, "plait train: %s", legacy);
        int i = pl_options_index(&pl_train_cmd, flag);
        const pl_option *o = &pl_train_cmd.options[i];
        const void *x = (const char *)a + o->offset, *y = (const char *)&copy + o->offset;
        size_t size = o->type == PL_OPT_INT     ? sizeof(int64_t)
                      : o->type == PL_OPT_FLOAT ? sizeof(double)
                      : o->type == PL_OPT_BOOL  ? sizeof(int)
                                                : 0;
        int same = size ? memcmp(x, y, size) == 0
                        : strcmp(*(const char *const *)x, *(const char *const *)y) == 0;
        if (!same)
            return pl_errorf(PL_ERR_ARG, "plait train: %s means %s %s, which conflicts with the "
                             "%s given", legacy, flag, text, flag);
        return PL_OK;
    }
    const char *vals[1] = {text};
    return pl_options_set(&pl_train_cmd, a, flag, vals, 1, a->given);
}

/* --checkpoint-activations [--checkpoint-num-layers N]: Megatron v1 checkpoints
 * the input of every chunk of N layers and reruns the chunk in backward
 * (transformer.py _checkpointed_forward) = full, uniform, N. */
static pl_status map_recompute(pl_train_args *a)
{
    const pl_train_legacy_args *l = &a->legacy;
    const int n_given = pl_train_args_given(a, "--checkpoint-num-layers");
    if (!l->checkpoint_activations) {
        if (n_given && !l->deepspeed_activation_checkpointing)
            return pl_errorf(PL_ERR_ARG, "plait train: --checkpoint-num-layers %lld needs "
                             "--checkpoint-activations", (long long)l->checkpoint_num_layers);
        if (l->deepspeed_activation_checkpointing)
            return pl_train_args_note(a, "--deepspeed-activation-checkpointing: recompute is "
                                      "plait's own and stays off without "
                                      "--checkpoint-activations, as in Megatron-DeepSpeed");
        return PL_OK;
    }
    if (a->recompute_activations)
        return pl_errorf(PL_ERR_ARG, "plait train: --checkpoint-activations (full recompute) "
                         "conflicts with --recompute-activations (selective)");
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)l->checkpoint_num_layers);
    pl_status st = map_flag(a, "--checkpoint-activations", "--recompute-granularity", "full");
    if (!st)
        st = map_flag(a, "--checkpoint-activations", "--recompute-method", "uniform");
    if (!st)
        st = map_flag(a, "--checkpoint-num-layers", "--recompute-num-layers", n);
    if (!st && l->deepspeed_activation_checkpointing)
        st = pl_train_args_note(a, "--deepspeed-activation-checkpointing: the layers are "
                                "recomputed by plait itself (full, uniform, %s per group)", n);
    return st;
}

typedef struct legacy_note {
    size_t offset; /* an int switch in pl_train_args */
    const char *text;
} legacy_note;

#define LN(field) offsetof(pl_train_args, legacy.field)
static const legacy_note switch_notes[] = {
    {LN(distribute_checkpointed_activations),
     "--distribute-checkpointed-activations: the checkpointed inputs stay whole on every TP rank "
     "(one process's memory, no GPU to spare)"},
    {LN(partition_activations),
     "--partition-activations: the checkpointed inputs are not partitioned over TP ranks; each "
     "rank keeps its own copy in host memory"},
    {LN(checkpoint_in_cpu),
     "--checkpoint-in-cpu: activations are always in host memory on CPU; nothing to move"},
    {LN(contigious_checkpointing),
     "--contigious-checkpointing: plait's activations are planned once in one contiguous buffer "
     "anyway"},
    {LN(contiguous_checkpointing),
     "--contiguous-checkpointing: plait's activations are planned once in one contiguous buffer "
     "anyway"},
    {LN(synchronize_each_layer),
     "--synchronize-each-layer: no CUDA streams to synchronize; no effect"},
    {LN(profile_backward),
     "--profile-backward: not implemented; plait bench prints the step's time breakdown"},
    {LN(zero_reduce_scatter),
     "--zero-reduce-scatter: ZeRO stages 2 and 3 reduce-scatter gradients, stage 1 all-reduces "
     "them (the ZeRO stage comes from --zero-stage or the DeepSpeed config)"},
    {LN(zero_contigious_gradients),
     "--zero-contigious-gradients: gradients always live in one contiguous buffer"},
    {LN(deepspeed_mpi), "--deepspeed_mpi: plait always starts from MPI"},
    {LN(use_flash_attn),
     "--use-flash-attn: plait's attention is always fused (tiled, online softmax, as "
     "FlashAttention)"},
    {LN(use_flash_attn_v2),
     "--use-flash-attn-v2: plait's attention is always fused (tiled, online softmax, as "
     "FlashAttention)"},
    {LN(use_flash_attn_triton),
     "--use-flash-attn-triton: plait's attention is always fused (tiled, online softmax, as "
     "FlashAttention)"},
    {LN(fp32_allreduce), "--fp32-allreduce: plait's gradient all-reduce is always fp32"},
    {LN(attention_softmax_in_fp32), "--attention-softmax-in-fp32: plait's softmax is always fp32"},
    {LN(apply_query_key_layer_scaling),
     "--apply-query-key-layer-scaling: with plait's fp32 softmax the scaling cancels out; no "
     "effect"},
    {LN(scaled_upper_triang_masked_softmax_fusion),
     "--scaled-upper-triang-masked-softmax-fusion: a CUDA fusion; plait's attention kernel fuses "
     "scale, mask and softmax always"},
    {LN(scaled_masked_softmax_fusion),
     "--scaled-masked-softmax-fusion: a CUDA fusion; plait's attention kernel fuses scale, mask "
     "and softmax always"},
    {LN(bias_gelu_fusion), "--bias-gelu-fusion: a CUDA fusion; no effect on CPU"},
    {LN(bias_dropout_fusion), "--bias-dropout-fusion: a CUDA fusion; no effect on CPU"},
    {LN(mmap_warmup), "--mmap-warmup: the data files are memory-mapped and read on demand"},
    {LN(cpu_optimizer), "--cpu-optimizer: the optimizer always runs on the CPU"},
    {LN(no_pipeline_parallel),
     "--no-pipeline-parallel: no DeepSpeed pipeline engine in plait; pipelining is "
     "--pipeline-model-parallel-size"},
    {LN(no_async_tp_allreduce),
     "--no-async-tensor-model-parallel-allreduce: TP all-reduces overlap only with "
     "--tp-comm-overlap"},
    {LN(no_query_key_layer_scaling),
     "--no-query-key-layer-scaling: plait never scales attention scores by the layer number"},
    {LN(log_batch_size_tb),
     "--log-batch-size-to-tensorboard: batch-size is always written to TensorBoard (as current "
     "Megatron writes it)"},
    {LN(log_optimizer_states_tb),
     "--log-optimizer-states-to-tensorboard: optimizer states are not written to TensorBoard"},
};
#undef LN

/* Flags with a value and no CPU meaning. */
static pl_status value_notes(pl_train_args *a)
{
    const pl_train_legacy_args *l = &a->legacy;
    pl_status st = PL_OK;
    if (l->distributed_backend && strcmp(l->distributed_backend, "mpi") != 0)
        PL_TRY(pl_train_args_note(a, "--distributed-backend %s: plait communicates over MPI",
                                  l->distributed_backend));
    if (l->ddp_impl)
        PL_TRY(pl_train_args_note(a, "--DDP-impl %s: plait's data parallelism is its own "
                                  "(gradient buckets all-reduced over MPI during backward)",
                                  l->ddp_impl));
    if (pl_train_args_given(a, "--local_rank"))
        PL_TRY(pl_train_args_note(a, "--local_rank %lld: plait takes ranks from MPI",
                                  (long long)l->local_rank));
    if (pl_train_args_given(a, "--num-workers"))
        PL_TRY(pl_train_args_note(a, "--num-workers %lld: samples are read from the "
                                  "memory-mapped files by the training thread",
                                  (long long)l->num_workers));
    if (pl_train_args_given(a, "--zero-reduce-bucket-size"))
        PL_TRY(pl_train_args_note(a, "--zero-reduce-bucket-size %lld: not read (DeepSpeed reads "
                                  "zero_optimization.reduce_bucket_size from its JSON; plait's "
                                  "bucket is --ddp-bucket-size, or that JSON key at stage 0)",
                                  (long long)l->zero_reduce_bucket_size));
    if (pl_train_args_given(a, "--zero-allgather-bucket-size"))
        PL_TRY(pl_train_args_note(a, "--zero-allgather-bucket-size %lld: not read; ZeRO-3 gathers "
                                  "one layer's parameters at a time",
                                  (long long)l->zero_allgather_bucket_size));
    if (pl_train_args_given(a, "--tensorboard-queue-size"))
        PL_TRY(pl_train_args_note(a, "--tensorboard-queue-size %lld: no queue; TensorBoard "
                                  "events are flushed every --log-interval",
                                  (long long)l->tensorboard_queue_size));
    if (l->wandb_project || l->wandb_exp_name || l->wandb_save_dir)
        PL_TRY(pl_train_args_note(a, "--wandb-*: nothing is sent to Weights & Biases; the "
                                  "scalars go to --metrics-file (JSON lines)"));
    if (l->data_impl && (strcmp(l->data_impl, "lazy") == 0 || strcmp(l->data_impl, "cached") == 0))
        return pl_errorf(PL_ERR_UNSUPPORTED, "plait train: --data-impl %s: plait reads only the "
                         "mmap format (MMIDIDX .idx/.bin, what preprocess_data.py writes by "
                         "default); use --data-impl mmap or infer", l->data_impl);
fail:
    return st;
}

pl_status pl_train_args_legacy(pl_train_args *a)
{
    pl_train_legacy_args *l = &a->legacy;
    pl_status st = PL_OK;
    char text[40];
    if (pl_train_args_given(a, "--batch-size")) {
        snprintf(text, sizeof text, "%lld", (long long)l->batch_size);
        PL_TRY(map_flag(a, "--batch-size", "--micro-batch-size", text));
    }
    if (pl_train_args_given(a, "--gas") && l->gas < 1)
        return pl_errorf(PL_ERR_ARG, "plait train: --gas must be at least 1, got %lld",
                         (long long)l->gas);
    if (pl_train_args_given(a, "--warmup")) {
        /* v1.0 training.py: warmup_iter = warmup * (lr_decay_iters or train_iters) */
        snprintf(text, sizeof text, "%.17g", l->warmup);
        PL_TRY(map_flag(a, "--warmup", "--lr-warmup-fraction", text));
    }
    if (pl_train_args_given(a, "--min-scale")) {
        snprintf(text, sizeof text, "%.17g", l->min_scale);
        PL_TRY(map_flag(a, "--min-scale", "--min-loss-scale", text));
    }
    if (pl_train_args_given(a, "--pipe-parallel-size")) {
        if (l->pipe_parallel_size < 0)
            return pl_errorf(PL_ERR_ARG, "plait train: --pipe-parallel-size must be >= 0, got %lld",
                             (long long)l->pipe_parallel_size);
        snprintf(text, sizeof text, "%lld",
                 (long long)(l->pipe_parallel_size ? l->pipe_parallel_size : 1));
        PL_TRY(map_flag(a, "--pipe-parallel-size", "--pipeline-model-parallel-size", text));
    }
    if (pl_train_args_given(a, "--num-key-value-heads")) { /* Megatron-DeepSpeed's GQA flag */
        snprintf(text, sizeof text, "%lld", (long long)l->num_key_value_heads);
        PL_TRY(map_flag(a, "--num-key-value-heads", "--group-query-attention", "1"));
        PL_TRY(map_flag(a, "--num-key-value-heads", "--num-query-groups", text));
    }
    PL_TRY(map_recompute(a));
    for (size_t i = 0; i < sizeof switch_notes / sizeof *switch_notes; i++)
        if (*(const int *)((const char *)a + switch_notes[i].offset))
            PL_TRY(pl_train_args_note(a, "%s", switch_notes[i].text));
    PL_TRY(value_notes(a));
fail:
    return st;
}
