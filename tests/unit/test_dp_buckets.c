/* parallel/dp/buckets without MPI: the split helper, validation, and the dp = 1 path.
 *
 * MPI is never initialised in this program, so any MPI call the dp = 1 path made would
 * abort it ("called before MPI_INIT"): passing here proves that dp = 1 does no MPI. The
 * multi-rank behaviour is checked under mpirun by tests/tools/mpi_check.c. */
#include "base/alloc.h"
#include "base/status.h"
#include "parallel/dp/buckets.h"
#include "test.h"

/* A one-rank communicator that was never touched by MPI. */
static pl_comm solo_comm(void)
{
    pl_comm c;
    memset(&c, 0, sizeof c);
    c.mpi = MPI_COMM_SELF;
    c.rank = 0;
    c.size = 1;
    snprintf(c.name, sizeof c.name, "dp");
    return c;
}

TEST(split_closes_buckets_at_parameter_starts_walking_backward)
{
    /* Parameters [0,10) [10,30) [30,35) [35,100); bucket_elems 40: walking down from 100,
     * [35,100) holds 65 >= 40 -> close; then [30,35)+[10,30) = 25, +[0,10) -> the rest. */
    int64_t bounds[] = {30, 10, 35};
    pl_dp_range *r;
    int n;
    CHECK_OK(pl_dp_buckets_split(100, bounds, 3, 40, &r, &n));
    CHECK(n == 2, "n %d", n);
    if (n == 2) {
        CHECK(r[0].offset == 35 && r[0].count == 65, "bucket 0 [%lld,+%lld)", (long long)r[0].offset,
              (long long)r[0].count);
        CHECK(r[1].offset == 0 && r[1].count == 35, "bucket 1 [%lld,+%lld)", (long long)r[1].offset,
              (long long)r[1].count);
    }
    pl_free(r);

    CHECK_OK(pl_dp_buckets_split(100, bounds, 3, 5, &r, &n)); /* every parameter its own */
    CHECK(n == 4 && r[0].offset == 35 && r[1].offset == 30 && r[2].offset == 10 && r[3].offset == 0,
          "n %d", n);
    pl_free(r);

    CHECK_OK(pl_dp_buckets_split(100, bounds, 3, 0, &r, &n)); /* no overlap: one bucket */
    CHECK(n == 1 && r[0].offset == 0 && r[0].count == 100, "n %d", n);
    pl_free(r);

    int64_t dup[] = {50, 0, 50}; /* 0 may be given; duplicates collapse */
    CHECK_OK(pl_dp_buckets_split(100, dup, 3, 1, &r, &n));
    CHECK(n == 2 && r[0].offset == 50 && r[1].offset == 0, "duplicate bounds: n %d", n);
    pl_free(r);

    CHECK_OK(pl_dp_buckets_split(0, NULL, 0, 10, &r, &n));
    CHECK(n == 0 && r == NULL, "empty buffer: n %d", n);
}

TEST(split_rejects_bounds_outside_the_buffer)
{
    pl_dp_range *r;
    int n;
    int64_t bad[] = {10, 100};
    CHECK(pl_dp_buckets_split(100, bad, 2, 10, &r, &n) == PL_ERR_ARG, "bound == n accepted");
    CHECK(strstr(pl_error_msg(), "bound 1 is 100") != NULL, "message: %s", pl_error_msg());
    int64_t neg[] = {-1};
    CHECK(pl_dp_buckets_split(100, neg, 1, 10, &r, &n) == PL_ERR_ARG, "negative bound accepted");
}

TEST(init_rejects_ranges_that_do_not_partition_the_buffer)
{
    pl_comm c = solo_comm();
    float g[10];
    pl_dp_buckets *b;
    pl_dp_range gap[] = {{5, 5}, {0, 4}};
    CHECK(pl_dp_buckets_init(&b, &c, g, 10, gap, 2) == PL_ERR_ARG && b == NULL, "gap accepted");
    CHECK(strstr(pl_error_msg(), "gap") != NULL, "message: %s", pl_error_msg());
    pl_dp_range overlap[] = {{4, 6}, {0, 5}};
    CHECK(pl_dp_buckets_init(&b, &c, g, 10, overlap, 2) == PL_ERR_ARG, "overlap accepted");
    CHECK(strstr(pl_error_msg(), "overlap") != NULL, "message: %s", pl_error_msg());
    pl_dp_range shortr[] = {{0, 8}};
    CHECK(pl_dp_buckets_init(&b, &c, g, 10, shortr, 1) == PL_ERR_ARG, "short cover accepted");
    pl_dp_range empty[] = {{0, 10}, {10, 0}};
    CHECK(pl_dp_buckets_init(&b, &c, g, 10, empty, 2) == PL_ERR_ARG, "empty bucket accepted");
}

