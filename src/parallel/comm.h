/* The comm layer: an MPI communicator with a name, its rank and size, and counters.
 *
 * Every collective and point-to-point call the trainer makes goes through a pl_comm,
 * which counts, per kind of operation, the calls, the payload bytes, the bytes this
 * rank sends under the standard algorithm, and the seconds spent inside MPI (waiting).
 * Per-step metrics take a snapshot (or reset) before the step and subtract after.
 *
 * Payload and wire bytes, for a communicator of N ranks and a payload of S bytes:
 *   all-reduce      S = the whole vector     wire 2(N-1)/N * S   (ring: reduce-scatter + all-gather)
 *   reduce-scatter  S = the whole input      wire  (N-1)/N * S
 *   all-gather      S = the whole output     wire  (N-1)/N * S
 *   broadcast       S = the buffer           wire  S, except 0 on the last rank of the
 *                                                  pipelined chain root, root+1, ..., root-1
 *   send/recv       S = bytes sent + received, wire = bytes sent
 *   barrier         calls only
 * Wire bytes are rounded down to whole bytes; with N = 1 they are 0.
 *
 * What it is not: no MPI_COMM_WORLD global, no thread safety. The library is initialised
 * MPI_THREAD_FUNNELED (see dist.h): call these from the main thread only.
 * Errors: every function returns pl_status; an MPI failure (the communicators use
 * MPI_ERRORS_RETURN) becomes PL_ERR_IO with a message naming the operation, the
 * communicator, this process's world rank and MPI's error string. */
#ifndef PL_PARALLEL_COMM_H
#define PL_PARALLEL_COMM_H

#include "base/status.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pl_comm_kind {
    PL_COMM_ALLREDUCE,
    PL_COMM_REDUCE_SCATTER,
    PL_COMM_ALLGATHER,
    PL_COMM_BROADCAST,
    PL_COMM_SENDRECV,
    PL_COMM_BARRIER,
    PL_COMM_NKINDS
} pl_comm_kind;

typedef enum pl_comm_op { PL_COMM_SUM, PL_COMM_MAX, PL_COMM_MIN } pl_comm_op;

typedef struct pl_comm_counter {
    int64_t calls;
    int64_t bytes;      /* payload, see the table above */
    int64_t wire_bytes; /* bytes this rank sends under the standard algorithm */
    double seconds;     /* inside MPI: the blocking call, or start + test + wait */
} pl_comm_counter;

typedef struct pl_comm_stats {
    pl_comm_counter kind[PL_COMM_NKINDS];
} pl_comm_stats;

/* A communicator. Fields are read-only for users. A rank outside a group (e.g. a middle
 * pipeline stage and the embedding group) holds a non-member: mpi == MPI_COMM_NULL,
 * rank -1, size 0; every operation on it fails with a message naming the group.
 * Other structures (requests, buckets) point at a pl_comm: do not move it after init. */
typedef struct pl_comm {
    MPI_Comm mpi;
    int rank, size;
    int world_rank; /* this process in MPI_COMM_WORLD, for messages */
    int owned;      /* MPI_Comm_free in pl_comm_free */
    char name[24];  /* "dp", "tp", "world", ... */
    pl_comm_stats stats;
} pl_comm;

/* A non-blocking operation in flight. Completed or never-started requests hold
 * MPI_REQUEST_NULL; testing or waiting on them is a no-op. */
typedef struct pl_comm_req {
    MPI_Request mpi;
    pl_comm *comm;
    pl_comm_kind kind;
    const char *what; /* the MPI function, for messages */
} pl_comm_req;

#define PL_COMM_REQ_NULL ((pl_comm_req){MPI_REQUEST_NULL, NULL, PL_COMM_ALLREDUCE, ""})

/* Wraps `mpi` (MPI_COMM_NULL for a non-member) under `name`, sets MPI_ERRORS_RETURN on it
 * and zeroes the counters. With owned = 1, pl_comm_free will MPI_Comm_free it. On failure
 * an owned `mpi` is freed here and *c is left a non-member. */
pl_status pl_comm_init(pl_comm *c, MPI_Comm mpi, const char *name, int owned);

/* MPI_Comm_dup(parent) wrapped as an owned pl_comm. Collective over parent. */
pl_status pl_comm_dup(pl_comm *c, MPI_Comm parent, const char *name);

/* Frees an owned communicator and clears *c to a non-member. Safe on a zeroed or freed
 * pl_comm; must run before MPI_Finalize. */
void pl_comm_free(pl_comm *c);

static inline int pl_comm_is_member(const pl_comm *c) { return c->size > 0; }

/* Blocking in-place all-reduces. f32/f64 take SUM or MAX (MIN too); i32/i64 take
 * SUM, MIN or MAX (consensus checks: MIN of a flag = "all ranks agree"). */
pl_status pl_comm_allreduce_f32(pl_comm *c, float *buf, int64_t n, pl_comm_op op);
pl_status pl_comm_allreduce_f64(pl_comm *c, double *buf, int64_t n, pl_comm_op op);
pl_status pl_comm_allreduce_i32(pl_comm *c, int32_t *buf, int64_t n, pl_comm_op op);
pl_status pl_comm_allreduce_i64(pl_comm *c, int64_t *buf, int64_t n, pl_comm_op op);

