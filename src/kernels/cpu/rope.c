/* Fast twin: rotary position embedding (OpenMP over the B*T rows, vectorized
 * over the rotated half of a head).
 *
 * Elementwise: two products and one add or subtract per output, as in the
 * reference (ISO C mode never fuses them), so bit for bit the reference in
 * either build and for any thread count. */
#include "kernels/kernels.h"

#include "kernels/cpu/simd.h"

#define PAR_MIN 32768

void pl_cpu_rope_fwd(float *qkv, const float *cos_tab, const float *sin_tab, int64_t B, int64_t T,
                     int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0)
{
    PL_DISPATCH(rope_fwd, qkv, cos_tab, sin_tab, B, T, G, QG, HS, rot, pos0);
    int64_t half = rot / 2, H = QG + 2;
#pragma omp parallel for schedule(static) if (B * T * G * (QG + 1) * rot > PAR_MIN)
    for (int64_t n = 0; n < B * T; n++) {
        int64_t p = pos0 + n % T;
        const float *restrict c = cos_tab + p * half, *restrict s = sin_tab + p * half;
        for (int64_t g = 0; g < G; g++)
            for (int64_t h = 0; h <= QG; h++) { /* QG q heads, then k */
                float *restrict x1 = qkv + ((n * G + g) * H + h) * HS, *restrict x2 = x1 + half;
#pragma omp simd
                for (int64_t i = 0; i < half; i++) {
                    float a = x1[i], b = x2[i];
                    x1[i] = a * c[i] - b * s[i];
                    x2[i] = b * c[i] + a * s[i];
                }
            }
    }
}

void pl_cpu_rope_bwd(float *dqkv, const float *cos_tab, const float *sin_tab, int64_t B,
                     int64_t T, int64_t G, int64_t QG, int64_t HS, int64_t rot, int64_t pos0)
{
    PL_DISPATCH(rope_bwd, dqkv, cos_tab, sin_tab, B, T, G, QG, HS, rot, pos0);
    int64_t half = rot / 2, H = QG + 2;
#pragma omp parallel for schedule(static) if (B * T * G * (QG + 1) * rot > PAR_MIN)
    for (int64_t n = 0; n < B * T; n++) {
        int64_t p = pos0 + n % T;
        const float *restrict c = cos_tab + p * half, *restrict s = sin_tab + p * half;
        for (int64_t g = 0; g < G; g++)
            for (int64_t h = 0; h <= QG; h++) {
                float *restrict x1 = dqkv + ((n * G + g) * H + h) * HS, *restrict x2 = x1 + half;
#pragma omp simd
                for (int64_t i = 0; i < half; i++) {
                    float a = x1[i], b = x2[i];
                    x1[i] = a * c[i] + b * s[i];
                    x2[i] = b * c[i] - a * s[i];
                }
            }
    }
}
