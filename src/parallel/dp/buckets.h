/* Data-parallel gradient buckets: all-reduce gradients while backward is still running.
 *
 * One flat float gradient buffer grad[0, n) is cut into buckets, contiguous ranges given
 * in the order backward produces them (reverse parameter order, as Megatron's
 * param_and_grad_buffer and PyTorch DDP). Backward calls pl_dp_buckets_ready() for each
 * range it finishes; when a bucket's last element is marked, its all-reduce is posted
 * at once -- provided every bucket before it in the list has been posted, because MPI
 * needs every rank to start its collectives on a communicator in the same order, and
 * this makes any per-rank marking order safe. pl_dp_buckets_finish() waits for all; the
 * gradients are then summed and scaled by 1/dp (Megatron averages gradients over DP).
 *
 * The all-reduces run on a communication queue (parallel/commq.h): with
 * MPI_THREAD_MULTIPLE a thread of their own runs them while backward computes; otherwise
 * each runs inside the ready() call that completes it (blocking, on the caller's thread).
 * Each bucket's all-reduce also scales it by 1/dp, so finish only waits.
 *
 * Deterministic for a given dp: each bucket is one all-reduce of fixed size, in a fixed
 * order. With dp = 1 it makes no MPI call at all. Nothing is allocated after init.
 * Overlap: backward ends when the step's last ready() call begins (the last gradients
 * are handed over); at finish every bucket's all-reduce is split into the part that ran
 * before that moment and the part after, and `early` counts the buckets that had
 * completed before it (with one bucket, none can). `progress` is time the caller's thread spent inside MPI in
 * ready() (inline mode: the whole all-reduce, computing nothing meanwhile).
 * What it is not: ZeRO's reduce-scatter (see parallel/zero/). Call from one thread; while
 * buckets are in flight (between the first ready() of a step and finish) make no other
 * call on the dp communicator. */
#ifndef PL_PARALLEL_DP_BUCKETS_H
#define PL_PARALLEL_DP_BUCKETS_H

#include "parallel/comm.h"

typedef struct pl_dp_range {
    int64_t offset, count;
} pl_dp_range;

/* One step's communication, or sums over steps (seconds). */
typedef struct pl_dp_step_stats {
    int64_t buckets;  /* all-reduces run */
    int64_t early;    /* of them, completed before backward ended (the last ready()) */
    double busy;      /* inside the buckets' all-reduces */
    double before;    /* of busy, before backward ended: ran beside backward */
    double after;     /* of busy, after: backward had to wait for it */
    double wait;      /* the caller blocked in finish */
    double progress;  /* the caller's thread inside MPI in ready() (inline mode) */
} pl_dp_step_stats;

/* a += s, field by field. */
void pl_dp_step_stats_add(pl_dp_step_stats *a, const pl_dp_step_stats *s);

typedef struct pl_dp_buckets_stats {
    int64_t steps;          /* finished steps since init or reset */
    pl_dp_step_stats total; /* summed over those steps */
    pl_dp_step_stats last;  /* the last step alone */
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

/* 1 when the all-reduces run on a communication thread (see the top of this file). */
int pl_dp_buckets_threaded(const pl_dp_buckets *b);

/* Waits for anything in flight, then frees. Safe on NULL. */
void pl_dp_buckets_free(pl_dp_buckets *b);

#endif
