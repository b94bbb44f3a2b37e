/* base/rng: Philox4x32-10 against Random123's published known answers, and
 * the normal draws' moments. */
#include "base/rng.h"
#include "test.h"

#include <stdint.h>

TEST(philox_matches_random123_known_answers)
{
    /* Random123 tests/kat_vectors, the three "philox4x32 10" lines. */
    static const uint32_t kat[3][3][4] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        pl_philox4x32(kat[i][0], kat[i][1], out);
        for (int k = 0; k < 4; k++)
            CHECK(out[k] == kat[i][2][k], "vector %d word %d: %08x != %08x", i, k, out[k],
                  kat[i][2][k]);
    }
}

TEST(normal_draws_have_unit_moments_and_depend_on_every_key_part)
{
    /* 200k draws: the standard error of the mean is 1/sqrt(n) = 0.0022, of the
     * variance sqrt(2/n) = 0.0032; 5 sigma bounds. */
    const int n = 200000;
    double s1 = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        double x = pl_rng_normal(1234, pl_hash_str("w"), (uint64_t)i);
        s1 += x;
        s2 += x * x;
    }
    double mean = s1 / n, var = s2 / n - mean * mean;
    CHECK(fabs(mean) < 0.011, "mean %g", mean);
    CHECK(fabs(var - 1.0) < 0.016, "variance %g", var);
    double a = pl_rng_normal(1, 2, 3);
    CHECK(a == pl_rng_normal(1, 2, 3), "not a pure function");
    CHECK(a != pl_rng_normal(2, 2, 3) && a != pl_rng_normal(1, 3, 3) && a != pl_rng_normal(1, 2, 4),
          "a key part is ignored");
    CHECK(pl_hash_str("a") != pl_hash_str("b"), "hash");
}

int main(void)
{
    RUN(philox_matches_random123_known_answers);
    RUN(normal_draws_have_unit_moments_and_depend_on_every_key_part);
    return test_summary("rng");
}