/* Non-blocking in-place all-reduce (MPI_Iallreduce). buf must stay untouched until the
 * request completes. Every rank must start its non-blocking collectives on a
 * communicator in the same order. */
pl_status pl_comm_iallreduce_f32(pl_comm *c, float *buf, int64_t n, pl_comm_op op,
                                 pl_comm_req *req);

/* *done = 1 when the request has completed (it then holds MPI_REQUEST_NULL). */
pl_status pl_comm_test(pl_comm_req *req, int *done);
pl_status pl_comm_wait(pl_comm_req *req);
/* MPI_Testall / MPI_Waitall over n requests (no allocation; any n). Testall drives
 * progress and completes nothing unless all are done. Time is charged to the kind and
 * communicator of the first pending request. */
pl_status pl_comm_testall(pl_comm_req *reqs, int n, int *all_done);
pl_status pl_comm_waitall(pl_comm_req *reqs, int n);

/* Sum-reduce-scatter (MPI_Reduce_scatter_block): send holds size*block floats, rank r
 * receives the sum of block r in recv[0, block). send == recv is allowed (in place: the
 * input is recv[0, size*block) and the result lands in recv[0, block)). */
pl_status pl_comm_reduce_scatter_f32(pl_comm *c, const float *send, float *recv, int64_t block);

/* All-gather: rank r's send[0, block) lands in recv[r*block, (r+1)*block) on every rank.
 * send == recv + rank*block is the in-place form (the shard already sits in the output). */
pl_status pl_comm_allgather_f32(pl_comm *c, const float *send, float *recv, int64_t block);

/* Variable-count forms (MPI_Reduce_scatter, MPI_Allgatherv) for ZeRO's per-layer
 * ranges: counts[r] floats belong to rank r, at displs[r] of the full vector (displs
 * ascending, contiguous: displs[r+1] = displs[r] + counts[r]). The payload S is the full
 * vector; wire bytes are the ring's: reduce-scatter sends every block but its own
 * (S - counts[rank]), all-gather every block but that of rank+1 (S - counts[rank+1]).
 * Over a buffer cut into equal blocks both are (N-1)/N * S, as the table says.
 * reduce_scatter_v: send holds the full vector, recv receives counts[rank] floats.
 * allgather_v: send holds counts[rank] floats, recv the full vector; send may be
 * recv + displs[rank] (in place). */
pl_status pl_comm_reduce_scatter_v_f32(pl_comm *c, const float *send, float *recv,
                                       const int *counts, const int *displs);
pl_status pl_comm_allgather_v_f32(pl_comm *c, const float *send, float *recv, const int *counts,
                                  const int *displs);

/* Broadcast bytes from root (a rank of c) to every rank of c. */
pl_status pl_comm_bcast(pl_comm *c, void *buf, size_t bytes, int root);

pl_status pl_comm_barrier(pl_comm *c);

/* Agreement on an outcome that one rank may meet alone (a file it cannot read,
 * memory, its share of the work): every rank passes its local status and all
 * return the same one. PL_OK when every rank's is; otherwise the status and
 * message of the lowest failing rank of c, broadcast from it, prefixed
 * "rank R: " (R its world rank) unless every rank failed. One all-reduce of two
 * ints when all went well. With
 * c NULL or of one rank it returns local unchanged; an MPI failure of the
 * agreement itself is returned as is. Collective over c. */
pl_status pl_comm_agree(pl_comm *c, pl_status local);

/* Point-to-point on floats; ranks are ranks of c. recv fails unless exactly n floats
 * arrive. sendrecv sends and receives at once (no deadlock in rings). */
pl_status pl_comm_send_f32(pl_comm *c, const float *buf, int64_t n, int dst, int tag);
pl_status pl_comm_recv_f32(pl_comm *c, float *buf, int64_t n, int src, int tag);
pl_status pl_comm_sendrecv_f32(pl_comm *c, const float *sbuf, int64_t sn, int dst, float *rbuf,
                               int64_t rn, int src, int tag);
pl_status pl_comm_isend_f32(pl_comm *c, const float *buf, int64_t n, int dst, int tag,
                            pl_comm_req *req);
pl_status pl_comm_irecv_f32(pl_comm *c, float *buf, int64_t n, int src, int tag, pl_comm_req *req);

/* Counters: reset, accumulate (acc += s), difference (out = a - b, for per-step deltas
 * from two snapshots of c->stats). */
void pl_comm_stats_reset(pl_comm *c);
void pl_comm_stats_add(pl_comm_stats *acc, const pl_comm_stats *s);
void pl_comm_stats_sub(pl_comm_stats *out, const pl_comm_stats *a, const pl_comm_stats *b);

/* Wire bytes one rank sends for a collective of `kind` with payload `bytes` over nranks
 * (the table above; broadcast gives the value of a non-last rank). */
int64_t pl_comm_wire_bytes(pl_comm_kind kind, int nranks, int64_t bytes);

/* "all-reduce", "reduce-scatter", ... */
const char *pl_comm_kind_name(pl_comm_kind kind);

#endif
