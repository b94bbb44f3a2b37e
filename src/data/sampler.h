/* The data-parallel sampler Megatron uses with --dataloader-type single
 * (MegatronPretrainingSampler, megatron/training/datasets/data_samplers.py).
 *
 * Global sample indices run from consumed_samples to total_samples - 1 in
 * chunks of micro_batch_size * data_parallel_size; data-parallel rank r takes
 * the micro batch [r * mbs, (r + 1) * mbs) of each chunk; an incomplete last
 * chunk is dropped. A run resumed with the consumed_samples it checkpointed
 * continues exactly where the uninterrupted run would have.
 *
 *     pl_sampler s;
 *     pl_sampler_init(&s, len, consumed, mbs, dp_rank, dp_size);
 *     while (pl_sampler_next(&s, idx))   // idx: mbs global indices
 *         ...
 *
 * Not here: the cyclic (random) sampler, global-batch ramp-up. */
#ifndef PL_DATA_SAMPLER_H
#define PL_DATA_SAMPLER_H

#include "base/status.h"

#include <stdint.h>

typedef struct pl_sampler {
    int64_t total_samples;
    int64_t consumed; /* start of the next chunk */
    int64_t micro_batch_size;
    int64_t dp_rank, dp_size;
} pl_sampler;

/* Checks Megatron's sanity conditions (total > 0, consumed < total, mbs > 0,
 * 0 <= rank < size); errors name the value. */
pl_status pl_sampler_init(pl_sampler *s, int64_t total_samples, int64_t consumed_samples,
                          int64_t micro_batch_size, int64_t dp_rank, int64_t dp_size);

/* Writes this rank's next micro batch (micro_batch_size global indices) to
 * out and returns 1; returns 0 once no complete chunk is left. */
int pl_sampler_next(pl_sampler *s, int64_t *out);

/* Samples consumed by all ranks so far (consumed_samples to checkpoint). */
int64_t pl_sampler_consumed(const pl_sampler *s);

#endif
