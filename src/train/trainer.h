/* The training loop of `plait train`: Megatron's pretrain_gpt.py semantics
 * (micro-batches accumulated to the global batch, sample-counted LR schedule,
 * evaluation, checkpoints) over the rank grid, with data parallelism by
 * bucketed gradient all-reduce overlapping backward. */
#ifndef PL_TRAIN_TRAINER_H
#define PL_TRAIN_TRAINER_H

#include "train/args.h"

#include "parallel/dist.h"

/* Runs a whole training job on the processes of dist (MPI initialised by the
 * caller, who also finalises it). Returns this rank's first error; a rank
 * that fails does not tell the others, so with several ranks the caller ends
 * the job (tools/cmd_train.c aborts it) rather than leaving them waiting. */
pl_status pl_train_run(const pl_train_args *args, pl_dist *dist);

#endif