TEST(dp1_marks_and_finishes_without_mpi_and_leaves_gradients_unscaled)
{
    pl_comm c = solo_comm();
    float g[100];
    for (int i = 0; i < 100; i++)
        g[i] = (float)i * 0.5f;
    int64_t bounds[] = {10, 30, 35};
    pl_dp_range *r;
    int n;
    CHECK_OK(pl_dp_buckets_split(100, bounds, 3, 20, &r, &n));
    pl_dp_buckets *b = NULL;
    CHECK_OK(pl_dp_buckets_init(&b, &c, g, 100, r, n));
    pl_free(r);
    if (!b)
        return;
    for (int step = 0; step < 3; step++) {
        CHECK_OK(pl_dp_buckets_ready(b, 35, 65));
        CHECK_OK(pl_dp_buckets_ready(b, 0, 20));
        CHECK_OK(pl_dp_buckets_ready(b, 20, 15));
        CHECK_OK(pl_dp_buckets_finish(b));
    }
    int same = 1;
    for (int i = 0; i < 100; i++)
        same &= g[i] == (float)i * 0.5f;
    CHECK(same, "dp = 1 changed the gradients");
    const pl_dp_buckets_stats *s = pl_dp_buckets_stats_get(b);
    CHECK(s->steps == 3 && s->total.buckets == 0 && s->total.busy == 0.0, "steps %lld allreduces %lld",
          (long long)s->steps, (long long)s->total.buckets);
    CHECK(!pl_dp_buckets_threaded(b), "dp = 1 started a communication thread");
    CHECK(c.stats.kind[PL_COMM_ALLREDUCE].calls == 0, "dp = 1 counted an all-reduce");
    pl_dp_buckets_free(b);
}

TEST(marking_twice_or_finishing_early_is_an_error)
{
    pl_comm c = solo_comm();
    float g[10] = {0};
    pl_dp_range r[] = {{5, 5}, {0, 5}};
    pl_dp_buckets *b = NULL;
    CHECK_OK(pl_dp_buckets_init(&b, &c, g, 10, r, 2));
    if (!b)
        return;
    CHECK_OK(pl_dp_buckets_ready(b, 6, 4));
    CHECK(pl_dp_buckets_ready(b, 5, 2) == PL_ERR_ARG, "double mark accepted");
    CHECK(strstr(pl_error_msg(), "marked twice") != NULL, "message: %s", pl_error_msg());
    CHECK(pl_dp_buckets_finish(b) != PL_OK, "finish with unmarked elements accepted");
    CHECK(strstr(pl_error_msg(), "bucket 1 [0, 5)") != NULL || strstr(pl_error_msg(), "bucket 0") != NULL,
          "message: %s", pl_error_msg());
    CHECK(pl_dp_buckets_ready(b, 8, 3) == PL_ERR_ARG, "range past the end accepted");
    /* After the failed finish the step was reset: a full step works again. */
    CHECK_OK(pl_dp_buckets_ready(b, 0, 10));
    CHECK_OK(pl_dp_buckets_finish(b));
    pl_dp_buckets_free(b);
}

TEST(allocation_failures_return_nomem_and_leak_nothing)
{
    pl_comm c = solo_comm();
    float g[100];
    int64_t bounds[] = {10, 30, 35};
    int failures = 0;
    for (int64_t k = 0; k < 20; k++) {
        int64_t live = pl_alloc_live();
        pl_alloc_fail_after(k);
        pl_dp_range *r = NULL;
        int n = 0;
        pl_dp_buckets *b = NULL;
        pl_status st = pl_dp_buckets_split(100, bounds, 3, 20, &r, &n);
        if (st == PL_OK)
            st = pl_dp_buckets_init(&b, &c, g, 100, r, n);
        pl_alloc_fail_after(-1);
        if (st != PL_OK) {
            failures++;
            CHECK(st == PL_ERR_NOMEM, "fail after %lld: %s", (long long)k, pl_status_str(st));
            CHECK(b == NULL, "buckets returned on failure");
        }
        pl_dp_buckets_free(b);
        pl_free(r);
        CHECK(pl_alloc_live() == live, "fail after %lld: %lld blocks leaked", (long long)k,
              (long long)(pl_alloc_live() - live));
    }
    CHECK(failures >= 5, "only %d injected failures hit", failures);
}

int main(void)
{
    RUN(split_closes_buckets_at_parameter_starts_walking_backward);
    RUN(split_rejects_bounds_outside_the_buffer);
    RUN(init_rejects_ranges_that_do_not_partition_the_buffer);
    RUN(dp1_marks_and_finishes_without_mpi_and_leaves_gradients_unscaled);
    RUN(marking_twice_or_finishing_early_is_an_error);
    RUN(allocation_failures_return_nomem_and_leak_nothing);
    return test_summary("dp_buckets");
}
