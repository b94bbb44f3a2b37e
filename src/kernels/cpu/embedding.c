/* Fast twins: token and position embeddings (OpenMP over rows or columns).
 *
 * Backward kernels split the work by columns, never by rows, so each output
 * element is summed by one thread in the reference's order (over n, or b):
 * results equal the reference bit for bit, for any thread count. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#include <string.h>

/* Columns per work item in the column-split loops: 64 floats, one 256-byte run. */
#define COL_BLOCK 64
/* Below this many elements a kernel runs on one thread (fork/join costs ~µs). */
#define PAR_MIN 32768

void pl_cpu_embedding_fwd(float *out, const int32_t *ids, const float *wte, int64_t N, int64_t C,
                          int64_t v0, int64_t V)
{
    PL_DISPATCH(embedding_fwd, out, ids, wte, N, C, v0, V);
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t n = 0; n < N; n++) {
        int64_t row = (int64_t)ids[n] - v0;
        if (row >= 0 && row < V)
            memcpy(out + n * C, wte + row * C, (size_t)C * sizeof *out);
        else
            memset(out + n * C, 0, (size_t)C * sizeof *out);
    }
}

void pl_cpu_embedding_bwd(float *dwte, const float *dout, const int32_t *ids, int64_t N, int64_t C,
                          int64_t v0, int64_t V)
{
    PL_DISPATCH(embedding_bwd, dwte, dout, ids, N, C, v0, V);
    int64_t nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int64_t n = 0; n < N; n++) {
            int64_t row = (int64_t)ids[n] - v0;
            if (row < 0 || row >= V)
                continue;
            float *restrict d = dwte + row * C;
            const float *restrict s = dout + n * C;
#pragma omp simd
            for (int64_t c = c0; c < c1; c++)
                d[c] += s[c];
        }
    }
}

void pl_cpu_pos_embedding_fwd(float *out, const float *wpe, int64_t B, int64_t T, int64_t C)
{
    PL_DISPATCH(pos_embedding_fwd, out, wpe, B, T, C);
#pragma omp parallel for schedule(static) if (B * T * C > PAR_MIN)
    for (int64_t bt = 0; bt < B * T; bt++) {
        float *restrict o = out + bt * C;
        const float *restrict p = wpe + (bt % T) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++)
            o[c] += p[c];
    }
}

void pl_cpu_pos_embedding_bwd(float *dwpe, const float *dout, int64_t B, int64_t T, int64_t C)
{
    PL_DISPATCH(pos_embedding_bwd, dwpe, dout, B, T, C);
#pragma omp parallel for schedule(static) if (B * T * C > PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        float *restrict d = dwpe + t * C;
        for (int64_t b = 0; b < B; b++) {
            const float *restrict s = dout + (b * T + t) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; c++)
                d[c] += s[c];
        }
    }
}
