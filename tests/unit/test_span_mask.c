/* MegaMolBART's span masking (src/data/span_mask.h): the edge cases of the
 * loop and its contract. The loop against MolBART's, and the statistics
 * against MolBART's own RNGs, are tests/scripts/span_mask.sh. */
#include "base/alloc.h"
#include "data/span_mask.h"
#include "test.h"

enum { N = 40 };

static void ids_init(int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)(100 + i);
}

TEST(probability_zero_keeps_every_token)
{
    int32_t ids[N], out[N];
    uint8_t m[N];
    int64_t n_out;
    int trunc;
    ids_init(ids, N);
    CHECK_OK(
        pl_span_mask(ids, N, &(pl_span_mask_cfg){0.0, 3.0, 4}, 1, 0, out, m, N, &n_out, &trunc));
    CHECK(n_out == N && !trunc, "n_out %lld", (long long)n_out);
    for (int i = 0; i < N; i++)
        CHECK(out[i] == ids[i] && m[i] == 0, "position %d", i);
}

TEST(probability_one_gives_only_masks_each_consuming_its_poisson_length)
{
    int32_t ids[N], out[4 * N];
    uint8_t m[4 * N];
    int64_t n_out;
    int trunc;
    ids_init(ids, N);
    CHECK_OK(pl_span_mask(ids, N, &(pl_span_mask_cfg){1.0, 3.0, 4}, 9, 5, out, m, 4 * N, &n_out,
                          &trunc));
    uint64_t index = N;
    int64_t consumed = 0;
    for (int64_t k = 0; k < n_out; k++) {
        CHECK(out[k] == 4 && m[k] == 1, "output %lld is not <MASK>", (long long)k);
        consumed += pl_span_mask_poisson(3.0, 9, 5, &index);
        CHECK(k == n_out - 1 ? consumed >= N : consumed < N, "after %lld masks %lld consumed",
              (long long)k + 1, (long long)consumed);
    }
}

TEST(same_seed_and_stream_same_output_other_stream_other_output)
{
    int32_t ids[N], a[4 * N], b[4 * N];
    uint8_t ma[4 * N], mb[4 * N];
    int64_t na, nb;
    int trunc, differ = 0;
    ids_init(ids, N);
    pl_span_mask_cfg cfg = {0.3, 3.0, 4};
    for (uint64_t s = 0; s < 20; s++) {
        CHECK_OK(pl_span_mask(ids, N, &cfg, 42, s, a, ma, 4 * N, &na, &trunc));
        CHECK_OK(pl_span_mask(ids, N, &cfg, 42, s, b, mb, 4 * N, &nb, &trunc));
        CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0, "stream %llu differs",
              (unsigned long long)s);
        CHECK_OK(pl_span_mask(ids, N, &cfg, 42, s + 100, b, mb, 4 * N, &nb, &trunc));
        differ += na != nb || memcmp(a, b, (size_t)na * sizeof *a) != 0;
    }
    CHECK(differ >= 15, "only %d of 20 streams differ", differ);
}

TEST(output_is_cut_at_capacity_and_says_so)
{
    int32_t ids[N], full[4 * N], cut[8];
    uint8_t mf[4 * N], mc[8];
    int64_t nf, nc;
    int tf, tc;
    ids_init(ids, N);
    pl_span_mask_cfg cfg = {0.2, 3.0, 4};
    CHECK_OK(pl_span_mask(ids, N, &cfg, 3, 1, full, mf, 4 * N, &nf, &tf));
    CHECK_OK(pl_span_mask(ids, N, &cfg, 3, 1, cut, mc, 8, &nc, &tc));
    CHECK(nf > 8 && !tf && nc == 8 && tc, "full %lld, cut %lld (%d)", (long long)nf, (long long)nc,
          tc);
    CHECK(memcmp(full, cut, sizeof cut) == 0 && memcmp(mf, mc, sizeof mc) == 0, "prefix differs");
}

TEST(bad_configuration_is_an_argument_error)
{
    int32_t ids[2] = {7, 8}, out[4];
    uint8_t m[4];
    int64_t n;
    int t;
    CHECK(pl_span_mask(ids, 2, &(pl_span_mask_cfg){1.5, 3, 4}, 0, 0, out, m, 4, &n, &t) ==
              PL_ERR_ARG,
          "probability 1.5");
    CHECK(strstr(pl_error_msg(), "expected [0, 1]") != NULL, "%s", pl_error_msg());
    CHECK(pl_span_mask(ids, 2, &(pl_span_mask_cfg){0.1, 0, 4}, 0, 0, out, m, 4, &n, &t) ==
              PL_ERR_ARG,
          "lambda 0");
    CHECK(pl_span_mask(ids, 2, &(pl_span_mask_cfg){0.1, 3, 4}, 0, 0, out, m, -1, &n, &t) ==
              PL_ERR_ARG,
          "negative capacity");
    CHECK(pl_alloc_live() == 0, "allocated %lld blocks", (long long)pl_alloc_live());
}

int main(void)
{
    RUN(probability_zero_keeps_every_token);
    RUN(probability_one_gives_only_masks_each_consuming_its_poisson_length);
    RUN(same_seed_and_stream_same_output_other_stream_other_output);
    RUN(output_is_cut_at_capacity_and_says_so);
    RUN(bad_configuration_is_an_argument_error);
    return test_summary("span_mask");
}
