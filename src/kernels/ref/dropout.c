/* Reference twin: dropout with a counter-based mask, one pl_rng_u32 per
 * element (base/rng.h), so the mask is a function of (seed, stream, global
 * index) only. */
#include "kernels/kernels.h"

#include "base/rng.h"

void pl_ref_dropout(float *out, const float *inp, int64_t n0, int64_t rows, int64_t T, int64_t C,
                    int64_t Cg, int64_t c0, const int64_t *sample, float p, uint64_t seed,
                    uint64_t stream)
{
    if (p == 0.0f) {
        for (int64_t i = 0; i < rows * C; i++)
            out[i] = inp[i];
        return;
    }
    uint32_t threshold = pl_dropout_threshold(p);
    float scale = (float)(1.0 / (1.0 - (double)p));
    for (int64_t r = 0; r < rows; r++) {
        const int64_t n = n0 + r, b = n / T, t = n % T;
        for (int64_t c = 0; c < C; c++) {
            uint64_t index = ((uint64_t)sample[b] * (uint64_t)T + (uint64_t)t) * (uint64_t)Cg +
                             (uint64_t)(c0 + c);
            int64_t i = r * C + c;
            int keep = pl_rng_u32(seed, stream, index) >= threshold;
            out[i] = inp[i] * (keep ? scale : 0.0f);
        }
    }
}
