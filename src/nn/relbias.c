/* T5's relative position bias: the bucket rule and the table's per-distance
 * vectors (nn/relbias.h). */
#include "nn/relbias.h"

#include <math.h>

int64_t pl_nn_relbias_bucket(const pl_nn_relbias_spec *s, int64_t d)
{
    int64_t n = s->buckets, base = 0;
    if (s->bidirectional) {
        n /= 2;
        base = d > 0 ? n : 0;
        d = d < 0 ? -d : d;
    } else {
        d = d < 0 ? -d : 0;
    }
    const int64_t exact = n / 2;
    if (d < exact)
        return base + d;
    /* torch: log(float(d) / exact) / math.log(max_distance / exact) * (n - exact),
     * float32 throughout (the Python scalars rounded to float), truncated */
    const float ratio = (float)d / (float)exact;
    const float denom = (float)log((double)s->max_distance / (double)exact);
    const float x = logf(ratio) / denom * (float)(n - exact);
    int64_t large = exact + (int64_t)x;
    if (large > n - 1)
        large = n - 1;
    return base + large;
}

void pl_nn_relbias_fill(float *bias, const float *table, const pl_nn_relbias_spec *s,
                        int64_t NHg, int64_t h0, int64_t NH, int64_t R)
{
    for (int64_t d = -(R - 1); d <= R - 1; d++) {
        const float *row = table + pl_nn_relbias_bucket(s, d) * NHg + h0;
        for (int64_t h = 0; h < NH; h++)
            bias[h * (2 * R - 1) + R - 1 + d] = row[h];
    }
}

void pl_nn_relbias_grad(float *dtable, const float *dbias, const pl_nn_relbias_spec *s,
                        int64_t NHg, int64_t h0, int64_t NH, int64_t R)
{
    for (int64_t d = -(R - 1); d <= R - 1; d++) {
        float *row = dtable + pl_nn_relbias_bucket(s, d) * NHg + h0;
        for (int64_t h = 0; h < NH; h++)
            row[h] += dbias[h * (2 * R - 1) + R - 1 + d];
    }
}
