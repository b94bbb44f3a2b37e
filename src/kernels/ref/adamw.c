/* Reference twins: AdamW update (PyTorch arithmetic) and the sum of squares. */
#include "kernels/kernels.h"

#include <math.h>

void pl_ref_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1,
                  float b2, float eps, float wd, float bc1, float bc2, float grad_scale)
{
    float decay = 1.0f - lr * wd;
    float step = lr / bc1;
    float bc2_sqrt = sqrtf(bc2);
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        p[i] *= decay;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step * (m[i] / (sqrtf(v[i]) / bc2_sqrt + eps));
    }
}

double pl_ref_sumsq(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return s;
}
