/* Megatron's exit conditions other than --exit-interval: --exit-signal-handler
 * (SIGTERM, SIGUSR1) and --exit-duration-in-mins, agreed by every rank. */
#include "train/trainer_internal.h"

#include "base/log.h"

#include <signal.h>
#include <string.h>

/* Set by SIGTERM / SIGUSR1 with --exit-signal-handler (Megatron's
 * DistributedSignalHandler): the loop finishes the iteration, agrees with the
 * other ranks, saves and stops. */
static volatile sig_atomic_t exit_signal;

static void on_exit_signal(int sig) { exit_signal = sig; }

void pl_train_exit_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_exit_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

/* Megatron's exit conditions other than --exit-interval, agreed by every
 * rank (one rank may get the signal, or cross the time limit, first). */
pl_status pl_train_should_stop(pl_trainer *t, int *stop)
{
    const pl_train_args *a = t->a;
    *stop = 0;
    if (!a->exit_signal_handler && !pl_train_args_given(a, "--exit-duration-in-mins"))
        return PL_OK;
    int32_t why[2] = {exit_signal, 0};
    if (pl_train_args_given(a, "--exit-duration-in-mins") &&
        (pl_time_now() - t->start_time) / 60.0 > a->exit_duration_in_mins)
        why[1] = 1;
    pl_status st = pl_comm_allreduce_i32(pl_grid_comm(&t->grid, PL_GRID_WORLD), why, 2, PL_COMM_MAX);
    if (st)
        return st;
    if (why[0] || why[1]) {
        *stop = 1;
        if (pl_train_is_root(t))
            pl_log_info(" %s at iteration %lld: saving and exiting",
                        why[0] ? (why[0] == SIGTERM ? "received SIGTERM" : "received SIGUSR1")
                               : "--exit-duration-in-mins reached",
                        (long long)t->iteration);
    }
    return PL_OK;
}
