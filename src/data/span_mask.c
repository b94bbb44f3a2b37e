/* MegaMolBART's span masking (see span_mask.h). */
#include "data/span_mask.h"

#include "base/rng.h"

#include <math.h>

int64_t pl_span_mask_poisson(double lambda, uint64_t seed, uint64_t stream, uint64_t *index)
{
    /* Knuth: the number of uniforms whose running product stays above
     * e^-lambda. Exact for any lambda where e^-lambda is a normal double. */
    double limit = exp(-lambda), p = 1.0;
    int64_t k = -1;
    do {
        p *= pl_rng_uniform(seed, stream, (*index)++);
        k++;
    } while (p > limit);
    return k;
}

pl_status pl_span_mask(const int32_t *ids, int64_t n, const pl_span_mask_cfg *cfg, uint64_t seed,
                       uint64_t stream, int32_t *out, uint8_t *is_mask, int64_t cap, int64_t *n_out,
                       int *truncated)
{
    if (!(cfg->mask_prob >= 0.0 && cfg->mask_prob <= 1.0))
        return pl_errorf(PL_ERR_ARG, "span mask: mask probability %g, expected [0, 1]",
                         cfg->mask_prob);
    if (!(cfg->span_lambda > 0.0 && cfg->span_lambda <= 30.0))
        return pl_errorf(PL_ERR_ARG, "span mask: span lambda %g, expected (0, 30]",
                         cfg->span_lambda);
    if (n < 0 || cap < 0)
        return pl_errorf(PL_ERR_ARG, "span mask: length %lld, capacity %lld, expected >= 0",
                         (long long)n, (long long)cap);
    uint64_t poisson_index = (uint64_t)n;
    int64_t i = 0, k = 0;
    *truncated = 0;
    while (i < n) {
        int masked = pl_rng_uniform(seed, stream, (uint64_t)i) < cfg->mask_prob;
        if (k == cap) {
            *truncated = 1;
            break;
        }
        if (masked) {
            out[k] = cfg->mask_id;
            is_mask[k++] = 1;
            i += pl_span_mask_poisson(cfg->span_lambda, seed, stream, &poisson_index);
        } else {
            out[k] = ids[i];
            is_mask[k++] = 0;
            i++;
        }
    }
    *n_out = k;
    return PL_OK;
}
