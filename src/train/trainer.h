/* The training loop of `plait train`: Megatron's pretrain_gpt.py semantics
 * (micro-batches accumulated to the global batch, sample-counted LR schedule,
 * evaluation, checkpoints) over the rank grid, with data parallelism by
 * bucketed gradient all-reduce overlapping backward. */
#ifndef PL_TRAIN_TRAINER_H
#define PL_TRAIN_TRAINER_H

#include "train/args.h"

/* Runs a whole training job. argc/argv are the process's (for MPI_Init).
 * Returns the first error; every rank returns the same status. */
pl_status pl_train_run(const pl_train_args *args, int *argc, char ***argv);

#endif
