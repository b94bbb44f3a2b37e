/* A DeepSpeed config (--deepspeed_config ds.json) read onto plait train's flags,
 * with DeepSpeed's own value semantics (see ds_config.c's header).
 *
 * Mapped: train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps
 * (the batch rule is resolved against the DP size at start: pl_train_args_batch),
 * zero_optimization.stage (with --deepspeed it wins over --zero-stage, as the engine
 * reads only the JSON; without, a different --zero-stage is an error),
 * zero_optimization.reduce_bucket_size (= --ddp-bucket-size at stage 0),
 * gradient_clipping, steps_per_print (= --log-interval unless that is given),
 * optimizer Adam/AdamW (lr, betas, eps, weight_decay), scheduler WarmupLR,
 * WarmupDecayLR, WarmupCosineLR, OneCycle (with its momentum cycling) and LRRangeTest with
 * DeepSpeed's formulas (a->ds_sched, run by optim/schedule.c's PL_LR_DS_* styles),
 * bf16/fp16 and fp16's loss scaler.
 * A key whose flag was also given (command line or --config) with another value is
 * an error naming both, except where noted above. Keys with no CPU meaning
 * (activation_checkpointing, offload_optimizer, overlap_comm, wall_clock_breakdown,
 * ...) are accepted with one note each saying what plait does; what cannot be
 * honoured (another optimizer or scheduler type, elasticity,
 * an unknown zero_optimization key) is refused by name; a duplicate key takes its
 * last value, with a note. */
#ifndef PL_TRAIN_DS_CONFIG_H
#define PL_TRAIN_DS_CONFIG_H

#include "train/args.h"

enum { PL_DS_STAGE = 0 }; /* index of the stage in ds_values: non-empty when the config set it */

pl_status pl_ds_config_apply(pl_train_args *a);

#endif
