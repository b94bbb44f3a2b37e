/* MegatronPretrainingSampler (megatron/training/datasets/data_samplers.py). */
#include "data/sampler.h"

pl_status pl_sampler_init(pl_sampler *s, int64_t total_samples, int64_t consumed_samples,
                          int64_t micro_batch_size, int64_t dp_rank, int64_t dp_size)
{
    s->total_samples = s->consumed = s->micro_batch_size = s->dp_rank = s->dp_size = 0;
    if (total_samples <= 0)
        return pl_errorf(PL_ERR_ARG, "sampler: no sample to consume (dataset length %lld)",
                         (long long)total_samples);
    if (consumed_samples < 0 || consumed_samples >= total_samples)
        return pl_errorf(PL_ERR_ARG, "--consumed-samples %lld: no samples left to consume of %lld",
                         (long long)consumed_samples, (long long)total_samples);
    if (micro_batch_size <= 0)
        return pl_errorf(PL_ERR_ARG, "--micro-batch-size must be positive, got %lld",
                         (long long)micro_batch_size);
    if (dp_size <= 0)
        return pl_errorf(PL_ERR_ARG, "--data-parallel-size must be positive, got %lld",
                         (long long)dp_size);
    if (dp_rank < 0 || dp_rank >= dp_size)
        return pl_errorf(PL_ERR_ARG, "data-parallel rank %lld outside [0, %lld)",
                         (long long)dp_rank, (long long)dp_size);
    if (micro_batch_size > INT64_MAX / dp_size)
        return pl_errorf(PL_ERR_ARG, "--micro-batch-size %lld x --data-parallel-size %lld overflows",
                         (long long)micro_batch_size, (long long)dp_size);
    s->total_samples = total_samples;
    s->consumed = consumed_samples;
    s->micro_batch_size = micro_batch_size;
    s->dp_rank = dp_rank;
    s->dp_size = dp_size;
    return PL_OK;
}

int pl_sampler_next(pl_sampler *s, int64_t *out)
{
    int64_t chunk = s->micro_batch_size * s->dp_size;
    if (s->total_samples - s->consumed < chunk)
        return 0; /* drop_last: the incomplete chunk is never yielded */
    int64_t start = s->consumed + s->dp_rank * s->micro_batch_size;
    for (int64_t i = 0; i < s->micro_batch_size; i++)
        out[i] = start + i;
    s->consumed += chunk;
    return 1;
}

int64_t pl_sampler_consumed(const pl_sampler *s) { return s->consumed; }
