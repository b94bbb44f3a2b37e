/* Reference twins: token and position embeddings (plain loops, the specification). */
#include "kernels/kernels.h"

#include <string.h>

void pl_ref_embedding_fwd(float *out, const int32_t *ids, const float *wte, int64_t N, int64_t C,
                          int64_t v0, int64_t V)
{
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)ids[n] - v0;
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] = (row >= 0 && row < V) ? wte[row * C + c] : 0.0f;
    }
}

void pl_ref_embedding_bwd(float *dwte, const float *dout, const int32_t *ids, int64_t N, int64_t C,
                          int64_t v0, int64_t V)
{
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)ids[n] - v0;
        if (row < 0 || row >= V)
            continue;
        for (int64_t c = 0; c < C; c++)
            dwte[row * C + c] += dout[n * C + c];
    }
}

void pl_ref_pos_embedding_fwd(float *out, const float *wpe, int64_t B, int64_t T, int64_t C)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++)
                out[(b * T + t) * C + c] += wpe[t * C + c];
}

void pl_ref_pos_embedding_bwd(float *dwpe, const float *dout, int64_t B, int64_t T, int64_t C)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++)
                dwpe[t * C + c] += dout[(b * T + t) * C + c];
}
