/* The plait subcommands. Each takes the arguments after its name and returns
 * the process exit code (PLAIT_EXIT_* below). Only tools/ exits. */
#ifndef PL_TOOLS_COMMANDS_H
#define PL_TOOLS_COMMANDS_H

#include "base/options.h"

int plait_cmd_preprocess(int argc, char **argv);  /* cmd_preprocess.c */
int plait_cmd_data(int argc, char **argv);        /* cmd_data.c: dispatches below */
int plait_cmd_train(int argc, char **argv);       /* cmd_train.c */
int plait_cmd_finetune(int argc, char **argv);    /* cmd_finetune.c */
int plait_cmd_evaluate(int argc, char **argv);    /* cmd_evaluate.c */
int plait_cmd_generate(int argc, char **argv);    /* cmd_generate.c */
int plait_cmd_seq2seq(int argc, char **argv);     /* cmd_seq2seq.c */
int plait_cmd_bench(int argc, char **argv);       /* cmd_bench.c */
int plait_cmd_launch(int argc, char **argv);      /* cmd_launch.c */
int plait_cmd_ckpt(int argc, char **argv);        /* cmd_ckpt.c: inspect, reshard, convert */
int plait_data_inspect(int argc, char **argv);    /* cmd_inspect.c */
int plait_data_index(int argc, char **argv);      /* cmd_index.c */
int plait_data_build_vocab(int argc, char **argv);/* cmd_vocab.c */
int plait_data_smiles_augment(int argc, char **argv); /* cmd_smiles.c */

/* Starts MPI, runs the trainer with args (plait train and plait bench), frees
 * args and returns the exit code; a failing rank aborts the whole job. parse_st
 * is how parsing args went: under a launcher of several processes the ranks agree
 * on it, and a failure is printed once, by the lowest failing rank (args is then
 * not freed: a failed parse holds nothing). */
struct pl_train_args;
int plait_run_trainer(struct pl_train_args *args, pl_status parse_st); /* cmd_train.c */
/* The same with job run instead of the trainer (plait finetune). */
struct pl_dist;
typedef pl_status (*plait_job_fn)(void *ctx, struct pl_train_args *args, struct pl_dist *dist);
int plait_run_job(struct pl_train_args *args, pl_status parse_st, plait_job_fn job, void *ctx);

/* Exit codes (docs/reliability.md): a failure of the machine or of plait, bad
 * usage (flags), a bad input file (malformed data, checkpoint, config; a token
 * id outside the vocabulary), training stopped by a policy (too many skipped
 * steps, a non-finite learning rate), a collective that did not complete within
 * --distributed-timeout-minutes (MPI_Abort from the watchdog). A save on a
 * signal (--exit-signal-handler) exits 0. */
enum {
    PLAIT_EXIT_FAILURE = 1,
    PLAIT_EXIT_USAGE = 2,
    PLAIT_EXIT_INPUT = 3,
    PLAIT_EXIT_STOPPED = 4,
    PLAIT_EXIT_TIMEOUT = 5,
};

/* The exit code for st (0 for PL_OK). */
int plait_exit_code(pl_status st);

/* Prints "plait: error: <message>" for st and returns the exit code for it. */
int plait_report(pl_status st);

/* Parses argv with cmd's table, handling --help. Returns -1 to continue, or the
 * exit code to return right away (0 after --help, 2 after a usage error). */
int plait_parse(const pl_command_spec *cmd, void *opts, int argc, char **argv,
                unsigned char *given);

#endif
