/* A DeepSpeed config (--deepspeed_config ds.json) read onto plait train's flags.
 *
 * Mapped: train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps
 * (the batch rule is resolved against the DP size at start: pl_train_args_batch),
 * zero_optimization.stage, gradient_clipping, optimizer AdamW/Adam (lr, betas, eps,
 * weight_decay), scheduler WarmupLR (linear warmup then constant) and WarmupDecayLR
 * (linear warmup then linear decay to warmup_min_lr at total_num_steps), bf16/fp16
 * (enabled: an error, mixed precision is not implemented yet).
 * A key whose flag was also given (command line or --config) with another value is
 * an error naming both; anything that does not map (another optimizer or scheduler
 * type, warmup_type "log") is refused by name. Other keys (zero_optimization's bucket
 * sizes, steps_per_print, ...) are accepted and ignored. */
#ifndef PL_TRAIN_DS_CONFIG_H
#define PL_TRAIN_DS_CONFIG_H

#include "train/args.h"

enum { PL_DS_STAGE = 0 }; /* index of the stage in ds_values: non-empty when the config set it */

pl_status pl_ds_config_apply(pl_train_args *a);

#endif
