/* base/rng: Philox4x32-10 against Random123's published known answers, the
 * normal draws' moments, the u32 draws' block layout and the dropout threshold. */
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

TEST(u32_draws_are_the_words_of_the_block_of_index_over_4)
{
    const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    static const uint64_t blocks[] = {0, 1, 0xffffffffull, 0x100000000ull, 0x3fffffffffffffffull};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
        uint64_t k = blocks[b];
        const uint32_t ctr[4] = {(uint32_t)k, (uint32_t)(k >> 32), (uint32_t)stream,
                                 (uint32_t)(stream >> 32)};
        uint32_t w[4];
        pl_philox4x32(ctr, key, w);
        for (uint64_t j = 0; j < 4; j++)
            CHECK(pl_rng_u32(seed, stream, 4 * k + j) == w[j], "block %llx word %d",
                  (unsigned long long)k, (int)j);
    }
}

TEST(dropout_threshold_is_p_times_2_to_the_32_rounded_and_clamped)
{
    CHECK(pl_dropout_threshold(0.0) == 0, "p = 0");
    CHECK(pl_dropout_threshold(-0.5) == 0, "p < 0");
    CHECK(pl_dropout_threshold(0.5) == 0x80000000u, "p = 0.5");
    CHECK(pl_dropout_threshold(0.1) == 429496730u, "p = 0.1: %u", pl_dropout_threshold(0.1));
    CHECK(pl_dropout_threshold(0x1p-33) == 1, "half a unit rounds away from zero");
    CHECK(pl_dropout_threshold(1.0 - 0x1p-40) == UINT32_MAX, "rounds to 2^32: clamped");
    CHECK(pl_dropout_threshold(1.0) == UINT32_MAX, "p = 1: clamped");
}

int main(void)
{
    RUN(philox_matches_random123_known_answers);
    RUN(normal_draws_have_unit_moments_and_depend_on_every_key_part);
    RUN(u32_draws_are_the_words_of_the_block_of_index_over_4);
    RUN(dropout_threshold_is_p_times_2_to_the_32_rounded_and_clamped);
    return test_summary("rng");
}
