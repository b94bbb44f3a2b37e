/* The normwise relative error the test tools compare logits with:
 * max |a - b| / max |b| over n values. */
#ifndef PL_TESTS_TOOLS_REL_ERR_H
#define PL_TESTS_TOOLS_REL_ERR_H

#include <math.h>
#include <stdint.h>

static inline double rel_err(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return num / den;
}

#endif
