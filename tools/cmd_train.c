/* plait train: parse the flags, start MPI, lock the --save directory, run the
 * trainer, and turn the status into an exit code. A failing rank aborts the
 * whole MPI job, so the other ranks never wait for it forever.
 *
 * Under a launcher of several processes a failure is printed once, naming the
 * rank ("plait: error: rank R: ..."), not once per rank: a flag error is agreed
 * on after MPI starts (the lowest failing rank prints it; every rank exits with
 * its code); an error in training is printed at once by rank 0, and by rank R > 0
 * after R seconds (at most 5), so that when every rank fails alike (the same flags,
 * the same files) a lower rank's MPI_Abort ends the others before they print,
 * while an error only one rank sees is still printed by it. An echo of another
 * rank's failure (pl_error_echo: "... failed on rank R") waits 15 s for that rank
 * to report the cause. */
#include "commands.h"

#include "base/status.h"
#include "ckpt/checkpoint.h"
#include "base/log.h"
#include "parallel/dist.h"
#include "parallel/heartbeat.h"
#include "parallel/watchdog.h"
#include "train/trainer.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The watchdog's verdict: one line, then the whole job ends with PLAIT_EXIT_TIMEOUT. */
static void watchdog_expired(const char *msg, void *ctx)
{
    (void)ctx;
    fprintf(stderr, "plait: error: %s\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, PLAIT_EXIT_TIMEOUT);
    _Exit(PLAIT_EXIT_TIMEOUT); /* MPI_Abort does not return; in case it does */
}

/* Heartbeats (parallel/heartbeat.h) so that the watchdog names a frozen rank; off with
 * PLAIT_HEARTBEAT=0, and without MPI_THREAD_MULTIPLE (a note says so). 1 when on. */
static pl_status heartbeat_start(int *on)
{
    *on = 0;
    const char *env = getenv("PLAIT_HEARTBEAT");
    if (env && strcmp(env, "0") == 0)
        return PL_OK;
    pl_status st = pl_heartbeat_init(MPI_COMM_WORLD);
    if (st == PL_ERR_UNSUPPORTED) {
        pl_log_warn("%s; the collective watchdog will not name a frozen rank", pl_error_msg());
        return PL_OK;
    }
    *on = !st;
    return st;
}

/* The ranks agree on how parsing went: -1 when it went well everywhere, else the
 * exit code of the lowest failing rank, which prints its error. */
static int parse_agreement(const pl_dist *d, pl_status parse_st)
{
    int first = parse_st ? d->rank : d->size, code = 0;
    if (MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        return plait_report(parse_st ? parse_st : pl_errorf(PL_ERR_IO, "MPI_Allreduce failed"));
    if (first == d->size)
        return -1;
    if (d->rank == first) {
        code = plait_exit_code(parse_st);
        fprintf(stderr, "plait: error: rank %d: %s\n", d->rank, pl_error_msg());
        fflush(stderr);
    }
    MPI_Allreduce(MPI_IN_PLACE, &code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return code;
}

/* A rank's failure in training, printed once (see the top) before the job ends. */
PL_NORETURN static void report_and_abort(const pl_dist *d, pl_status st)
{
    const int echo = pl_error_echo_of();
    const long wait = echo >= 0 && echo != d->rank ? 15 : d->rank < 5 ? d->rank : 5;
    struct timespec ts = {wait, 0};
    while (wait > 0 && nanosleep(&ts, &ts) != 0) {
    }
    fprintf(stderr, "plait: error: rank %d: %s\n", d->rank, pl_error_msg());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, plait_exit_code(st)); /* mpirun exits with this code */
    _Exit(plait_exit_code(st));
}

int plait_run_job(pl_train_args *args, pl_status parse_st, plait_job_fn job, void *ctx)
{
    pl_dist_launcher launcher;
    pl_dist_launcher_detect(&launcher);
    if (parse_st && launcher.size <= 1)
        return plait_report(parse_st);
    pl_dist dist;
    pl_status st = pl_dist_init(&dist, NULL, NULL);
    if (st || (parse_st && dist.size <= 1)) {
        if (!parse_st)
            pl_train_args_free(args);
        else if (!st)
            pl_dist_finalize(&dist);
        return plait_report(parse_st ? parse_st : st);
    }
    if (dist.size > 1) {
        int code = parse_agreement(&dist, parse_st);
        if (code >= 0) {
            if (!parse_st)
                pl_train_args_free(args);
            pl_dist_finalize(&dist);
            return code;
        }
    }
    /* one process per job (global rank 0) holds the save directory's lock from
     * before anything is written there until the job ends */
    pl_ckpt_lock lock = {-1};
    if (args->save && dist.rank == 0 && (st = pl_ckpt_lock_take(&lock, args->save)))
        pl_error_wrap(st, "--save %s", args->save);
    char flag[64];
    snprintf(flag, sizeof flag, "--distributed-timeout-minutes %g",
             args->distributed_timeout_minutes);
    const pl_watch_hooks beats = {pl_heartbeat_poll, pl_heartbeat_describe, NULL};
    int beating = 0;
    if (!st && dist.size > 1)
        st = heartbeat_start(&beating);
    if (!st && dist.size > 1)
        st = pl_watchdog_start(args->distributed_timeout_minutes * 60.0, flag, dist.rank,
                               watchdog_expired, NULL, beating ? &beats : NULL);
    if (!st)
        st = job ? job(ctx, args, &dist) : pl_train_run(args, &dist);
    pl_watchdog_stop();
    if (beating && !st)
        st = pl_heartbeat_free();
    pl_ckpt_lock_release(&lock);
    pl_train_args_free(args);
    if (st && dist.size > 1)
        report_and_abort(&dist, st);
    pl_dist_finalize(&dist);
    return st ? plait_report(st) : 0;
}

int plait_run_trainer(pl_train_args *args, pl_status parse_st)
{
    return plait_run_job(args, parse_st, NULL, NULL);
}

int plait_cmd_train(int argc, char **argv)
{
    if (pl_options_wants_help(argc, argv)) {
        pl_options_help(&pl_train_cmd, stdout);
        return 0;
    }
    pl_train_args args;
    pl_status st = pl_train_args_parse(&args, argc, argv);
    return plait_run_trainer(&args, st);
}
