/* Data-parallel gradient buckets: all-reduce gradients while backward is still running.
 *
 * One flat float gradient buffer grad[0, n) is cut into buckets, contiguous ranges given
 * in the order backward produces them (reverse parameter order, as Megatron's
 * param_and_grad_buffer and PyTorch DDP). Backward calls pl_dp_buckets_ready() for each
 * range it finishes; when a bucket's last element is marked, its MPI_Iallreduce starts
 * at once -- provided every bucket before it in the list has started, because MPI needs
 * every rank to start its collectives on a communicator in the same order, and this
 * makes any per-rank marking order safe. Each ready() also calls MPI_Testall on the
 * buckets in flight to drive progress. pl_dp_buckets_finish() waits for all and scales
 * by 1/dp (Megatron averages gradients over DP).
 *
 * Deterministic for a given dp: each bucket is one all-reduce of fixed size. With dp = 1
 * it makes no MPI call at all. Nothing is allocated after init.
 * Overlap: for each step, the window runs from the first bucket's start to the end of the
 * wait in finish; the overlapped time is the window minus the time spent waiting in
 * finish -- communication that ran while backward was computing. MPI progresses only
 * inside MPI calls, so part of that is spent in ready()'s MPI_Testall on the main
 * thread; it is recorded separately (progress_seconds).
 * What it is not: ZeRO's reduce-scatter (see parallel/zero/), thread-safe (call from the
 * main thread, MPI is FUNNELED). */
#ifndef PL_PARALLEL_DP_BUCKETS_H
#define PL_PARALLEL_DP_BUCKETS_H

#include "parallel/comm.h"

typedef struct pl_dp_range {
    int64_t offset, count;
} pl_dp_range;

typedef struct pl_dp_buckets_stats {
    int64_t steps;           /* finished steps since init or reset */
    int64_t allreduces;      /* buckets all-reduced */
    double window_seconds;   /* first start to last completion, summed over steps */
    double wait_seconds;     /* waiting in finish */
    double overlap_seconds;  /* window - wait: communication that ran beside backward */
    double progress_seconds; /* of the overlap, time inside MPI in ready() (starts and
                                MPI_Testall): the main thread moved bytes instead of
                                computing, so overlap - progress is what was truly hidden */
    double last_window, last_wait, last_overlap, last_progress; /* the last step alone */
} pl_dp_buckets_stats;

typedef struct pl_dp_buckets pl_dp_buckets;

/* Splits [0, n) into buckets in backward order: walking down from n, parameters (whose
 * start offsets are `bounds`, any order, each in [0, n); 0 is implied) are added to the
 * current bucket until it holds at least bucket_elems elements, then it is closed at a
 * parameter start. bucket_elems <= 0 gives one bucket (Megatron without
 * --overlap-grad-reduce). *out is pl_malloc'ed (pl_free it); *nout >= 1 when n > 0. */
pl_status pl_dp_buckets_split(int64_t n, const int64_t *bounds, int nbounds, int64_t bucket_elems,
                              pl_dp_range **out, int *nout);

/* Creates the buckets over grad[0, n) for communicator dp. ranges (copied) must
 * partition [0, n), each count > 0, listed in launch order. Collective over dp (when its
 * size > 1): checks that every rank has the same n and ranges, and every rank returns
 * the same status. dp and grad must outlive the buckets. */
pl_status pl_dp_buckets_init(pl_dp_buckets **out, pl_comm *dp, float *grad, int64_t n,
                             const pl_dp_range *ranges, int nranges);

/* Marks grad[offset, offset+count) as produced (it may span buckets) and starts every
 * bucket that is now complete and next in order. Each element must be marked once per
 * step; marking more elements than a bucket holds is an error. */
pl_status pl_dp_buckets_ready(pl_dp_buckets *b, int64_t offset, int64_t count);

/* Waits for every bucket's all-reduce and scales grad by 1/dp; the buckets are then
 * ready for the next step. Fails (after waiting for what was started) if some element
 * was never marked: other ranks would then hang, so treat it as fatal. */
pl_status pl_dp_buckets_finish(pl_dp_buckets *b);

/* Counters; the reset zeroes them. */
const pl_dp_buckets_stats *pl_dp_buckets_stats_get(const pl_dp_buckets *b);
void pl_dp_buckets_stats_reset(pl_dp_buckets *b);

int pl_dp_buckets_count(const pl_dp_buckets *b);

/* Waits for anything in flight, then frees. Safe on NULL. */
void pl_dp_buckets_free(pl_dp_buckets *b);

#endif
