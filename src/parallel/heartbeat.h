/* Heartbeats: which rank stopped, named when the collective watchdog fires.
 *
 * The watchdog (watchdog.h) sees only its own process: a collective that does not
 * complete says that some member did not arrive, not which. Here every rank tells
 * every other rank, a few times per timeout, that it is alive and what it is doing
 * (blocked in which MPI call, or outside MPI since when), over a duplicate of
 * MPI_COMM_WORLD used for nothing else. The watchdog thread does it (the hooks of
 * pl_watchdog_start): at each look it takes in the beats that arrived and sends its
 * own, all non-blocking (MPI_Isend / MPI_Test), so the step never waits for it. When
 * an operation expires, the message names
 *   - the ranks whose beats stopped more than half the timeout ago: frozen (SIGSTOP,
 *     a swapped-out or hung node) or dead — the process is not running at all;
 *   - the live ranks that are outside MPI for more than half the timeout: they have
 *     not come to the collective (stuck in compute, I/O, a loop);
 *   - this process itself when its own watchdog did not run for more than half the
 *     timeout (it was the one stopped, and has just been resumed).
 * A beat's age is counted from when it was sent, by the sender's monotonic clock, for
 * the ranks on this host whose clock agrees with ours (checked at init); from when it
 * arrived for the others. So a beat taken in late — this rank's watchdog thread
 * starved on a loaded node, or delivered late — cannot make a frozen rank look alive.
 *
 * Why point-to-point beats and not one-sided counters: passive-target RMA makes
 * progress at the target only inside MPI calls on Open MPI's TCP/shared-memory
 * components, so a counter read would itself hang on the frozen rank; an Isend of a
 * small message completes locally (eager) on Open MPI and MPICH alike, and a receive
 * of ANY_SOURCE needs nothing from the frozen rank. Needs MPI_THREAD_MULTIPLE (the
 * watchdog thread calls MPI while the main thread does); pl_heartbeat_init says
 * PL_ERR_UNSUPPORTED otherwise and the watchdog runs without names.
 *
 * Cost: per rank and look, one Isend of 64 bytes to each other rank (a rank whose
 * previous beat is still in flight is skipped) and the tests; above 256 ranks a rank
 * beats every ceil(world / 256)-th look. Nothing in the step loop.
 *
 * Process-wide state, like the watchdog's: one heartbeat per process. */
#ifndef PL_PARALLEL_HEARTBEAT_H
#define PL_PARALLEL_HEARTBEAT_H

#include "base/status.h"

#include <mpi.h>
#include <stddef.h>

/* Collective over world: duplicates it and allocates the per-peer state. PL_ERR_UNSUPPORTED
 * below MPI_THREAD_MULTIPLE, PL_ERR_OOM, PL_ERR_IO when MPI fails; PL_ERR_INTERNAL when
 * one already runs. */
pl_status pl_heartbeat_init(MPI_Comm world);

/* The watchdog hooks (ctx unused): poll takes in beats and sends this rank's;
 * describe writes "; ..." naming silent, stuck or self-stopped ranks, or "". */
void pl_heartbeat_poll(void *ctx);
void pl_heartbeat_describe(char *out, size_t cap, double timeout_s, void *ctx);

/* Collective over world, after pl_watchdog_stop (no poll may run): every beat sent is
 * received, then the communicator and state are freed. Safe when not initialised. */
pl_status pl_heartbeat_free(void);

#endif
