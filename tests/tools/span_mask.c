/* Test helper for tests/scripts/span_mask.sh: runs pl_span_mask on N
 * sequences and prints, per sequence s (stream s, input ids 100.. of length
 * 1 + s % MAXLEN), four tab-separated fields: the input ids, the position
 * draws (1 where u_i < mask_prob), the Poisson lengths drawn in order, and
 * the output ids.
 *   span_mask N MAXLEN MASK_PROB LAMBDA SEED */
#include "data/span_mask.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/rng.h"

enum { MAX_LEN = 512 };

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: span_mask N MAXLEN MASK_PROB LAMBDA SEED\n");
        return 2;
    }
    long n_seq = atol(argv[1]), max_len = atol(argv[2]);
    pl_span_mask_cfg cfg = {atof(argv[3]), atof(argv[4]), 4};
    uint64_t seed = strtoull(argv[5], NULL, 10);
    if (max_len < 1 || max_len > MAX_LEN)
        return 2;
    static int32_t ids[MAX_LEN], out[4 * MAX_LEN];
    static uint8_t is_mask[4 * MAX_LEN];
    for (long s = 0; s < n_seq; s++) {
        int64_t n = 1 + s % max_len, n_out = 0;
        int truncated = 0;
        for (int64_t i = 0; i < n; i++)
            ids[i] = (int32_t)(100 + i);
        if (pl_span_mask(ids, n, &cfg, seed, (uint64_t)s, out, is_mask, 4 * MAX_LEN, &n_out,
                         &truncated) != PL_OK ||
            truncated) {
            fprintf(stderr, "span_mask: %s\n", truncated ? "truncated" : pl_error_msg());
            return 1;
        }
        for (int64_t i = 0; i < n; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        putchar('\t');
        for (int64_t i = 0; i < n; i++)
            putchar(pl_rng_uniform(seed, (uint64_t)s, (uint64_t)i) < cfg.mask_prob ? '1' : '0');
        putchar('\t');
        uint64_t index = (uint64_t)n;
        int first = 1;
        for (int64_t k = 0; k < n_out; k++)
            if (is_mask[k]) {
                printf("%s%lld", first ? "" : " ",
                       (long long)pl_span_mask_poisson(cfg.span_lambda, seed, (uint64_t)s, &index));
                first = 0;
            }
        putchar('\t');
        for (int64_t k = 0; k < n_out; k++)
            printf("%s%d", k ? " " : "", out[k]);
        putchar('\n');
    }
    return 0;
}
