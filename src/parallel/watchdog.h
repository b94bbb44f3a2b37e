/* The collective watchdog: Megatron's --distributed-timeout-minutes for MPI.
 *
 * MPI has no timeout: a rank that is frozen (SIGSTOP, a swapped-out node, a hung
 * file system) or stuck in a loop leaves every other rank blocked in its next
 * collective forever. Here each thread that calls MPI through parallel/comm.c
 * records "which operation, on which communicator, with which peer, since when"
 * in a slot of its own (pl_watch_enter / pl_watch_leave around each blocking
 * call: the collectives, send/recv, wait and waitall); one watchdog thread per
 * process looks at the slots every quarter of the timeout (at most every second)
 * and, when one has been blocked longer than the timeout, formats one line naming
 * the operation, the communicator, the peer where the operation has one (a
 * receive: the rank that did not send) and how long, and calls the callback given
 * to pl_watchdog_start, which never returns (tools/ prints it and calls
 * MPI_Abort). The communication queue's waits (parallel/commq.c) need no slot of
 * their own: the queue's thread is blocked in a pl_comm call, whose slot fires.
 *
 * A collective cannot say which member did not arrive; the frozen rank prints
 * nothing. The hooks name it: the watchdog thread calls hooks->poll at every look
 * and, when an operation expires, hooks->describe to say who is missing
 * (parallel/heartbeat.h: each rank's heartbeats over a communicator of their own).
 * Without hooks the message names the communicator only. Time spent outside MPI
 * (compute, I/O) is never timed.
 *
 * Process-wide state, deliberately: like a signal handler it watches every
 * thread, and the comm layer marks slots without a handle to pass around. Slots
 * are lock-free (one writer each; the watchdog reads with acquire loads and
 * re-checks the start time). Up to PL_WATCH_SLOTS threads are watched; later
 * threads are not. Before pl_watchdog_start, enter/leave only record. */
#ifndef PL_PARALLEL_WATCHDOG_H
#define PL_PARALLEL_WATCHDOG_H

#include "base/status.h"

#include <stddef.h>

#define PL_WATCH_SLOTS 8

/* Called once, from the watchdog thread, with the message; must not return. */
typedef void (*pl_watch_expired)(const char *msg, void *ctx);

/* Optional, run on the watchdog thread: poll at every look (poll_s apart; it must not
 * block), describe when an operation of this process expired after timeout_s: it
 * writes "; ..." naming the ranks that are missing into out (cap bytes), or "" when it
 * cannot tell. */
typedef struct pl_watch_hooks {
    void (*poll)(void *ctx);
    void (*describe)(char *out, size_t cap, double timeout_s, void *ctx);
    void *ctx;
} pl_watch_hooks;

/* Starts the watchdog thread: an operation blocked longer than timeout_s seconds
 * (> 0) calls expired(msg, ctx). flag names the setting in the message
 * ("--distributed-timeout-minutes 10"); world_rank this process; hooks may be NULL
 * (copied). PL_ERR_ARG for a bad timeout, PL_ERR_INTERNAL when the thread cannot
 * start or one already runs. */
pl_status pl_watchdog_start(double timeout_s, const char *flag, int world_rank,
                            pl_watch_expired expired, void *ctx, const pl_watch_hooks *hooks);

/* Seconds between the watchdog's looks for a timeout: min(timeout / 4, 1). */
double pl_watchdog_poll_seconds(double timeout_s);

/* This process's MPI state, for a heartbeat: 1 and the operation, communicator and
 * seconds blocked of the longest-blocked watched thread; or 0 and the seconds since a
 * watched call last returned (-1 if none has). Names are static strings. */
int pl_watch_state(const char **what, const char **comm, double *seconds);

/* Stops and joins the thread (at once, not after a poll interval). Safe when
 * not started. */
void pl_watchdog_stop(void);

/* This thread is about to block in `what` (a static string, "MPI_Allreduce") on
 * the communicator named comm (static for the call's duration) of `size` ranks;
 * peer is the rank of comm it waits for, or -1. */
void pl_watch_enter(const char *what, const char *comm, int size, int peer);

/* The operation of this thread returned. */
void pl_watch_leave(void);

#endif
