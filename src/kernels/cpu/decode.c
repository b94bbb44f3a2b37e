/* Fast twin of attention decoding: heads over OpenMP threads, each head's
 * loops as the reference's (vectorized over the head dimension), so the
 * result is the reference's up to the order of the dot products' additions. */
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

void pl_cpu_attention_decode(float *out, const float *qkv, const float *kc, const float *vc,
                             int64_t len, int64_t NH, int64_t G, int64_t HS, float scale,
                             const float *bias, int64_t bias_ld, float *scores)
{
    const int64_t QG = NH / G;
#pragma omp parallel for schedule(static) if (len * NH * HS > 65536)
    for (int64_t h = 0; h < NH; h++) {
        const int64_t g = h / QG;
        const float *restrict q = qkv + (g * (QG + 2) + h % QG) * HS;
        float *restrict s = scores + h * len, *restrict o = out + h * HS;
        float mx = -INFINITY;
        for (int64_t t = 0; t < len; t++) {
            const float *restrict k = kc + (t * G + g) * HS;
            float dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int64_t d = 0; d < HS; d++)
                dot += q[d] * k[d];
            s[t] = dot * scale + (bias ? bias[h * bias_ld + t] : 0.0f);
            mx = s[t] > mx ? s[t] : mx;
        }
        float sum = 0;
        for (int64_t t = 0; t < len; t++)
            sum += s[t] = expf(s[t] - mx);
        memset(o, 0, (size_t)HS * sizeof(float));
        for (int64_t t = 0; t < len; t++) {
            const float *restrict v = vc + (t * G + g) * HS;
            const float p = s[t] / sum;
#pragma omp simd
            for (int64_t d = 0; d < HS; d++)
                o[d] += p * v[d];
        }
    }
}
