/* ZeRO partitioning over the data-parallel group (DeepSpeed's flat groups,
 * Megatron's distributed optimizer).
 *
 * The flat buffer of n elements is padded to P, a multiple of dp; DP rank r owns
 * the contiguous shard [r*S, (r+1)*S), S = P/dp. Adam moments (and, at stage 3,
 * the fp32 parameters) exist only for the shard. For stages 2 and 3 the buffer is
 * further cut into regions (embeddings, each layer, the final norm: the units
 * backward finishes and forward needs); a region's reduce-scatter or all-gather
 * moves the region's elements between every rank and the ranks owning them
 * (MPI_Reduce_scatter / MPI_Allgatherv with per-rank counts planned at init).
 *
 * What it is not: it knows nothing of the model (regions are given as offsets)
 * and allocates nothing after init. Collectives must be called in the same order
 * on every rank of the DP communicator. */
#ifndef PL_PARALLEL_ZERO_ZERO_H
#define PL_PARALLEL_ZERO_ZERO_H

#include "parallel/comm.h"

typedef struct pl_zero_region {
    int64_t lo, hi;     /* [lo, hi) of the padded flat buffer */
    int64_t own_lo;     /* this rank's part: [own_lo, own_lo + own_count) */
    int64_t own_count;
    int *counts, *displs; /* [dp] each rank's part, relative to lo */
} pl_zero_region;

typedef struct pl_zero {
    int stage, dp, rank;
    pl_comm *comm;
    int64_t n, padded, shard; /* n elements, padded to dp * shard */
    int64_t lo, hi;           /* owned: [lo, hi) = [rank*shard, (rank+1)*shard) */
    int nregions;
    pl_zero_region *regions;
    int *ints;                /* counts and displs of every region */
} pl_zero;

/* Plans the partition of n elements over comm (the DP group). starts (nstarts,
 * ascending, starts[0] = 0) cut [0, padded) into regions; pass NULL/0 for none
 * (stage 1). Errors: out of memory, a region's count beyond MPI's int. */
pl_status pl_zero_init(pl_zero *z, pl_comm *comm, int stage, int64_t n, const int64_t *starts,
                       int nstarts);
void pl_zero_free(pl_zero *z);

/* The region holding flat element offset (binary search), or -1. */
int pl_zero_region_of(const pl_zero *z, int64_t offset);

/* Sum-reduce-scatter of region i: send holds its hi - lo elements on every rank;
 * recv receives the sum of this rank's part (own_count elements). */
pl_status pl_zero_reduce_scatter(pl_zero *z, int i, const float *send, float *recv);

/* All-gather of region i: own holds this rank's part (own_count elements); out
 * receives the whole region (hi - lo elements). */
pl_status pl_zero_allgather(pl_zero *z, int i, const float *own, float *out);

/* Whole-buffer forms over equal shards (stage 1, and stage 2's parameter gather):
 * grads[0, padded) is reduce-scattered in place (this rank's sum lands in
 * grads[0, shard)); params[lo, hi) is all-gathered in place into params[0, padded). */
pl_status pl_zero_reduce_scatter_all(pl_zero *z, float *grads);
pl_status pl_zero_allgather_all(pl_zero *z, float *params);

/* Per-rank bytes of model state under ZeRO stage `stage` for n parameters over dp
 * ranks (fp32 everywhere: 4 B parameter, 4 B gradient, 8 B Adam moments), without
 * working buffers: stage 0 16n, 1 (4+4)n + 8n/dp, 2 4n + 12n/dp, 3 16n/dp. */
typedef struct pl_zero_bytes {
    double params, grads, optim;
} pl_zero_bytes;
pl_zero_bytes pl_zero_model_bytes(int stage, int64_t n, int dp);

#endif
