/* plait train: parse the flags, start MPI, lock the --save directory, run the
 * trainer, and turn the status into an exit code. A failing rank aborts the
 * whole MPI job, so the other ranks never wait for it forever. */
#include "commands.h"

#include "ckpt/checkpoint.h"
#include "parallel/watchdog.h"
#include "train/trainer.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* The watchdog's verdict: one line, then the whole job ends with PLAIT_EXIT_TIMEOUT. */
static void watchdog_expired(const char *msg, void *ctx)
{
    (void)ctx;
    fprintf(stderr, "plait: error: %s\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, PLAIT_EXIT_TIMEOUT);
    _Exit(PLAIT_EXIT_TIMEOUT); /* MPI_Abort does not return; in case it does */
}

int plait_run_trainer(pl_train_args *args)
{
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, NULL, NULL);
    if (st) {
        pl_train_args_free(args);
        return plait_report(st);
    }
    /* one process per job (global rank 0) holds the save directory's lock from
     * before anything is written there until the job ends */
    pl_ckpt_lock lock = {-1};
    if (args->save && dist.rank == 0 && (st = pl_ckpt_lock_take(&lock, args->save)))
        pl_error_wrap(st, "--save %s", args->save);
    char flag[64];
    snprintf(flag, sizeof flag, "--distributed-timeout-minutes %g",
             args->distributed_timeout_minutes);
    if (!st && dist.size > 1)
        st = pl_watchdog_start(args->distributed_timeout_minutes * 60.0, flag, dist.rank,
                               watchdog_expired, NULL);
    if (!st)
        st = pl_train_run(args, &dist);
    pl_watchdog_stop();
    pl_ckpt_lock_release(&lock);
    pl_train_args_free(args);
    if (st && dist.size > 1) {
        fprintf(stderr, "plait: error: rank %d: %s\n", dist.rank, pl_error_msg());
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, plait_exit_code(st)); /* mpirun exits with this code */
    }
    pl_dist_finalize(&dist);
    return st ? plait_report(st) : 0;
}

int plait_cmd_train(int argc, char **argv)
{
    if (pl_options_wants_help(argc, argv)) {
        pl_options_help(&pl_train_cmd, stdout);
        return 0;
    }
    pl_train_args args;
    pl_status st = pl_train_args_parse(&args, argc, argv);
    if (st)
        return plait_report(st);
    return plait_run_trainer(&args);
}
