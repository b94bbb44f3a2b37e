/* The communication queue: collectives run in posting order by one communication
 * thread per rank, so that they progress while the compute thread works.
 *
 * MPI only moves bytes inside MPI calls. A non-blocking collective started on the
 * compute thread therefore advances only when that thread calls MPI again (OpenMPI
 * 4.1's libnbc runs one round of its schedule per MPI_Test), and a blocking one stops
 * compute. Here the compute thread posts an operation and goes on; the queue's thread
 * runs the blocking collective (pl_comm_*: the tuned algorithms, the same counters)
 * and marks it done. Every rank posts its collectives on a communicator in the same
 * order, and the thread runs them in that order, so MPI's matching rule holds.
 *
 * Modes: PL_COMMQ_THREAD needs MPI_THREAD_MULTIPLE (the compute thread still makes
 * tensor-parallel calls); PL_COMMQ_INLINE runs each operation inside post, on the
 * caller's thread (the fallback, and a baseline for measurements).
 *
 * Contract: an operation's struct and buffers belong to the queue from post until
 * wait (or done) says it completed; while operations on communicator c are queued,
 * the caller makes no other call on c (its counters are updated by the queue's
 * thread). The result of pl_commq_wait is the operation's status, with its message.
 * What it is not: a general task pool; it allocates nothing after init. */
#ifndef PL_PARALLEL_COMMQ_H
#define PL_PARALLEL_COMMQ_H

#include "parallel/comm.h"

typedef enum pl_commq_mode { PL_COMMQ_INLINE, PL_COMMQ_THREAD } pl_commq_mode;

typedef enum pl_commq_kind {
    PL_COMMQ_ALLREDUCE,      /* buf[0, n) summed in place, then buf *= scale */
    PL_COMMQ_REDUCE_SCATTER, /* buf (full region) -> recv (own part); acc += recv if acc;
                              * counts NULL: n elements in equal parts, recv may be buf */
    PL_COMMQ_ALLGATHER,      /* send (own part) -> buf (full region) */
} pl_commq_kind;

typedef struct pl_commq_op {
    /* set by the caller */
    pl_commq_kind kind;
    pl_comm *comm;
    float *buf;
    int64_t n;                 /* all-reduce, equal reduce-scatter: elements of buf */
    float scale;               /* all-reduce: applied after the sum unless 1 */
    const float *send;         /* all-gather: this rank's part (may lie inside buf) */
    float *recv, *acc;         /* reduce-scatter: own part; optional accumulator */
    const int *counts, *displs; /* reduce-scatter / all-gather: per-rank parts */
    /* set by the queue */
    double t_start, t_end;     /* when the collective started and completed */
    int done;
    pl_status st;
    char msg[256];             /* st's message when st != PL_OK */
} pl_commq_op;

typedef struct pl_commq pl_commq;

/* PL_COMMQ_THREAD when MPI is initialised with MPI_THREAD_MULTIPLE and the environment
 * does not say PLAIT_COMM_THREAD=0; PL_COMMQ_INLINE otherwise. */
pl_commq_mode pl_commq_default_mode(void);

/* Creates a queue (and, in PL_COMMQ_THREAD mode, starts its thread). */
pl_status pl_commq_init(pl_commq **out, pl_commq_mode mode);

/* Stops the thread after the queued operations have run, then frees. Safe on NULL. */
void pl_commq_free(pl_commq *q);

pl_commq_mode pl_commq_mode_of(const pl_commq *q);

/* Queues op (its caller fields set). In inline mode it runs now; an error is still
 * reported by pl_commq_wait, so both modes return the same status at the same place. */
pl_status pl_commq_post(pl_commq *q, pl_commq_op *op);

/* Waits until op (posted, and not yet waited for or posted again) has completed;
 * returns its status (a failed operation's message is restored for this thread). */
pl_status pl_commq_wait(pl_commq *q, pl_commq_op *op);

/* 1 if op has completed (no waiting). */
int pl_commq_done(pl_commq *q, pl_commq_op *op);

/* Waits for every queued operation (their statuses are left in the ops). */
void pl_commq_drain(pl_commq *q);

/* Overlap accounting over completed operations against the moment compute stopped
 * needing them (the end of backward): `before` is the part of each operation's
 * [t_start, t_end] before t_compute_end, `after` the rest; `early` counts those that
 * completed before it. */
typedef struct pl_commq_overlap {
    int64_t ops, early;
    double busy, before, after; /* seconds: busy = before + after */
} pl_commq_overlap;
void pl_commq_overlap_add(pl_commq_overlap *o, const pl_commq_op *op, double t_compute_end);

#endif
